package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/cli"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/session"
)

// targetFlags are the flags every tracing command shares (trace, record,
// top): what to trace and how.
type targetFlags struct {
	pid      int
	cmd      string
	workload bool
	all      bool // -a: every verbs process of the host
	noFollow bool // --no-follow: not the started command's children
	probes   []probe.ExplicitProbe
	anywhere bool
	mode     string
	callTime bool
	noStop   bool
	wait     bool
	timeout  time.Duration
	duration time.Duration
	ringMiB  int
	failOn   string // --fail-on: a diagnosis severity
	keep     bool   // --keep-target
	recordTo string // record's -o
	force    bool   // record's --force
	attach   session.AttachFlags
}

func (tf *targetFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&tf.pid, "p", 0, "trace a running process by PID")
	fs.StringVar(&tf.cmd, "c", "", "start CMD (a command line) and trace it")
	fs.BoolVar(&tf.workload, "workload", false, "start the built-in workload with the flags after -- and trace it")
	fs.BoolVar(&tf.all, "a", false, "trace every process of the host that uses verbs, running now or started later, until Ctrl-C or -D")
	fs.BoolVar(&tf.noFollow, "no-follow", false, "trace only the started command, not the processes it starts (by default its children are traced too)")
	fs.Func("probe", "explicit data-path probe FUNC=LIB:0xOFFSET (post_send, poll_cq, post_recv); repeatable", func(s string) error {
		p, err := probe.ParseProbe(s)
		if err != nil {
			return err
		}
		tf.probes = append(tf.probes, p)
		return nil
	})
	fs.BoolVar(&tf.anywhere, "force-probe", false, "accept a --probe offset inside a function the library's symbols know (by default only a function's start)")
	fs.StringVar(&tf.mode, "mode", "events", "events (every call) or counters (per-QP totals kept in the kernel, lower overhead)")
	fs.BoolVar(&tf.callTime, "call-times", false, "also record when each post and poll was entered (events mode; costs a clock read per call, and the interval is mostly the probe's own)")
	fs.BoolVar(&tf.noStop, "no-stop", false, "never pause the target while probes for newly found functions are attached (calls in that window are missed)")
	fs.BoolVar(&tf.keep, "keep-target", false, "leave a command sqscope started running when tracing stops first (default: stop it with SIGINT, then SIGTERM, then SIGKILL)")
	fs.BoolVar(&tf.wait, "wait", false, "keep waiting for a target that has not loaded a verbs library")
	for _, n := range []string{"D", "duration"} {
		fs.DurationVar(&tf.duration, n, 0, "stop tracing after this long, e.g. 30s (a command sqscope started is stopped too, as on Ctrl-C)")
	}
	fs.DurationVar(&tf.timeout, "verbs-timeout", 10*time.Second, "how long to wait for the target to load a verbs library before saying so")
	fs.StringVar(&tf.failOn, "fail-on", "", "exit with status 3 when a diagnosis of this severity or worse was made: error, warning or prediction (for CI)")
	fs.IntVar(&tf.ringMiB, "ring-mib", 8, "ring buffer size in MiB (a power of two)")
	tf.attach.Register(fs)
}

// check validates the combination; rest is what followed "--".
func (tf *targetFlags) check(rest []string) error {
	n := len(slices.DeleteFunc([]bool{tf.pid != 0, tf.cmd != "", tf.workload, tf.all}, func(given bool) bool { return !given }))
	switch {
	case n == 0 && len(rest) == 0:
		return errors.New("no target: give -p PID, -c CMD, -- CMD ARGS, -a or --workload -- FLAGS")
	case n > 1:
		return errors.New("give only one of -p, -c, -a and --workload")
	case tf.pid < 0:
		return fmt.Errorf("bad process id %d", tf.pid)
	case len(rest) > 0 && !tf.workload && n > 0:
		return fmt.Errorf("unexpected arguments %q: a command goes after -- without -c, -p or -a, workload flags after --workload --", strings.Join(rest, " "))
	case tf.noFollow && (tf.pid != 0 || tf.all):
		return errors.New("--no-follow: only a command sqscope starts is followed (-c, -- CMD, --workload)")
	case tf.mode != "events" && tf.mode != "counters":
		return fmt.Errorf("--mode %q: want events or counters", tf.mode)
	case tf.callTime && tf.mode != "events":
		return errors.New("--call-times needs --mode events")
	case tf.ringMiB <= 0 || tf.ringMiB&(tf.ringMiB-1) != 0 || tf.ringMiB > 1024:
		return fmt.Errorf("--ring-mib %d: want a power of two up to 1024", tf.ringMiB)
	case severityRank[tf.failOn] == 0 && tf.failOn != "":
		return fmt.Errorf("--fail-on %q: want error, warning or prediction", tf.failOn)
	case tf.duration < 0:
		return errors.New("-D/--duration must be positive")
	case tf.timeout <= 0:
		return errors.New("--verbs-timeout must be positive")
	}
	return nil
}

// start starts the session the flags describe; rest is what followed
// "--". A started target writes to childOut, or to sqscope's own stdout
// and stderr when it is nil.
func (tf *targetFlags) start(rest []string, stderr, childOut io.Writer) (*session.Session, error) {
	cfg := session.Config{PID: tf.pid, All: tf.all, Follow: !tf.noFollow && tf.pid == 0 && !tf.all, Probes: tf.probes, ProbesAnywhere: tf.anywhere, Mode: tf.mode, CallTimes: tf.callTime, NoStop: tf.noStop,
		Wait: tf.wait, VerbsTimeout: tf.timeout, Duration: tf.duration, KeepTarget: tf.keep, RingBytes: tf.ringMiB << 20, ChildOut: childOut, Warnings: stderr,
		RecordTo: tf.recordTo, RecordForce: tf.force, Version: version, Attach: tf.attach}
	switch {
	case tf.workload:
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this executable: %w", err)
		}
		cfg.Argv = append([]string{self, "workload"}, rest...)
		cfg.Target = "sqscope workload " + strings.Join(rest, " ")
	case tf.cmd != "" || len(rest) > 0:
		var err error
		if cfg.Env, cfg.Argv, cfg.Target, err = session.ParseCommand(tf.cmd, rest); err != nil {
			return nil, err
		}
	}
	return session.Start(cfg)
}

// severityRank orders diagnosis severities, the worst highest.
var severityRank = map[string]int{analyzer.SevPrediction: 1, analyzer.SevWarning: 2, analyzer.SevError: 3}

// status is how a finished trace exits, as strace does: with the status of
// a target sqscope started, when that failed (128+N for signal N, as a
// shell says), else 3 when --fail-on's severity or worse was diagnosed.
func (tf *targetFlags) status(s analyzer.Snapshot) error {
	switch {
	case tf.pid == 0 && s.Exited && s.ExitSignal != 0:
		return &cli.ExitError{Code: 128 + int(s.ExitSignal), Err: fmt.Errorf("the target was killed by signal %d (%s)", s.ExitSignal, syscall.Signal(s.ExitSignal))}
	case tf.pid == 0 && s.Exited && s.ExitCode != 0:
		return &cli.ExitError{Code: int(s.ExitCode), Err: fmt.Errorf("the target exited with status %d", s.ExitCode)}
	}
	if tf.failOn == "" {
		return nil
	}
	for _, d := range s.Diagnoses {
		if severityRank[d.Severity] >= severityRank[tf.failOn] {
			return &cli.ExitError{Code: 3, Err: fmt.Errorf("--fail-on %s: %s %s on QP %#x (pid %d)", tf.failOn, d.Severity, d.Kind, d.QPNum, d.PID)}
		}
	}
	return nil
}
