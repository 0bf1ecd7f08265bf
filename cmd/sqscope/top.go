package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/internal/durflag"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/tui"
	"github.com/sqscope/sqscope/workload"
)

func topCmd() *cobra.Command {
	var tf cli.Target
	var interval float64
	var noTUI bool
	c := cli.Command("top", "watch a verbs application's send queues live in the terminal",
		"top [-p PID | -c CMD | -a | --workload -- FLAGS | -- CMD ARGS...] [flags]",
		"Watch a verbs application's send queues live: occupancy, doorbells, savings, alerts.",
		cli.TopExamples)
	fs := c.Flags()
	fs.SetInterspersed(false) // a command's own flags follow it
	tf.Register(fs)
	durflag.SecondsVarP(fs, &interval, "interval", "i", 0.1, "refresh every `DURATION`, e.g. 0.1 or 100ms (text reports without a terminal: every second unless given)")
	fs.BoolVar(&noTUI, "no-tui", false, "print periodic text reports even on a terminal")
	tf.Complete(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		if tf.PID == 0 && tf.Cmd == "" && !tf.Workload && len(args) == 0 {
			tf.All = true // no target: the whole host, as top shows it
		}
		if err := tf.Check(args); err != nil {
			return cli.UsageErr("top: %v", err)
		}
		if interval <= 0 || interval > 3600 {
			return cli.UsageErr("top: -i %g: want a positive number of seconds", interval)
		}
		return watch(c.Context(), &tf, args, watchOpts{interval: interval, intervalGiven: fs.Changed("interval"), noTUI: noTUI}, c.OutOrStdout(), c.ErrOrStderr())
	}
	return c
}

func demoCmd() *cobra.Command {
	var seconds, after, interval float64
	var noTUI bool
	c := cli.Command("demo", "watch the built-in workload run healthy, then overflow an SQ (simulated HCA)", "demo [flags]",
		"Trace the built-in workload on the simulated HCA in a scripted scenario: four QPs\npost inline with a CQE every 16th WR; then one QP stops signaling, its send queue\nfills and ibv_post_send fails with ENOMEM. Needs root (eBPF).",
		fmt.Sprintf("\nThe workload it runs: sqscope workload %s\n", strings.Join(workload.DemoArgs(60, 8), " ")))
	fs := c.Flags()
	durflag.SecondsVarP(fs, &seconds, "duration", "D", 60, "run the scenario for `DURATION`, e.g. 60 or 1m")
	durflag.SecondsVarP(fs, &after, "fault-after", "", 8, "turn the never-signal bug on after `DURATION`")
	durflag.SecondsVarP(fs, &interval, "interval", "i", 0.1, "refresh every `DURATION`")
	fs.BoolVar(&noTUI, "no-tui", false, "print periodic text reports even on a terminal")
	c.ValidArgsFunction = cobra.NoFileCompletions
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return cli.UsageErr("demo: unexpected argument %q", args[0])
		}
		if seconds <= 0 || after < 0 || after >= seconds || interval <= 0 {
			return cli.UsageErr("demo: want -D > --fault-after >= 0 and -i > 0")
		}
		tf := cli.Target{Workload: true, Mode: session.ModeEvents, Timeout: 10 * time.Second, RingMiB: 8}
		return watch(c.Context(), &tf, workload.DemoArgs(seconds, after), watchOpts{interval: interval, intervalGiven: fs.Changed("interval"), noTUI: noTUI}, c.OutOrStdout(), c.ErrOrStderr())
	}
	return c
}

type watchOpts struct {
	interval      float64
	intervalGiven bool
	noTUI         bool
}

// watch runs a session under the TUI, or prints text reports when stdout is
// not a terminal.
func watch(ctx context.Context, tf *cli.Target, rest []string, o watchOpts, stdout, stderr io.Writer) error {
	headless := o.noTUI || !cli.IsTerminal(stdout)
	// Under the TUI the target's output would scribble over the screen:
	// keep its tail and print it after the TUI closes.
	var childOut *session.Tail
	var out io.Writer
	if !headless {
		childOut = &session.Tail{Max: 64 << 10}
		out = childOut
	}
	s, err := tf.Start(ctx, rest, stderr, out, version)
	if err != nil {
		return err
	}
	defer s.Close()
	if headless {
		every := time.Second
		if o.intervalGiven {
			every = time.Duration(o.interval * float64(time.Second))
		}
		err := s.RunEvery(ctx, every, func() {
			fmt.Fprintf(stdout, "--- %s\n", time.Now().Format("15:04:05"))
			report.Text{Verbose: tf.Verbose}.Write(stdout, s.Analyzer().Snapshot())
		})
		if werr := (report.Text{Verbose: tf.Verbose}).Write(stdout, s.Analyzer().Snapshot()); err == nil && werr != nil {
			err = fmt.Errorf("writing the report: %w", werr)
		}
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	app, err := tui.NewApplication()
	if err != nil {
		cancel()
		return errors.Join(<-runErr, fmt.Errorf("terminal UI: %w", err))
	}
	u := tui.New(tui.Live{A: s.Analyzer()}, tui.Info{Target: s.Target(), PID: s.PID(), Mode: s.Mode(), SelfCPU: session.SelfCPU}, app)
	uiErr := u.Run(ctx, time.Duration(o.interval*float64(time.Second)))
	cancel() // the user quit: stop (and stop the target we started)
	err = <-runErr
	if childOut != nil && s.Started() {
		if b := childOut.Bytes(); len(b) > 0 {
			fmt.Fprintf(stdout, "--- output of %s (last %d bytes at most)\n", s.Target(), childOut.Max)
			stdout.Write(b)
		}
	}
	if uiErr != nil {
		return errors.Join(err, fmt.Errorf("terminal UI: %w", uiErr))
	}
	return err
}

func replayCmd() *cobra.Command {
	var speed, interval float64
	var bf cli.BF
	c := cli.Command("replay", "show a recording in the live view, with pause, speed and seek", "replay FILE [flags]",
		"Show a recording in the live view at the pace it was recorded: p pauses,\n+/- change the speed, left/right seek 10 s. Without a terminal, print its report.",
		"")
	fs := c.Flags()
	fs.Float64Var(&speed, "speed", 1, "replay `SPEED` (2 = twice as fast)")
	durflag.SecondsVarP(fs, &interval, "interval", "i", 0.1, "refresh every `DURATION`")
	bf.Register(fs)
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stdout, stderr := c.Context(), c.OutOrStdout(), c.ErrOrStderr()
		path, err := cli.OneFile("replay", args)
		if err != nil {
			return err
		}
		if speed <= 0 || interval <= 0 {
			return cli.UsageErr("replay: --speed and -i must be positive")
		}
		if !cli.IsTerminal(stdout) {
			// the recording's report, its errors replay's
			f := &reportFlags{bf: bf, page: cli.Page{Out: "-"}}
			return f.write(ctx, "replay", fs, path, stdout, stderr)
		}
		rp, info, err := session.OpenReplay(path, func(fi trace.FileInfo) analyzer.Options {
			return analyzer.Options{BF: bf.Config(fs, fi), Clock: fi.Anchor(), Mode: fi.ProbeMode}
		})
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		defer rp.Close()
		rp.Speed(speed)
		app, err := tui.NewApplication()
		if err != nil {
			return fmt.Errorf("terminal UI: %w", err)
		}
		u := tui.New(rp, tui.Info{Target: info.Target, PID: int(info.TargetPID), Mode: "replay of " + path, Warning: rp.Warning()}, app)
		if err := u.Run(ctx, time.Duration(interval*float64(time.Second))); err != nil {
			return fmt.Errorf("terminal UI: %w", err)
		}
		if err := rp.Err(); err != nil || rp.Warning() == "" {
			return err
		}
		return fmt.Errorf("replay: %s: %s", path, rp.Warning()) // not the whole recording: say so in the exit status
	}
	return c
}
