// Package session owns a tracing session: it starts or attaches to the
// target, runs the tracer, delivers every event to the analyzer and to the
// sinks a front end adds (a recording, an export), and handles Ctrl-C,
// detaching and the target's exit. The commands trace, record, top and
// demo are front ends over it; replay reads a recording through Replay.
// See docs/design.md.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// Probe modes, as recordings name them.
const (
	ModeEvents   = "events"
	ModeCounters = "counters"
	// ModeSentinel probes only the error sites of the provider's data
	// path while the target is healthy, and the events mode's probes for
	// a while after a failure (probe.ModeSentinel).
	ModeSentinel = "sentinel"
)

// Config says what to trace and how.
type Config struct {
	// Context, when done while the tracer loads, scans and places its
	// probes, ends Start at once with an error wrapping
	// probe.ErrInterrupted (a Ctrl-C during a long attach). Nil: never.
	Context context.Context

	PID    int      // attach to this running process, or
	Argv   []string // start this command (held until the probes are attached)
	Target string   // how to name a started command (default: Argv joined)
	// All traces every process of the host that uses verbs (no PID or
	// Argv): those running now and those started later, until stopped.
	All bool
	// Follow traces the processes the target forks too (and theirs).
	Follow bool
	// Env are VAR=value entries added to a started command's environment.
	Env []string

	Probes         []probe.ExplicitProbe
	ProbesAnywhere bool   // explicit probes may be inside a known function
	Mode           string // ModeEvents (default), ModeCounters or ModeSentinel
	// Escalate is how long the sentinel mode traces a process in full
	// after a failure (0: probe.DefaultEscalate).
	Escalate time.Duration
	// Sampling is the sentinel mode's sample windows and budget
	// (probe.Options fields SampleEvery, SampleFor, Budget).
	Sampling     Sampling
	CallTimes    bool // record entry times too (events mode)
	NoStop       bool // never pause the target while attaching
	Attach       AttachFlags
	Wait         bool // keep waiting for a target without a verbs library
	VerbsTimeout time.Duration
	Duration     time.Duration // stop tracing after this long (0: when the target ends)
	// KeepTarget leaves a command sqscope started running when tracing
	// stops before it ends; by default it is stopped (SIGINT, SIGTERM,
	// then SIGKILL).
	KeepTarget bool
	RingBytes  int

	// ChildOut receives a started command's stdout and stderr, with no
	// stdin; nil: the command shares sqscope's stdin, stdout and stderr.
	ChildOut io.Writer
	// Warnings receives the tracer's warnings, one line each.
	Warnings io.Writer
	// RunAs is the user a started command runs as (nil: sqscope's).
	RunAs *probe.Cred
	// Notes receives what the tracer says that is no warning (what it
	// traces, what it wrote), one line each; nil: Warnings.
	Notes io.Writer

	// RecordTo, when set, is the recording file to write, created before
	// the target starts (see Recorder): a path, or "-" for standard
	// output, and then a started command's output goes to Warnings. An
	// existing recording is kept unless RecordForce; a replaced one stays
	// as it was until the new one is complete.
	RecordTo    string
	RecordForce bool
	Version     string // of sqscope, for the recording's header
	// Flight, instead of RecordTo, keeps the latest events in memory and
	// writes recordings of them on triggers (see Flight).
	Flight *FlightConfig
}

// Session is one traced target feeding an analyzer and sinks.
type Session struct {
	cfg    Config
	child  *probe.Child
	tracer *probe.Tracer
	an     *analyzer.Analyzer
	pid    int
	target string
	env    []string // the target's environment

	rec    *Recorder           // the recording, when Config.RecordTo is set
	flight *Flight             // the flight recorder, when Config.Flight is set
	sinks  []func(trace.Event) // fixed before Run
	warned int                 // tracer warnings printed so far

	// what sqscope itself had used when the session started, and once the
	// probes were loaded and attached
	startCPU, openCPU   time.Duration
	startWall, openWall time.Time

	mu   sync.Mutex // guards exit and exitSeen
	exit *trace.Exit
	// exitSeen: the tracer delivered the exit (else finish adds it)
	exitSeen bool
	// verbsSeen: an event of the verbs library was delivered (its first
	// is noted without an atomic write per event)
	verbsSeen      atomic.Bool
	verbsSeenNoted bool
	stopped        string // why ctx stopped the trace, if it did
	// cutDone: the trace was cut while the target ran on (the tracer also
	// cuts on any stop, when it no longer matters)
	cutDone bool
	checked string // what the verbs check found, if it ran
}

// Start starts (or finds) the target and attaches the probes; a started
// command stays held until Run.
func Start(cfg Config) (_ *Session, err error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeEvents
	}
	if cfg.VerbsTimeout <= 0 {
		cfg.VerbsTimeout = 10 * time.Second
	}
	if cfg.Warnings == nil {
		cfg.Warnings = io.Discard
	}
	if cfg.Notes == nil {
		cfg.Notes = cfg.Warnings
	}
	s := &Session{cfg: cfg, startCPU: SelfCPU(), startWall: time.Now()}
	opts := probe.Options{Probes: cfg.Probes, ProbesAnywhere: cfg.ProbesAnywhere, NoStop: cfg.NoStop, RingBytes: cfg.RingBytes, CallTimes: cfg.CallTimes,
		ReuseEvents: true} // the analyzer and the recording writer keep nothing of an event
	switch cfg.Mode {
	case ModeCounters:
		opts.Mode = probe.ModeCounters
	case ModeSentinel:
		opts.Mode, opts.Escalate = probe.ModeSentinel, cfg.Escalate
		opts.SampleEvery, opts.SampleFor, opts.Budget = cfg.Sampling.Every, cfg.Sampling.For, cfg.Sampling.Budget
	}
	if err := cfg.Attach.options(&opts); err != nil {
		return nil, err
	}
	for _, p := range cfg.Probes {
		if err := probe.CheckProbe(p, cfg.ProbesAnywhere); err != nil {
			return nil, err
		}
	}
	if cfg.RecordTo != "" {
		rec, rerr := createRecording(&cfg)
		if rerr != nil {
			return nil, rerr
		}
		s.rec = rec
		defer func() {
			// Start's own error (not a shadow of it): nothing was
			// recorded, so no file is left
			if err != nil {
				rec.discard()
			}
		}()
		if cfg.RecordTo == outfile.Stdout && cfg.ChildOut == nil {
			cfg.ChildOut = cfg.Warnings
			s.cfg.ChildOut = cfg.Warnings
		}
	}
	if cfg.Flight != nil {
		if cfg.RecordTo != "" {
			return nil, errors.New("a flight recorder writes its own files: no recording besides")
		}
		if s.flight, err = newFlight(*cfg.Flight, cfg.Warnings, cfg.Notes); err != nil {
			return nil, err
		}
	}
	env := os.Environ()
	opts.Follow, opts.All = cfg.Follow, cfg.All
	switch {
	case cfg.All && (cfg.PID != 0 || len(cfg.Argv) > 0):
		return nil, errors.New("tracing every process takes no process id or command")
	case cfg.All:
		s.target = "every verbs process"
		env = nil // each process has its own: the model's defaults
	case cfg.PID != 0:
		opts.PID = cfg.PID
		s.pid = cfg.PID
		s.target = processName(cfg.PID)
		env = procEnviron(cfg.PID)
	case len(cfg.Argv) > 0:
		s.target = cfg.Target
		if s.target == "" {
			s.target = strings.Join(cfg.Argv, " ")
		}
		if err := probe.Preflight(); err != nil {
			return nil, err
		}
		env = append(env, cfg.Env...)
		cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
		cmd.Env = env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if cfg.ChildOut != nil {
			cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, cfg.ChildOut, cfg.ChildOut
		}
		if !cfg.KeepTarget {
			// ended with sqscope, however sqscope ends (SIGKILL, a crash)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		}
		if cfg.RunAs != nil {
			cfg.RunAs.Hold(cmd)
		}
		child, err := probe.StartHeldCmd(cmd)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", cfg.Argv[0], err)
		}
		s.child = child
		opts.Child = child
		s.pid = child.Pid()
	default:
		return nil, errors.New("no target: a process id or a command is needed")
	}
	s.env = env
	s.an = analyzer.New(analyzer.Options{BF: analyzer.BFFromEnv(env), Clock: trace.NowAnchor(), Mode: cfg.Mode})
	tr, err := openTracer(cfg.Context, opts)
	if err != nil {
		if s.child != nil {
			s.child.Kill()
			s.child.Wait()
		}
		return nil, err
	}
	s.tracer = tr
	if err := s.startOutputs(); err != nil {
		tr.Close()
		if s.child != nil {
			s.child.Kill()
			s.child.Wait()
		}
		return nil, err
	}
	s.openCPU, s.openWall = SelfCPU(), time.Now()
	s.warnLate()
	if cfg.PID != 0 && cfg.Wait && !probe.UsesVerbs(cfg.PID) {
		fmt.Fprintf(cfg.Notes, "sqscope: process %d uses no verbs library yet: its probes are in place, waiting for it (--wait), across an exec too\n", cfg.PID)
	}
	if n := len(tr.Running()); cfg.All && n > 0 {
		fmt.Fprintf(cfg.Notes, "sqscope: every process that uses verbs is traced from its first call; scanning the %d running now %v\n", n, tr.Running())
	}
	return s, nil
}

// startOutputs starts the recording or the flight recorder, if any.
func (s *Session) startOutputs() error {
	switch {
	case s.rec != nil:
		return s.startRecording()
	case s.flight != nil:
		return s.flight.start(s)
	}
	return nil
}

// processName is a running process's command line, or "pid N".
func processName(pid int) string {
	if b, err := os.ReadFile(probe.ProcDir(pid) + "/cmdline"); err == nil && len(b) > 0 {
		return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	}
	return fmt.Sprintf("pid %d", pid)
}

func procEnviron(pid int) []string {
	b, err := os.ReadFile(probe.ProcDir(pid) + "/environ")
	if err != nil {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// Analyzer is the session's analyzer; its snapshots are safe to take at
// any time.
func (s *Session) Analyzer() *analyzer.Analyzer { return s.an }

// PID is the traced process.
func (s *Session) PID() int { return s.pid }

// Target names the traced process: the command started, or the running
// process's command line.
func (s *Session) Target() string { return s.target }

// Sampling is the sentinel mode's sample windows: every Every (0: none),
// for For (0: probe.DefaultSampleFor), kept rarer by Budget, a
// percentage of the traced processes' own CPU time (0: none).
type Sampling struct {
	Every, For time.Duration
	Budget     float64
}

// Mode is the probe mode, ModeEvents, ModeCounters or ModeSentinel.
func (s *Session) Mode() string { return s.cfg.Mode }

// Started reports whether the session started its target (rather than
// attaching to a running process).
func (s *Session) Started() bool { return s.child != nil }

// AddSink adds a consumer of every event, called on the reader goroutine.
// Sinks are added before Run and never after, so delivering to them takes
// no lock.
func (s *Session) AddSink(f func(trace.Event)) {
	s.sinks = append(s.sinks, f)
}

func (s *Session) deliver(ev trace.Event) {
	s.an.Ingest(ev)
	switch e := ev.(type) {
	case *trace.Exit:
		if e.PID == uint32(s.pid) && s.pid != 0 { // not a child's, followed
			s.mu.Lock() // the child's waiter may set its own exit
			s.exit, s.exitSeen = e, true
			s.mu.Unlock()
		}
	case *trace.Attach, *trace.Lost, *trace.Scan, *trace.Proc:
	default:
		if !s.verbsSeenNoted {
			s.verbsSeenNoted = true
			s.verbsSeen.Store(true)
		}
	}
	for _, f := range s.sinks {
		f(ev)
	}
}

// NoVerbsError says the target never loaded a verbs library.
type NoVerbsError struct {
	PID     int
	Timeout time.Duration
	Stopped bool // sqscope started the process and stopped it
}

func (e *NoVerbsError) Error() string {
	what := "it keeps running; --wait keeps waiting"
	if e.Stopped {
		what = "stopped it; --keep-target leaves it running, --wait keeps waiting"
	}
	return fmt.Sprintf("process %d has not loaded a verbs library after %s, nothing to trace (%s)", e.PID, e.Timeout, what)
}

// Run releases the target and feeds events until it exits, ctx is done,
// or (without Wait) it has not loaded a verbs library by the timeout.
// However it ends, what was seen is delivered and the last event, a
// trace.End, says why: the analyzer and every sink hold the trace up to
// there, also when Run returns an error.
func (s *Session) Run(ctx context.Context) error {
	// The end of the duration is a Ctrl-C. A host-wide trace begins
	// once the processes running now are scanned and their probes placed
	// (in the background, while the reader runs and every process that
	// starts meanwhile is traced from its first call): it says so then,
	// and the duration counts from there.
	ctx, stopDuration := context.WithCancelCause(ctx)
	defer stopDuration(nil)
	go func() {
		if running := s.tracer.RunningTraced(); running != nil {
			select {
			case <-running:
				fmt.Fprintf(s.cfg.Notes, "sqscope: tracing every process that uses verbs: %d running now %v, and every one that starts\n", len(s.tracer.Running()), s.tracer.Running())
			case <-ctx.Done():
				return
			}
		}
		if s.cfg.Duration <= 0 {
			return
		}
		t := time.NewTimer(s.cfg.Duration)
		defer t.Stop()
		select {
		case <-t.C:
			stopDuration(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	// The reader runs on its own context: on Ctrl-C it must go on until
	// the target's last events are read.
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if s.pid != 0 {
		s.deliver(&trace.Proc{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: uint32(s.pid), TID: uint32(s.pid)},
			How: trace.ProcTarget, Comm: s.targetComm()})
	}
	runErr := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil { // what was read so far is still kept
				fmt.Fprintf(s.cfg.Warnings, "sqscope: internal error: %v\n%s", p, debug.Stack())
				runErr <- fmt.Errorf("internal error while reading events: %v", p)
			}
		}()
		runErr <- s.tracer.Run(runCtx, s.deliver)
	}()

	childDone := make(chan struct{})
	if s.child != nil {
		if err := s.child.Release(); err != nil {
			cancel()
			return s.finish(<-runErr, fmt.Errorf("starting the target: %w", err))
		}
		go func() {
			st, _ := s.child.Wait()
			if st != nil {
				code, sig := int32(st.ExitCode()), int32(0)
				if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code, sig = -1, int32(ws.Signal())
				}
				s.mu.Lock()
				if s.exit == nil {
					s.exit = &trace.Exit{Code: code, Signal: sig}
				}
				s.mu.Unlock()
			}
			close(childDone)
		}()
	}

	timer := time.NewTimer(s.cfg.VerbsTimeout)
	defer timer.Stop()
	for {
		select {
		case err := <-runErr:
			// the tracer saw the exit: a started target is reaped (and its
			// output copied to ChildOut) before Run returns
			if s.child != nil {
				select {
				case <-childDone:
				case <-time.After(3 * time.Second):
				}
			}
			return s.finish(err, nil)
		case <-childDone:
			// the tracer ends on the exit record; give it a moment to drain
			select {
			case err := <-runErr:
				return s.finish(err, nil)
			case <-time.After(3 * time.Second):
				cancel()
				return s.finish(<-runErr, nil)
			}
		case <-ctx.Done():
			// A command we started stops with us, as it would on a
			// terminal's Ctrl-C; its last events and exit are kept.
			s.stopped = stopReason(ctx)
			if s.stopChild(childDone) {
				select { // the reader ends at the exit record
				case err := <-runErr:
					return s.finish(err, nil)
				case <-time.After(3 * time.Second):
				}
			}
			s.cut() // the target runs on: every probe stops here
			s.syncThenCancel(cancel)
			return s.finish(<-runErr, nil)
		case <-timer.C:
			if s.cfg.Wait || s.cfg.All || !s.noVerbs() {
				continue // a target that ends now ends the trace by its exit
			}
			s.syncThenCancel(cancel) // nothing of verbs seen: nothing to cut
			s.stopChild(childDone)   // nothing to trace: a command we started is not left behind
			return s.finish(<-runErr, &NoVerbsError{s.pid, s.cfg.VerbsTimeout, s.child != nil && !s.cfg.KeepTarget})
		}
	}
}

// noVerbs is the verdict that the target has not loaded a verbs library:
// nothing verbs-related was seen, its mappings show none, and it still
// exists (an exiting process has no mappings left to show one).
func (s *Session) noVerbs() bool {
	if s.verbsSeen.Load() {
		s.checked = "verbs seen"
		return false
	}
	loaded, err := probe.VerbsLoaded(s.pid)
	switch {
	case loaded:
		s.checked = "verbs loaded"
	case err != nil:
		s.checked = "unknown: " + err.Error()
	case s.tracer.TargetEnded():
		s.checked = "target ended"
	default:
		s.checked = "no verbs"
		return true
	}
	return false
}

// cut stops every data-path probe at once (probe.Tracer.Cut): the end of
// tracing a target that keeps running. What came before is still read.
func (s *Session) cut() {
	s.cutDone = true
	if err := s.tracer.Cut(); err != nil {
		fmt.Fprintf(s.cfg.Warnings, "sqscope: warning: %v: the probes stop one by one as they are removed\n", err)
	}
}

// syncThenCancel stops the reader once it has read what was written
// before the call (or after a bound): the end of tracing a target that
// keeps running.
func (s *Session) syncThenCancel(cancel context.CancelFunc) {
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	s.tracer.Sync(sctx)
	scancel()
	cancel()
}

// stopReason says why ctx ended a trace: the signal, or a stop.
func stopReason(ctx context.Context) string {
	switch err := context.Cause(ctx); {
	case err == context.DeadlineExceeded:
		return "the time limit was reached"
	case err == nil || err == context.Canceled:
		return "stopped"
	default:
		// os/signal's cause, "interrupt signal received", is also
		// context.Canceled by errors.Is: only identity tells them apart
		return err.Error()
	}
}

// warnLate prints the tracer's warnings not printed yet.
func (s *Session) warnLate() {
	ws := s.tracer.Warnings()
	for _, w := range ws[min(s.warned, len(ws)):] {
		fmt.Fprintln(s.cfg.Warnings, "sqscope: warning:", w)
	}
	s.warned = len(ws)
}

// finish delivers the exit, if the tracer did not, and the end with its
// reason: runErr, the reader's error, else why, else the exit or the stop.
// It returns the error the trace ended on, if any.
func (s *Session) finish(runErr, why error) error {
	s.warnLate() // e.g. about the last hand-over of counts
	if errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	s.mu.Lock()
	ex, seen := s.exit, s.exitSeen
	s.mu.Unlock()
	if ex != nil && !seen {
		s.an.Ingest(ex)
		for _, f := range s.sinks {
			f(ex)
		}
	}
	end := &trace.End{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: uint32(s.pid)}}
	if c, ok := s.tracer.CutInfo(); ok && s.cutDone {
		end.CutNS, end.InFlightUnseen = c.AtNS, c.InFlightUnseen
	}
	err := runErr
	switch {
	case err == nil:
		err = why
	case why != nil:
		err = errors.Join(runErr, why)
	}
	var parts []string
	if s.stopped != "" {
		parts = append(parts, s.stopped)
	}
	switch {
	case err != nil:
		parts = append(parts, err.Error())
		end.Err = true
	case ex != nil:
		parts = append(parts, exitReason(ex))
	case s.stopped == "":
		parts = append(parts, "the target ended")
	}
	if err != nil && ex != nil {
		parts = append(parts, exitReason(ex))
	}
	end.Reason = strings.Join(parts, "; ")
	if _, ok := why.(*NoVerbsError); ok && runErr == nil {
		end.Err = false // a verdict, not a failure of sqscope's
	}
	s.an.Ingest(end)
	for _, f := range s.sinks {
		f(end)
	}
	return err
}

// exitReason says how the target exited.
func exitReason(ex *trace.Exit) string {
	if ex.Signal != 0 {
		return fmt.Sprintf("the target was killed by signal %d (%v)", ex.Signal, syscall.Signal(ex.Signal))
	}
	return fmt.Sprintf("the target exited with status %d", ex.Code)
}

// Close detaches the probes.
func (s *Session) Close() {
	if s.tracer != nil {
		s.tracer.Close()
	}
	if s.flight != nil {
		s.flight.Close() // a file being written is completed; its errors were said
	}
}

// RunEvery is Run, calling tick every interval while it runs (never when
// every is 0).
func (s *Session) RunEvery(ctx context.Context, every time.Duration, tick func()) error {
	if every <= 0 {
		return s.Run(ctx)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case err := <-runErr:
			return err
		case <-t.C:
			tick()
		}
	}
}

// targetComm is the target's command name: a started command's (the
// kernel's comm is the program's base name, up to 15 bytes; its exec,
// traced, confirms it), or a running process's.
func (s *Session) targetComm() string {
	if s.child == nil {
		b, _ := os.ReadFile(probe.ProcDir(s.pid) + "/comm")
		return strings.TrimSuffix(string(b), "\n")
	}
	name := filepath.Base(s.cfg.Argv[0])
	if len(name) > 15 {
		name = name[:15]
	}
	return name
}
