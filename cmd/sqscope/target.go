package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// targetFlags are the flags every tracing command shares (trace, record,
// top): what to trace and how.
type targetFlags struct {
	pid      int
	cmd      string
	workload bool
	probes   []probe.ExplicitProbe
	mode     string
	callTime bool
	noStop   bool
	wait     bool
	timeout  time.Duration
	ringMiB  int
}

func (tf *targetFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&tf.pid, "p", 0, "trace a running process by PID")
	fs.StringVar(&tf.cmd, "c", "", "start CMD (a command line) and trace it")
	fs.BoolVar(&tf.workload, "workload", false, "start the built-in workload with the flags after -- and trace it")
	fs.Func("probe", "explicit data-path probe FUNC=LIB:0xOFFSET (post_send, poll_cq, post_recv); repeatable", func(s string) error {
		p, err := probe.ParseProbe(s)
		if err != nil {
			return err
		}
		tf.probes = append(tf.probes, p)
		return nil
	})
	fs.StringVar(&tf.mode, "mode", "events", "events (every call) or counters (per-QP totals kept in the kernel, lower overhead)")
	fs.BoolVar(&tf.callTime, "call-times", false, "also record when each post and poll was entered (events mode; costs a clock read per call, and the interval is mostly the probe's own)")
	fs.BoolVar(&tf.noStop, "no-stop", false, "never pause the target while probes for newly found functions are attached (calls in that window are missed)")
	fs.BoolVar(&tf.wait, "wait", false, "keep waiting for a target that has not loaded a verbs library")
	fs.DurationVar(&tf.timeout, "verbs-timeout", 10*time.Second, "how long to wait for the target to load a verbs library before saying so")
	fs.IntVar(&tf.ringMiB, "ring-mib", 8, "ring buffer size in MiB (a power of two)")
}

// check validates the combination; rest is what followed "--".
func (tf *targetFlags) check(rest []string) error {
	n := 0
	if tf.pid != 0 {
		n++
	}
	if tf.cmd != "" {
		n++
	}
	if tf.workload {
		n++
	}
	switch {
	case n == 0:
		return errors.New("no target: give -p PID, -c CMD or --workload -- FLAGS")
	case n > 1:
		return errors.New("give only one of -p, -c and --workload")
	case tf.pid < 0:
		return fmt.Errorf("bad process id %d", tf.pid)
	case len(rest) > 0 && !tf.workload:
		return fmt.Errorf("unexpected arguments %q (workload flags go after --workload --)", strings.Join(rest, " "))
	case tf.mode != "events" && tf.mode != "counters":
		return fmt.Errorf("--mode %q: want events or counters", tf.mode)
	case tf.callTime && tf.mode != "events":
		return errors.New("--call-times needs --mode events")
	case tf.ringMiB <= 0 || tf.ringMiB&(tf.ringMiB-1) != 0 || tf.ringMiB > 1024:
		return fmt.Errorf("--ring-mib %d: want a power of two up to 1024", tf.ringMiB)
	case tf.timeout <= 0:
		return errors.New("--verbs-timeout must be positive")
	}
	return nil
}

// session is one traced target feeding an analyzer (and maybe a file).
type session struct {
	tf     *targetFlags
	child  *probe.Child
	tracer *probe.Tracer
	an     *analyzer.Analyzer
	pid    int
	target string
	mode   string
	env    []string // the target's environment

	sinks []func(trace.Event) // fixed before run

	stderr io.Writer
	warned int // tracer warnings printed so far

	// what sqscope itself had used when the session started, and once the
	// probes were loaded and attached
	startCPU, openCPU   time.Duration
	startWall, openWall time.Time

	mu   sync.Mutex // guards exit and exitSeen
	exit *trace.Exit
	// exitSeen: the tracer delivered the exit (else finish adds it)
	exitSeen bool
}

// splitCommand splits a command line like a shell would for plain words,
// single and double quotes and backslash escapes (no expansion).
func splitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
			} else {
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(rs):
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if inWord {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("-c: empty command")
	}
	return out, nil
}

// bfFromEnv reads libmlx5's BlueFlame knobs from an environment.
func bfFromEnv(env []string) analyzer.BFConfig {
	bf := analyzer.DefaultBF
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		switch k {
		case "MLX5_POST_SEND_PREFER_BF":
			bf.PreferBF = v != "0"
		case "MLX5_SHUT_UP_BF":
			bf.ShutUpBF = v != "0"
		}
	}
	return bf
}

func procEnviron(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// startSession starts (or finds) the target, attaches, and releases it.
// A started target writes to childOut, or to sqscope's own stdout and
// stderr when it is nil.
func startSession(tf *targetFlags, rest []string, stderr io.Writer, childOut io.Writer) (*session, error) {
	s := &session{tf: tf, mode: tf.mode, startCPU: selfCPU(), startWall: time.Now()}
	opts := probe.Options{Probes: tf.probes, NoStop: tf.noStop, RingBytes: tf.ringMiB << 20, CallTimes: tf.callTime,
		ReuseEvents: true} // the analyzer and the recording writer keep nothing of an event
	if tf.mode == "counters" {
		opts.Mode = probe.ModeCounters
	}
	for _, p := range tf.probes {
		if err := probe.CheckProbe(p); err != nil {
			return nil, err
		}
	}
	env := os.Environ()
	switch {
	case tf.pid != 0:
		opts.PID = tf.pid
		s.pid = tf.pid
		s.target = fmt.Sprintf("pid %d", tf.pid)
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", tf.pid)); err == nil {
			s.target = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		}
		env = procEnviron(tf.pid)
	default:
		var argv []string
		if tf.workload {
			self, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("finding this executable: %w", err)
			}
			argv = append([]string{self, "workload"}, rest...)
			s.target = "sqscope workload " + strings.Join(rest, " ")
		} else {
			var err error
			if argv, err = splitCommand(tf.cmd); err != nil {
				return nil, err
			}
			s.target = tf.cmd
		}
		if err := probe.Preflight(); err != nil {
			return nil, err
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if childOut != nil {
			cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, childOut, childOut
		}
		child, err := probe.StartHeldCmd(cmd)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", argv[0], err)
		}
		s.child = child
		opts.Child = child
		s.pid = child.Pid()
	}
	s.env = env
	s.an = analyzer.New(analyzer.Options{BF: bfFromEnv(env)})
	tr, err := probe.Open(opts)
	if err != nil {
		if s.child != nil {
			s.child.Kill()
			s.child.Wait()
		}
		return nil, err
	}
	s.tracer = tr
	s.openCPU, s.openWall = selfCPU(), time.Now()
	s.stderr = stderr
	s.warnLate()
	return s, nil
}

// addSink adds a consumer of every event, called on the reader goroutine.
// Sinks are added before run and never after, so delivering to them takes
// no lock.
func (s *session) addSink(f func(trace.Event)) {
	s.sinks = append(s.sinks, f)
}

func (s *session) deliver(ev trace.Event) {
	s.an.Ingest(ev)
	if e, ok := ev.(*trace.Exit); ok {
		s.mu.Lock() // the child's waiter may set its own exit
		s.exit, s.exitSeen = e, true
		s.mu.Unlock()
	}
	for _, f := range s.sinks {
		f(ev)
	}
}

// verbsLoaded reports whether the target has mapped libibverbs or is a
// binary with the simulated HCA.
func verbsLoaded(pid int) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "libibverbs") {
			return true
		}
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	_, err = probe.ResolveSymbol(exe, "sqsim_create_qp")
	return err == nil
}

// noVerbsError says the target never loaded a verbs library.
type noVerbsError struct {
	pid     int
	timeout time.Duration
}

func (e *noVerbsError) Error() string {
	return fmt.Sprintf("process %d has not loaded a verbs library after %s, nothing to trace (it keeps running; --wait keeps waiting)", e.pid, e.timeout)
}

// run releases the target and feeds events until it exits, ctx is done,
// or (without --wait) it has not loaded a verbs library by the timeout.
func (s *session) run(ctx context.Context, stderr io.Writer) error {
	// The reader runs on its own context: on Ctrl-C it must go on until
	// the target's last events are read.
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- s.tracer.Run(runCtx, s.deliver) }()

	childDone := make(chan struct{})
	if s.child != nil {
		if err := s.child.Release(); err != nil {
			cancel()
			<-runErr
			return fmt.Errorf("starting the target: %w", err)
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

	timer := time.NewTimer(s.tf.timeout)
	defer timer.Stop()
	for {
		select {
		case err := <-runErr:
			return s.finish(err)
		case <-childDone:
			// the tracer ends on the exit record; give it a moment to drain
			select {
			case err := <-runErr:
				return s.finish(err)
			case <-time.After(3 * time.Second):
				cancel()
				return s.finish(<-runErr)
			}
		case <-ctx.Done():
			// A command we started stops with us, as it would on a
			// terminal's Ctrl-C; its last events and exit are kept.
			if s.child != nil {
				syscall.Kill(s.pid, syscall.SIGINT)
				select {
				case <-childDone:
					select { // the reader ends at the exit record
					case err := <-runErr:
						return s.finish(err)
					case <-time.After(3 * time.Second):
					}
				case <-time.After(3 * time.Second):
				}
			}
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			s.tracer.Sync(sctx)
			scancel()
			cancel()
			return s.finish(<-runErr)
		case <-timer.C:
			if s.tf.wait || verbsLoaded(s.pid) {
				continue
			}
			cancel()
			<-runErr
			s.tracer.Close()
			return &noVerbsError{s.pid, s.tf.timeout}
		}
	}
}

// warnLate prints the tracer's warnings not printed yet.
func (s *session) warnLate() {
	ws := s.tracer.Warnings()
	for _, w := range ws[min(s.warned, len(ws)):] {
		fmt.Fprintln(s.stderr, "sqscope: warning:", w)
	}
	s.warned = len(ws)
}

func (s *session) finish(err error) error {
	s.warnLate() // e.g. about the last hand-over of counts
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
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
	return nil
}

// close detaches the probes.
func (s *session) close() {
	if s.tracer != nil {
		s.tracer.Close()
	}
}

// selfCPU is the CPU time sqscope's own threads have used (user and
// system), not counting the target's.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// selfCost is what tracing has cost sqscope itself so far: loading and
// attaching the probes, then reading the ring buffer, decoding, analysing
// and writing; not the probes (their cost is the target's).
type selfCost struct {
	CPUSeconds        float64 `json:"cpu_seconds"`         // all of it
	StartupCPUSeconds float64 `json:"startup_cpu_seconds"` // loading and attaching
	WallSeconds       float64 `json:"wall_seconds"`        // since attaching
	Cores             float64 `json:"cores"`               // CPU seconds per second since attaching
	NSPerEvent        float64 `json:"cpu_ns_per_event"`    // CPU since attaching per event; 0 without events
}

func (s *session) cost(events uint64) selfCost {
	now := selfCPU()
	c := selfCost{CPUSeconds: (now - s.startCPU).Seconds(), StartupCPUSeconds: (s.openCPU - s.startCPU).Seconds(),
		WallSeconds: time.Since(s.openWall).Seconds()}
	running := (now - s.openCPU).Seconds()
	if c.WallSeconds > 0 {
		c.Cores = running / c.WallSeconds
	}
	if events > 0 {
		c.NSPerEvent = running * 1e9 / float64(events)
	}
	return c
}

func (c selfCost) String() string {
	s := fmt.Sprintf("sqscope itself: %.2f s of CPU (%.2f s loading and attaching), then %.0f%% of one core for %.1f s",
		c.CPUSeconds, c.StartupCPUSeconds, 100*c.Cores, c.WallSeconds)
	if c.NSPerEvent > 0 {
		s += fmt.Sprintf(", %.0f ns per event", c.NSPerEvent)
	}
	return s
}

// monotonicNS reads CLOCK_MONOTONIC, the clock event times use.
func monotonicNS() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}
