package session

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/trace"
)

// FlightConfig makes a session a flight recorder (Config.Flight): the
// events of the last Window are kept in memory, at most MaxBytes of them,
// and nothing is written until a trigger; then a recording of the Window
// before it and After after it goes to a new file in Dir.
type FlightConfig struct {
	Dir      string
	Window   time.Duration
	After    time.Duration
	MaxBytes int64
	MaxFiles int // files kept in Dir, the oldest removed
	Triggers []FlightTrigger
}

// FlightTrigger is what starts a flight recording.
type FlightTrigger struct {
	On string // TriggerENOMEM, TriggerDiagnosis or TriggerSignal
	// Diag, for TriggerDiagnosis, is a diagnosis kind, or a severity
	// (that one or worse); "" for any diagnosis.
	Diag string
}

// The triggers.
const (
	TriggerENOMEM    = "enomem"    // a post failed with ENOMEM
	TriggerDiagnosis = "diagnosis" // the analyzer made a diagnosis
	TriggerSignal    = "signal"    // sqscope received SIGUSR1
)

// ParseFlightTrigger reads a --trigger value: enomem, signal, diagnosis
// or diagnosis=KIND|SEVERITY.
func ParseFlightTrigger(s string) (FlightTrigger, error) {
	on, diag, hasDiag := strings.Cut(s, "=")
	switch {
	case (on == TriggerENOMEM || on == TriggerSignal) && !hasDiag:
		return FlightTrigger{On: on}, nil
	case on == TriggerDiagnosis && !hasDiag:
		return FlightTrigger{On: on}, nil
	case on == TriggerDiagnosis:
		if _, ok := analyzer.DiagKindNamed(diag); !ok && analyzer.SeverityRank(diag) == 0 {
			return FlightTrigger{}, fmt.Errorf("%q: not a diagnosis kind nor a severity (error, warning, prediction)", diag)
		}
		return FlightTrigger{On: on, Diag: diag}, nil
	}
	return FlightTrigger{}, fmt.Errorf("%q: want enomem, signal, diagnosis or diagnosis=KIND|SEVERITY", s)
}

func (t FlightTrigger) String() string {
	if t.Diag != "" {
		return t.On + "=" + t.Diag
	}
	return t.On
}

// matches reports whether diagnosis d fires t.
func (t FlightTrigger) matches(d *analyzer.Diagnosis) bool {
	switch {
	case t.On != TriggerDiagnosis:
		return false
	case t.Diag == "" || t.Diag == d.Kind:
		return true
	}
	r := analyzer.SeverityRank(t.Diag)
	return r > 0 && analyzer.SeverityRank(d.Severity) >= r
}

// Check says what is wrong with c, quoting the flags that set it.
func (c *FlightConfig) Check() error {
	switch {
	case c.Window <= 0:
		return errors.New("--flight must be positive")
	case c.After < 0:
		return errors.New("--after must not be negative")
	case c.MaxBytes <= 0:
		return errors.New("--flight-mib must be positive")
	case c.MaxFiles <= 0:
		return errors.New("--max-files must be positive")
	case len(c.Triggers) == 0:
		return errors.New("--flight needs a --trigger: enomem, signal or diagnosis[=KIND|SEVERITY]")
	case c.Dir == "" || c.Dir == outfile.Stdout:
		return errors.New("--flight needs -o DIR, the directory for its recordings")
	}
	return nil
}

// flightFilePattern matches the names of the files a flight recorder
// writes, which sort by time.
const flightFilePattern = "sqscope-flight-*.sqscope"

// Flight is a session's flight recorder. Its events go through a ring
// of encoded blocks (trace.Ring); a trigger copies the ring's blocks of
// the window into a new file, after a prefix that re-creates the
// objects the window's events refer to, and the events that follow go
// to the file too until the after window ends.
type Flight struct {
	cfg  FlightConfig
	base trace.FileInfo // the session's, for each file's header
	ring *trace.Ring
	warn io.Writer
	// notes receives the line that says a recording was written
	notes io.Writer
	// escalate, in the sentinel mode, traces a process (0: every one) in
	// full for a while: a trigger's file then holds the calls after it
	escalate func(pid uint32)

	mu      sync.Mutex
	objs    flightObjects
	cur     *flightFile // the file being written, nil when armed
	files   []string    // the files in the directory, oldest first
	written map[string]int
	latest  FlightFile
	absorb  int    // triggers while a file was being written
	dropped uint64 // the ring's Dropped at the last file
	err     error  // the first write error

	seenDiag map[diagKey]uint64 // counts of the diagnoses seen

	stop chan struct{}
	done sync.WaitGroup
}

type diagKey struct {
	kind  string
	pid   uint32
	qpNum uint32
}

// flightFile is a recording being written after a trigger.
type flightFile struct {
	path  string
	out   *outfile.File
	w     *trace.Writer
	info  trace.FlightInfo
	timer *time.Timer // ends the after window
	ended bool        // the session's trace.End is in it
	// took is how long the trigger took to write the window, while the
	// trace's events waited
	took time.Duration
}

// newFlight prepares the directory of cfg before any target exists.
func newFlight(cfg FlightConfig, warn, notes io.Writer) (*Flight, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := outfile.Dir(cfg.Dir); err != nil {
		return nil, fmt.Errorf("flight recordings directory: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(cfg.Dir, flightFilePattern))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	return &Flight{cfg: cfg, warn: warn, notes: notes, files: files, written: map[string]int{}, seenDiag: map[diagKey]uint64{},
		objs: newFlightObjects()}, nil
}

// start begins keeping the session's events.
func (f *Flight) start(s *Session) error {
	if s.tracer != nil {
		f.escalate = s.tracer.Escalate
	}
	if err := f.begin(s.fileInfo(), s.an); err != nil {
		return err
	}
	s.AddSink(f.write)
	return nil
}

// begin makes the ring and starts the triggers; each file's header is
// base, and an's diagnoses are looked at. Events come through f.write.
func (f *Flight) begin(base trace.FileInfo, an *analyzer.Analyzer) error {
	// a diagnosis is seen up to diagEvery after the event that made it,
	// and the trigger is that event: the ring keeps that much more
	ring, err := trace.NewRing(uint64(f.cfg.Window+2*diagEvery+f.blockEvery()), f.cfg.MaxBytes)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.ring, f.base = ring, base
	f.mu.Unlock()
	f.stop = make(chan struct{})
	f.done.Go(func() { f.tick(an) })
	if slices.ContainsFunc(f.cfg.Triggers, func(t FlightTrigger) bool { return t.On == TriggerSignal }) {
		sig := heldSignal()
		f.done.Go(func() {
			defer signal.Stop(sig)
			for {
				select {
				case <-f.stop:
					return
				case <-sig:
					f.Trigger(TriggerSignal, "SIGUSR1 received", trace.MonotonicNS(), 0)
				}
			}
		})
	}
	return nil
}

// blockEvery is how often the ring ends its block: the window is kept to
// that much.
func (f *Flight) blockEvery() time.Duration {
	return min(max(f.cfg.Window/8, 20*time.Millisecond), 500*time.Millisecond)
}

// diagEvery is how often the analyzer's diagnoses are looked at.
const diagEvery = 250 * time.Millisecond

// tick ends the ring's blocks, flushes the file being written, and looks for
// new diagnoses, until Close.
func (f *Flight) tick(an *analyzer.Analyzer) {
	blocks := time.NewTicker(f.blockEvery())
	defer blocks.Stop()
	var diags <-chan time.Time
	if slices.ContainsFunc(f.cfg.Triggers, func(t FlightTrigger) bool { return t.On == TriggerDiagnosis }) {
		t := time.NewTicker(diagEvery)
		defer t.Stop()
		diags = t.C
	}
	flushed := time.Now()
	for {
		select {
		case <-f.stop:
			return
		case <-blocks.C:
			if err := f.ring.Flush(); err != nil {
				f.fail(err)
			}
			f.mu.Lock()
			if f.cur != nil && time.Since(flushed) >= flushEvery {
				flushed = time.Now()
				if err := f.cur.w.Flush(); err != nil {
					f.abandon(err)
				}
			}
			f.objs.forget(f.ring.Oldest())
			f.mu.Unlock()
		case <-diags:
			f.checkDiagnoses(an.Snapshot().Diagnoses)
		}
	}
}

// checkDiagnoses triggers on a matching diagnosis made or repeated since
// the last look.
func (f *Flight) checkDiagnoses(ds []analyzer.Diagnosis) {
	for i := range ds {
		d := &ds[i]
		k := diagKey{d.Kind, d.PID, d.QPNum}
		seen := f.seenDiag[k]
		if seen == d.Count {
			continue
		}
		f.seenDiag[k] = d.Count
		at := d.LastNS // a repeat since the last look: its last
		if seen == 0 {
			at = d.FirstNS
		}
		for _, t := range f.cfg.Triggers {
			if t.matches(d) {
				f.Trigger(TriggerDiagnosis+"="+d.Kind, fmt.Sprintf("%s %s on QP %#x (pid %d)", d.Severity, d.Kind, d.QPNum, d.PID), at, d.PID)
				break
			}
		}
	}
}

// write is the session's sink.
func (f *Flight) write(ev trace.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq, err := f.ring.Write(ev)
	if err != nil {
		f.fail(err)
	}
	f.objs.note(ev, seq)
	if c := f.cur; c != nil {
		if err := c.w.Write(ev); err != nil {
			f.abandon(err)
		} else if ev.Kind() == trace.KindEnd {
			c.ended = true
		}
	}
	if !f.onENOMEM() {
		return
	}
	switch e := ev.(type) {
	case *trace.Post:
		if e.Ret == ibv.ENOMEM {
			call := "post_send"
			if e.API == trace.APIWR {
				call = "wr_complete"
			}
			f.trigger(TriggerENOMEM, fmt.Sprintf("%s on QP %#x (pid %d) failed with ENOMEM", call, e.QPNum, e.PID), e.TimeNS, e.PID)
		}
	case *trace.PostFail:
		if e.Errno == ibv.ENOMEM {
			f.trigger(TriggerENOMEM, fmt.Sprintf("%s on QP %#x (pid %d) failed with ENOMEM", e.Func, e.QPNum, e.PID), e.TimeNS, e.PID)
		}
	}
}

func (f *Flight) onENOMEM() bool {
	return slices.ContainsFunc(f.cfg.Triggers, func(t FlightTrigger) bool { return t.On == TriggerENOMEM })
}

// Trigger writes a recording of the window before atNS (CLOCK_MONOTONIC)
// and the after window, unless one is being written.
func (f *Flight) Trigger(name, detail string, atNS uint64, pid uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trigger(name, detail, atNS, pid)
}

// trigger starts a file; f.mu is held. pid is the process the trigger
// is about (0: all).
func (f *Flight) trigger(name, detail string, atNS uint64, pid uint32) {
	if f.cur != nil {
		f.absorb++
		return
	}
	if f.stop == nil { // closed
		return
	}
	if f.escalate != nil { // the sentinel: the rest in full, placed meanwhile
		go f.escalate(pid)
	}
	began := time.Now()
	blocks, err := f.ring.Take()
	if err != nil {
		f.fail(err)
		return
	}
	from := atNS - min(atNS, uint64(f.cfg.Window))
	first := slices.IndexFunc(blocks, func(b trace.RingBlock) bool { return b.LastNS >= from })
	if first < 0 {
		first = len(blocks)
	}
	blocks = blocks[first:]
	firstSeq := f.ring.Oldest() // no block: the prefix holds every object
	if len(blocks) > 0 {
		firstSeq = blocks[0].Seq
	}
	windowNS := atNS
	for _, b := range blocks {
		windowNS = min(windowNS, b.FirstNS)
	}
	st := f.ring.Stats()
	fi := f.base
	host := trace.HostInfo()
	fi.StartWall, fi.StartMonoNS = host.StartWall, trace.MonotonicNS()
	fi.Flight = &trace.FlightInfo{Trigger: name, Detail: detail, TriggerNS: atNS, WindowNS: windowNS,
		AfterNS: uint64(f.cfg.After), Dropped: st.Dropped - f.dropped}
	f.dropped = st.Dropped
	path := filepath.Join(f.cfg.Dir, flightFileName(host.StartWall, name))
	// the oldest go before the new file is made, so the directory never
	// holds more than MaxFiles (a file abandoned on a write error counts)
	f.removeOldest(f.cfg.MaxFiles - 1)
	out, err := outfile.CreateNew(path, 0o600)
	if err != nil {
		f.fail(fmt.Errorf("flight recording: %w", err))
		return
	}
	w, err := trace.NewWriter(out, fi)
	if err != nil {
		out.Discard()
		f.fail(err)
		return
	}
	f.files = append(f.files, path)
	c := &flightFile{path: path, out: out, w: w, info: *fi.Flight}
	f.cur = c
	wait := time.Duration(atNS + uint64(f.cfg.After) - min(trace.MonotonicNS(), atNS+uint64(f.cfg.After)))
	c.timer = time.AfterFunc(wait, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.cur == c {
			f.finish()
		}
	})
	for _, ev := range f.objs.prefix(firstSeq, windowNS) {
		if err := w.Write(ev); err != nil {
			f.abandon(err)
			return
		}
	}
	for _, b := range blocks {
		if err := w.WriteBlock(b); err != nil {
			f.abandon(err)
			return
		}
	}
	c.took = time.Since(began)
}

// flightFileName names a file by its time (UTC, to the millisecond) and
// trigger.
func flightFileName(at time.Time, trigger string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '=' {
			return r
		}
		return '_'
	}, trigger)
	return "sqscope-flight-" + at.UTC().Format("20060102T150405.000Z") + "-" + safe + ".sqscope"
}

// flightEnded is the reason of the trace.End a flight recording ends with
// when the trace goes on.
const flightEnded = "flight recording: the window after the trigger ended"

// finish completes the file being written and removes the oldest past
// MaxFiles; f.mu is held.
func (f *Flight) finish() {
	c := f.cur
	f.cur = nil
	c.timer.Stop()
	if !c.ended {
		if err := c.w.Write(&trace.End{Header: trace.Header{TimeNS: trace.MonotonicNS()}, Reason: flightEnded}); err != nil {
			f.cur = c
			f.abandon(err)
			return
		}
	}
	err := c.w.Close()
	if cerr := c.out.Commit(); err == nil {
		err = cerr
	}
	if err != nil {
		f.fail(fmt.Errorf("writing %s: %w", c.path, err))
		return
	}
	f.written[c.info.Trigger]++
	f.latest = FlightFile{Path: c.path, Trigger: c.info.Trigger, Done: time.Now()}
	fmt.Fprintf(f.notes, "sqscope: flight recording %s: %s (%s), %.1f s before it and %.1f s after; %d events, %d bytes; the window written in %.1f ms\n",
		c.path, c.info.Trigger, c.info.Detail, float64(c.info.TriggerNS-c.info.WindowNS)/1e9,
		float64(f.afterHeld(c))/1e9, c.w.Events(), c.w.Bytes(), float64(c.took)/1e6)
}

// removeOldest removes the oldest files until keep are left; f.mu is
// held.
func (f *Flight) removeOldest(keep int) {
	for len(f.files) > keep {
		if err := os.Remove(f.files[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.fail(fmt.Errorf("removing the oldest flight recording: %w", err))
		}
		f.files = f.files[1:]
	}
}

// afterHeld is how long after its trigger a file went on.
func (f *Flight) afterHeld(c *flightFile) uint64 {
	now := trace.MonotonicNS()
	if now < c.info.TriggerNS {
		return 0
	}
	return min(now-c.info.TriggerNS, c.info.AfterNS)
}

// abandon gives up the file being written after a write error, keeping
// what reached it; f.mu is held.
func (f *Flight) abandon(err error) {
	c := f.cur
	f.cur = nil
	if c.timer != nil {
		c.timer.Stop()
	}
	c.w.Close()
	c.out.Abort()
	f.fail(fmt.Errorf("writing %s: %w", c.path, err))
}

// fail keeps the first error.
func (f *Flight) fail(err error) {
	if f.err == nil {
		f.err = err
		fmt.Fprintf(f.warn, "sqscope: %v\n", err)
	}
}

// FlightStats is what a flight recorder did.
type FlightStats struct {
	Files     []string       // kept in the directory, oldest first
	Written   map[string]int // files written, by trigger
	Latest    FlightFile     // the newest file written whole; no Path before the first
	Absorbed  int            // triggers while a file was being written
	Dropped   uint64         // events the memory bound dropped before their time, the oldest first
	RingBytes int64          // the window's encoded events held in memory now
	MaxBytes  int64          // the bound of RingBytes (--flight-mib)
}

// FlightFile is a recording a flight recorder wrote.
type FlightFile struct {
	Path    string
	Trigger string    // as in its name and header: enomem, signal, diagnosis=KIND
	Done    time.Time // when it was complete
}

// Stats says what f did so far.
func (f *Flight) Stats() FlightStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var st trace.RingStats
	if f.ring != nil { // nil until the session starts
		st = f.ring.Stats()
	}
	return FlightStats{Files: slices.Clone(f.files), Written: maps.Clone(f.written), Latest: f.latest, Absorbed: f.absorb,
		Dropped: st.Dropped, RingBytes: st.Bytes, MaxBytes: f.cfg.MaxBytes}
}

// Close completes a file being written and stops; the error is the
// first write error.
func (f *Flight) Close() error {
	if f.stop != nil {
		close(f.stop)
		f.done.Wait()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stop = nil
	if f.cur != nil {
		f.finish()
	}
	return f.err
}

// Flight is the session's flight recorder (Config.Flight), nil without
// one. Close it after Run.
func (s *Session) Flight() *Flight { return s.flight }

// held is SIGUSR1 caught from HoldFlightSignal on, before the recorder
// starts: a signal sent while the probes are still being placed is not
// the default action's (the end of sqscope) but a trigger once the
// recorder runs.
var (
	heldMu sync.Mutex
	held   chan os.Signal
)

// HoldFlightSignal catches SIGUSR1 from now on for a flight recorder
// with a signal trigger that starts later.
func HoldFlightSignal() {
	heldMu.Lock()
	defer heldMu.Unlock()
	if held == nil {
		held = make(chan os.Signal, 1)
		signal.Notify(held, syscall.SIGUSR1)
	}
}

// heldSignal is the channel SIGUSR1 comes on: the one HoldFlightSignal
// made, whose signal may be waiting already, or a new one.
func heldSignal() chan os.Signal {
	heldMu.Lock()
	defer heldMu.Unlock()
	sig := held
	held = nil
	if sig == nil {
		sig = make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGUSR1)
	}
	return sig
}
