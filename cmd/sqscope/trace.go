package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/internal/durflag"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/verbs"
)

func traceCmd() *cobra.Command {
	var tf cli.Target
	var page cli.TracePage
	var interval time.Duration
	var asJSON bool
	var out string
	c := cli.Command("trace", "trace a verbs application's send queues and print a per-QP summary",
		"trace (-p PID | -c CMD | -a | --workload -- FLAGS | -- CMD ARGS...) [flags]",
		"Trace every post and poll of a verbs application and print, per send queue,\nwhat it did, when the target exits or on Ctrl-C.",
		cli.TraceExamples)
	fs := c.Flags()
	fs.SetInterspersed(false) // a command's own flags follow it
	tf.Register(fs)
	durflag.VarP(fs, &interval, "interval", "i", 0, "also print the summary every `DURATION`, e.g. 1 or 500ms")
	fs.BoolVar(&asJSON, "json", false, "print the summary as JSON: stdout holds only JSON (the target's output goes to stderr); with -i one object per line (NDJSON), its \"interval\" what the interval added")
	fs.StringVarP(&out, "output", "o", "", "write the summary to `FILE` instead of stdout (- for stdout)")
	page.Register(fs)
	tf.Complete(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stdout, stderr := c.Context(), c.OutOrStdout(), c.ErrOrStderr()
		if err := tf.Check(args); err != nil {
			return cli.UsageErr("trace: %v", err)
		}
		w, childOut, onStdout := stdout, io.Writer(nil), "the summary"
		var f *outfile.File
		if out != "" && out != outfile.Stdout {
			var err error
			if f, err = outfile.Create(out, 0o600, nil, false, true); err != nil {
				return fmt.Errorf("trace: %w", err)
			}
			defer f.Discard()
			w, onStdout = f, ""
		}
		if err := page.Open("trace", &tf, []string{out}, onStdout, stdout); err != nil {
			return err
		}
		defer page.Discard()
		if asJSON && onStdout != "" || page.ToStdout() {
			childOut = stderr // nothing but JSON, or the page, on stdout
		}
		s, err := tf.Start(ctx, args, stderr, childOut, version)
		if err != nil {
			return err
		}
		defer s.Close()
		page.Watch(&tf, s)

		deltas := analyzer.NewDeltas(time.Now()) // with -i, what each interval added
		print := func() error {
			snap := s.Analyzer().Snapshot()
			cost := s.Cost(snap.Events)
			if asJSON { // one document; with -i, one per line
				var iv *analyzer.Interval
				if interval > 0 {
					iv = deltas.Next(snap, time.Now())
				}
				return cli.WriteJSON(w, struct {
					analyzer.Snapshot
					Self     session.SelfCost   `json:"sqscope_cpu"`
					Interval *analyzer.Interval `json:"interval,omitempty"`
				}{snap, cost, iv}, interval == 0)
			}
			if err := (report.Text{Verbose: tf.Verbose}).Write(w, snap); err != nil {
				return fmt.Errorf("trace: writing the summary: %w", err)
			}
			_, err := fmt.Fprintln(w, cost)
			return err
		}
		// however the trace ended, what was seen is printed (it says why)
		err = s.RunEvery(ctx, interval, func() { print() })
		if perr := print(); err == nil {
			err = perr
		}
		if f != nil {
			if cerr := f.Commit(); err == nil && cerr != nil {
				err = fmt.Errorf("trace: writing %s: %w", out, cerr)
			}
		}
		if perr := page.Write(ctx, &tf, verbs.DefaultNICModel(), stderr); err == nil && perr != nil {
			err = fmt.Errorf("trace: %w", perr)
		}
		if err == nil {
			err = tf.Status(s.Analyzer().Snapshot())
		}
		return err
	}
	return c
}
