package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/durflag"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

// Target are the flags every tracing command shares (trace, record,
// top, advise): what to trace and how.
type Target struct {
	PID      int
	Cmd      string
	Workload bool
	All      bool // -a: every verbs process of the host
	NoFollow bool // --no-follow: not the started command's children
	Probes   []probe.ExplicitProbe
	Anywhere bool
	Mode     string
	Escalate time.Duration // --escalate: the sentinel mode's window
	// --sample-every, --sample-for, --budget: the sentinel mode's sample
	// windows (sampleSet: one of them was given)
	Sampling  session.Sampling
	sampleSet bool
	CallTime  bool
	NoStop    bool
	Wait      bool
	Timeout   time.Duration
	Duration  time.Duration
	RingMiB   int
	FailOn    FailOn // --fail-on: a diagnosis severity
	Verbose   bool   // -v: the text lists every probe
	Quiet     bool   // -q: no notes on stderr
	Keep      bool   // --keep-target
	User      string // -u: the user a started command runs as
	RecordTo  string // record's -o
	Force     bool   // record's --force
	// Flight: record's flight recorder (RecordTo is its directory)
	Flight *session.FlightConfig
	Attach session.AttachFlags
}

// The sentinel mode's sample windows by default: one of 200 ms every
// 10 s at most, and rarer when they would cost the traced processes
// more than 1% of their own CPU time.
const (
	DefaultSampleEvery = 10 * time.Second
	DefaultBudget      = 1.0
)

func (tf *Target) Register(fs *pflag.FlagSet) {
	fs.IntVarP(&tf.PID, "pid", "p", 0, "trace the running process `PID`")
	fs.StringVarP(&tf.Cmd, "command", "c", "", "start `CMD` (a command line) and trace it")
	fs.BoolVar(&tf.Workload, "workload", false, "start the built-in workload with the flags after -- and trace it")
	fs.BoolVarP(&tf.All, "all", "a", false, "trace every process of the host that uses verbs, running now or started later, until Ctrl-C or -D")
	fs.StringVarP(&tf.User, "user", "u", "", "run the command sqscope starts (-c, -- CMD, --workload) as `USER` (a name or a number), with its groups, as strace -u does; sqscope stays root")
	fs.BoolVar(&tf.NoFollow, "no-follow", false, "trace only the started command, not the processes it starts (by default its children are traced too)")
	fs.Func("probe", "explicit data-path probe `FUNC=LIB:0xOFFSET` (post_send, poll_cq, post_recv); repeatable", func(s string) error {
		p, err := probe.ParseProbe(s)
		if err != nil {
			return err
		}
		tf.Probes = append(tf.Probes, p)
		return nil
	})
	fs.BoolVar(&tf.Anywhere, "force-probe", false, "accept a --probe offset inside a function the library's symbols know (by default only a function's start)")
	fs.StringVar(&tf.Mode, "mode", "events", "the probe `MODE`: events (every call), counters (per-QP totals kept in the kernel, lower overhead) or sentinel (probes only where the provider's post fails; every call traced for --escalate after a failure)")
	durflag.Var(fs, &tf.Escalate, "escalate", probe.DefaultEscalate, "sentinel mode: how long a process is traced in full after a failure, a `DURATION` such as 30s or 30")
	tf.Sampling = session.Sampling{Every: DefaultSampleEvery, For: probe.DefaultSampleFor, Budget: DefaultBudget}
	fs.Func("sample-every", "sentinel mode: trace every healthy process in full for --sample-for this often, a `DURATION` such as 10s or 10 (0: never; default 10s)", func(v string) (err error) {
		tf.sampleSet = true
		tf.Sampling.Every, err = durflag.Parse(v)
		return err
	})
	fs.Func("sample-for", "sentinel mode: how long a sample window lasts, a `DURATION` such as 200ms or 0.2 (default 200ms)", func(v string) (err error) {
		tf.sampleSet = true
		tf.Sampling.For, err = durflag.Parse(v)
		return err
	})
	fs.Func("budget", "sentinel mode: the most the sample windows' probes may cost, in `PERCENT` of the traced processes' own CPU time, measured; windows come rarer to keep to it (0: no budget; default 1)", func(v string) error {
		tf.sampleSet = true
		f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
		if err != nil || f < 0 || f > 100 || math.IsNaN(f) {
			return fmt.Errorf("want a percentage between 0 and 100, e.g. 1 or 0.5")
		}
		tf.Sampling.Budget = f
		return nil
	})
	fs.BoolVar(&tf.CallTime, "call-times", false, "also record when each post and poll was entered (events mode; costs a clock read per call, and the interval is mostly the probe's own)")
	fs.BoolVar(&tf.NoStop, "no-stop", false, "never pause the target while probes for newly found functions are attached (calls in that window are missed)")
	fs.BoolVar(&tf.Keep, "keep-target", false, "leave a command sqscope started running when tracing stops first (default: stop it with SIGINT, then SIGTERM, then SIGKILL)")
	fs.BoolVar(&tf.Wait, "wait", false, "keep waiting for a target that has not loaded a verbs library")
	durflag.VarP(fs, &tf.Duration, "duration", "D", 0, "stop tracing after `DURATION`, e.g. 30s or 30 (a command sqscope started is stopped too, as on Ctrl-C)")
	durflag.Var(fs, &tf.Timeout, "verbs-timeout", 10*time.Second, "how long to wait for the target to load a verbs library before saying so, a `DURATION` such as 10s or 10")
	tf.FailOn.Register(fs)
	RegisterVerbose(fs, &tf.Verbose)
	RegisterQuiet(fs, &tf.Quiet)
	fs.IntVar(&tf.RingMiB, "ring-mib", 0, "ring buffer size in `MiB`, a power of two (default 32 in events mode, 8 in counters mode)")
	tf.Attach.Register(fs)
}

// Complete makes c's target flags complete their values: -p to the
// processes that use verbs, --mode and --fail-on to what they take.
func (tf *Target) Complete(c *cobra.Command) {
	PIDs(c, "pid")
	Values(c, "mode", "events\tevery post and poll", "counters\tper-QP totals kept in the kernel",
		"sentinel\tprobes where the provider's post fails, memory reads and sample windows")
	CompleteFailOn(c)
}

// CompleteFailOn makes c's --fail-on complete to the severities.
func CompleteFailOn(c *cobra.Command) {
	Values(c, "fail-on", "error\texit 3 on an error", "warning\ton a warning or an error", "prediction\ton any diagnosis")
}

// Check validates the combination; rest is what followed "--".
func (tf *Target) Check(rest []string) error {
	n := len(slices.DeleteFunc([]bool{tf.PID != 0, tf.Cmd != "", tf.Workload, tf.All}, func(given bool) bool { return !given }))
	switch {
	case n == 0 && len(rest) == 0:
		return errors.New("no target: give -p PID, -c CMD, -- CMD ARGS, -a or --workload -- FLAGS")
	case n > 1:
		return errors.New("give only one of -p, -c, -a and --workload")
	case tf.PID < 0:
		return fmt.Errorf("bad process id %d", tf.PID)
	case len(rest) > 0 && !tf.Workload && n > 0:
		return fmt.Errorf("unexpected arguments %q: a command goes after -- without -c, -p or -a, workload flags after --workload --", strings.Join(rest, " "))
	case tf.User != "" && (tf.PID != 0 || tf.All):
		return errors.New("-u: only a command sqscope starts runs as another user (-c, -- CMD, --workload)")
	case tf.NoFollow && (tf.PID != 0 || tf.All):
		return errors.New("--no-follow: only a command sqscope starts is followed (-c, -- CMD, --workload)")
	case tf.Mode != session.ModeEvents && tf.Mode != session.ModeCounters && tf.Mode != session.ModeSentinel:
		return fmt.Errorf("--mode %q: want events, counters or sentinel", tf.Mode)
	case tf.Escalate <= 0:
		return errors.New("--escalate must be positive")
	case tf.sampleSet && tf.Mode != session.ModeSentinel:
		return errors.New("--sample-every, --sample-for and --budget need --mode sentinel")
	case tf.Sampling.Every > 0 && tf.Sampling.For >= tf.Sampling.Every:
		return fmt.Errorf("--sample-for %v: want it shorter than --sample-every %v", tf.Sampling.For, tf.Sampling.Every)
	case tf.Sampling.For <= 0:
		return errors.New("--sample-for must be positive")
	case tf.Sampling.Budget > 0 && tf.Sampling.Every == 0:
		return errors.New("--budget bounds the sample windows: --sample-every 0 has none")
	case tf.CallTime && tf.Mode != "events":
		return errors.New("--call-times needs --mode events")
	case tf.RingMiB < 0 || tf.RingMiB&(tf.RingMiB-1) != 0 || tf.RingMiB > 1024:
		return fmt.Errorf("--ring-mib %d: want a power of two up to 1024", tf.RingMiB)
	case tf.FailOn.Check() != nil:
		return tf.FailOn.Check()
	case tf.Timeout <= 0:
		return errors.New("--verbs-timeout must be positive")
	}
	return nil
}

// Start starts the session the flags describe; rest is what followed
// "--". A started target writes to childOut, or to sqscope's own stdout
// and stderr when it is nil; version goes into a recording's header.
//
// ctx ends an attach still under way at once: the error then wraps
// probe.ErrInterrupted, and the exit status is 130 (as a shell gives a
// command ended by SIGINT).
func (tf *Target) Start(ctx context.Context, rest []string, stderr, childOut io.Writer, version string) (*session.Session, error) {
	cfg := session.Config{Context: ctx, PID: tf.PID, All: tf.All, Follow: !tf.NoFollow && tf.PID == 0 && !tf.All, Probes: tf.Probes, ProbesAnywhere: tf.Anywhere, Mode: tf.Mode, Escalate: tf.Escalate, Sampling: tf.Sampling, CallTimes: tf.CallTime, NoStop: tf.NoStop,
		Wait: tf.Wait, VerbsTimeout: tf.Timeout, Duration: tf.Duration, KeepTarget: tf.Keep, RingBytes: tf.RingMiB << 20, ChildOut: childOut, Warnings: stderr, Notes: tf.Notes(stderr),
		RecordTo: tf.RecordTo, RecordForce: tf.Force, Version: version, Attach: tf.Attach}
	if tf.Flight != nil {
		cfg.RecordTo, cfg.Flight = "", tf.Flight
	}
	if tf.User != "" {
		var err error
		if cfg.RunAs, err = lookupUser(tf.User); err != nil {
			return nil, &ExitError{Code: 2, Err: err}
		}
	}
	switch {
	case tf.Workload:
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this executable: %w", err)
		}
		cfg.Argv = append([]string{self, "workload"}, rest...)
		cfg.Target = "sqscope workload " + strings.Join(rest, " ")
	case tf.Cmd != "" || len(rest) > 0:
		var err error
		if cfg.Env, cfg.Argv, cfg.Target, err = session.ParseCommand(tf.Cmd, rest); err != nil {
			return nil, err
		}
	}
	s, err := session.Start(cfg)
	if errors.Is(err, probe.ErrInterrupted) {
		return nil, &ExitError{Code: 130, Err: err}
	}
	return s, err
}

var severityRank = analyzer.SeverityRank

// Status is how a finished trace exits, as strace does: with the status of
// a target sqscope started, when that failed (128+N for signal N, as a
// shell says), else 3 when --fail-on's severity or worse was diagnosed.
func (tf *Target) Status(s analyzer.Snapshot) error {
	switch {
	case tf.PID == 0 && s.Exited && s.ExitSignal != 0:
		return &ExitError{Code: 128 + int(s.ExitSignal), Err: fmt.Errorf("the target was killed by signal %d (%s)", s.ExitSignal, syscall.Signal(s.ExitSignal))}
	case tf.PID == 0 && s.Exited && s.ExitCode != 0:
		return &ExitError{Code: int(s.ExitCode), Err: fmt.Errorf("the target exited with status %d", s.ExitCode)}
	}
	if err := nothingTraced(tf.PID, s); err != nil {
		return err
	}
	return tf.FailOn.Status(s.Diagnoses)
}

// RegisterVerbose adds -v/--verbose: the text lists every probe, where it
// was placed and how it was found (the JSON always does).
func RegisterVerbose(fs *pflag.FlagSet, v *bool) {
	fs.BoolVarP(v, "verbose", "v", false, "list every probe in the text, where it was placed and how it was found (--json always does)")
}

// RegisterQuiet adds -q/--quiet: no notes on stderr, only warnings and
// errors.
func RegisterQuiet(fs *pflag.FlagSet, q *bool) {
	fs.BoolVarP(q, "quiet", "q", false, "print no notes on stderr (what is traced, what was written); warnings and errors still")
}

// Notes is where a command's notes go: stderr, or nowhere with -q.
func Notes(stderr io.Writer, quiet bool) io.Writer {
	if quiet {
		return io.Discard
	}
	return stderr
}

// Notes is where the tracing command's notes go: stderr, or nowhere
// with -q.
func (tf *Target) Notes(stderr io.Writer) io.Writer { return Notes(stderr, tf.Quiet) }

// FailOn is --fail-on (trace, record, top, report): exit with status 3
// when a diagnosis of its severity or worse was made, as a CI step wants.
type FailOn string

// Register adds --fail-on to fs.
func (f *FailOn) Register(fs *pflag.FlagSet) {
	fs.StringVar((*string)(f), "fail-on", "", "exit with status 3 when a diagnosis of this `SEVERITY` or worse was made: error, warning or prediction (for CI)")
}

// Check says what is wrong with the severity given.
func (f FailOn) Check() error {
	if f != "" && severityRank(string(f)) == 0 {
		return fmt.Errorf("--fail-on %q: want error, warning or prediction", string(f))
	}
	return nil
}

// Status is exit status 3, saying the first diagnosis of the severity or
// worse, or nil.
func (f FailOn) Status(diags []analyzer.Diagnosis) error {
	if f == "" {
		return nil
	}
	for _, d := range diags {
		if severityRank(d.Severity) >= severityRank(string(f)) {
			return &ExitError{Code: 3, Err: fmt.Errorf("--fail-on %s: %s %s on QP %#x (pid %d)", string(f), d.Severity, d.Kind, d.QPNum, d.PID)}
		}
	}
	return nil
}

// nothingTraced is the error of a trace of a running process (-p) that
// saw none of its QPs because every probe on its data path failed to be
// placed: a trace that could not attach exits 1 saying why, never as an
// empty trace that worked.
func nothingTraced(pid int, s analyzer.Snapshot) error {
	if pid == 0 || len(s.QPs) > 0 {
		return nil
	}
	var failed *trace.Attach
	for i, a := range s.Attach {
		switch a.Func {
		case "post_send", "poll_cq", "post_recv", "post_srq_recv":
		default:
			continue
		}
		switch {
		case a.Err == "":
			return nil // the data path was traced: there was nothing to see
		case failed == nil && !strings.HasPrefix(a.Err, "not traced"):
			failed = &s.Attach[i]
		}
	}
	if failed == nil {
		return nil
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("nothing of process %d was traced: %s could not be attached in %s: %s", pid, failed.Func, failed.Path, failed.Err)}
}
