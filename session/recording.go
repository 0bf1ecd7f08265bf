package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/trace"
)

// Recorder is the sink that writes every event of a session to a
// recording file.
type Recorder struct {
	path string
	w    *trace.Writer
	dst  io.Writer
	out  *outfile.File // nil when writing to standard output

	mu   sync.Mutex
	werr error // the first write error

	stopFlush chan struct{} // closed to stop the periodic flush
	flushing  sync.WaitGroup
}

// flushEvery is how often what was recorded goes to the file even when no
// block of it has filled up: a sqscope killed (SIGKILL, a crash) leaves a
// file that reads up to at most that long before, when a block of a slow
// trace could take minutes to fill. A fast trace fills blocks sooner.
const flushEvery = time.Second

// createRecording opens the recording output of cfg before any target
// exists, so that a refused output never starts one. New recordings have
// mode 0600: they show what a process did.
func createRecording(cfg *Config) (*Recorder, error) {
	r := &Recorder{path: cfg.RecordTo, dst: os.Stdout}
	if cfg.RecordTo == outfile.Stdout {
		if term.IsTerminal(int(os.Stdout.Fd())) {
			return nil, errors.New("-o -: standard output is a terminal; redirect it to a file or a pipe")
		}
		return r, nil
	}
	out, err := outfile.Create(cfg.RecordTo, 0o600, nil, cfg.RecordForce, false)
	if err != nil {
		return nil, fmt.Errorf("creating recording: %w", err)
	}
	r.out, r.dst = out, out
	return r, nil
}

// startRecording writes the recording's header, describing this session,
// and adds the recording as a sink.
func (s *Session) startRecording() error {
	r := s.rec
	w, err := trace.NewWriter(r.dst, s.fileInfo())
	if err != nil {
		return err
	}
	r.w = w
	s.AddSink(r.write)
	r.startFlushing(flushEvery)
	return nil
}

// fileInfo is the header of a recording of this session, started now.
func (s *Session) fileInfo() trace.FileInfo {
	info := trace.HostInfo()
	info.StartMonoNS = trace.MonotonicNS()
	info.Version = s.cfg.Version
	info.Target = s.target
	info.TargetPID = uint32(s.pid)
	info.ProbeMode = s.cfg.Mode
	info.Env = analyzer.ModelEnv(s.env)
	return info
}

// startFlushing flushes the recording every interval until Close.
func (r *Recorder) startFlushing(every time.Duration) {
	r.stopFlush = make(chan struct{})
	r.flushing.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-r.stopFlush:
				return
			case <-t.C:
				if err := r.w.Flush(); err != nil {
					r.failed(err)
					return
				}
			}
		}
	})
}

// discard gives up a recording that never started.
func (r *Recorder) discard() {
	if r.out != nil {
		r.out.Discard()
	}
}

// Recorder is the session's recording (Config.RecordTo), nil without one.
// Close it after Run.
func (s *Session) Recorder() *Recorder { return s.rec }

func (r *Recorder) write(ev trace.Event) {
	if err := r.w.Write(ev); err != nil {
		r.failed(err)
	}
}

// failed keeps the first write error.
func (r *Recorder) failed(err error) {
	r.mu.Lock()
	if r.werr == nil {
		r.werr = err
	}
	r.mu.Unlock()
}

// Close completes the file (whatever was recorded is kept); the error is
// the first write error, else the closing one.
func (r *Recorder) Close() error {
	if r.stopFlush != nil {
		close(r.stopFlush)
		r.flushing.Wait()
		r.stopFlush = nil
	}
	cerr := r.w.Close()
	r.mu.Lock()
	failed := r.werr != nil || cerr != nil
	r.mu.Unlock()
	kept := ""
	switch {
	case r.out == nil:
	case failed && r.out.Replaces():
		r.out.Abort()
		kept = " (the recording there before is kept)"
	default:
		if err := r.out.Commit(); cerr == nil {
			cerr = err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.werr != nil:
		return fmt.Errorf("writing %s: %w%s", r.path, r.werr, kept)
	case cerr != nil:
		return fmt.Errorf("closing %s: %w%s", r.path, cerr, kept)
	}
	return nil
}

// Events and Bytes are what was written.
func (r *Recorder) Events() int64 { return r.w.Events() }
func (r *Recorder) Bytes() int64  { return r.w.Bytes() }

// OpenRecording opens a recording for reading; its errors (not a
// recording, another version, cut inside the header) are one line each.
func OpenRecording(path string) (*trace.Reader, error) {
	r, err := trace.Open(path)
	if err != nil {
		var te *trace.TruncatedError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%w: no events to read", err)
		}
		return nil, err
	}
	return r, nil
}

// ReadResult says how reading a recording ended.
type ReadResult struct {
	Events    int64
	Truncated *trace.TruncatedError // the file stops before its end
	Corrupt   *trace.CorruptError   // damaged: events before it were read
}

// Warning is the one line that says where a truncated file stopped.
func (r *ReadResult) Warning(path string) string {
	if r.Truncated == nil {
		return ""
	}
	return fmt.Sprintf("warning: %s stops early: %v; used the %d events before the cut", path, r.Truncated, r.Events)
}

// Err is the error for a damaged recording, after its events were used.
func (r *ReadResult) Err(path string) error {
	if r.Corrupt == nil {
		return nil
	}
	return fmt.Errorf("%s: %w (used the %d events before it)", path, r.Corrupt, r.Events)
}

// ReadAll streams every event of r to fn. A truncated or damaged file is
// not an error here: the result says where it stopped.
func ReadAll(ctx context.Context, r *trace.Reader, fn func(trace.Event)) (ReadResult, error) {
	return ReadBatches(ctx, r, func(evs []trace.Event) {
		for _, ev := range evs {
			fn(ev)
		}
	})
}

// readBatch is how many events ReadBatches hands over at once.
const readBatch = 256

// ReadBatches streams every event of r to fn, a batch at a time (the
// batch is reused: fn must not keep it), as ReadAll does.
func ReadBatches(ctx context.Context, r *trace.Reader, fn func([]trace.Event)) (ReadResult, error) {
	var res ReadResult
	batch := make([]trace.Event, readBatch)
	for {
		n, err := r.NextBatch(batch)
		if err != nil {
			var te *trace.TruncatedError
			var ce *trace.CorruptError
			switch {
			case errors.Is(err, io.EOF):
				return res, nil
			case errors.As(err, &te):
				res.Truncated = te
				return res, nil
			case errors.As(err, &ce):
				res.Corrupt = ce
				return res, nil
			}
			return res, err
		}
		fn(batch[:n])
		was := res.Events
		res.Events += int64(n)
		if res.Events/65536 != was/65536 && ctx.Err() != nil {
			return res, fmt.Errorf("interrupted after %d events", res.Events)
		}
	}
}

// RecordingInfo is what a report says about the file it read.
type RecordingInfo struct {
	File          string `json:"file"`
	FormatVersion int    `json:"format_version"`
	Hostname      string `json:"hostname,omitempty"`
	Kernel        string `json:"kernel,omitempty"`
	Version       string `json:"sqscope_version,omitempty"`
	StartWall     string `json:"start_wall,omitempty"`
	StartMonoNS   uint64 `json:"start_mono_ns,omitempty"`
	Target        string `json:"target,omitempty"`
	TargetPID     uint32 `json:"target_pid,omitempty"`
	ProbeMode     string `json:"probe_mode,omitempty"`
	Complete      bool   `json:"complete"`
	// Where a truncated file stops: the end of its last whole record.
	TruncatedAt   *int64 `json:"truncated_at,omitempty"`
	LeftoverBytes int64  `json:"leftover_bytes,omitempty"`
	// The records of the block the cut fell in, lost with it (a file of
	// format version 2 whose cut left that block's header whole).
	CutRecords int64 `json:"cut_records,omitempty"`
	// Records of kinds this version does not know, skipped.
	SkippedRecords int64 `json:"skipped_records,omitempty"`
	// Flight: written by the flight recorder on a trigger.
	Flight *FlightRecording `json:"flight,omitempty"`
}

// FlightRecording is what a report says of a flight recording
// (trace.FlightInfo).
type FlightRecording struct {
	Trigger     string `json:"trigger"`
	Detail      string `json:"detail,omitempty"`
	TriggerNS   uint64 `json:"trigger_ns"`
	TriggerWall string `json:"trigger_wall,omitempty"`
	// WindowS is how long before the trigger the window's first event
	// came; AfterS how long after it the recording was to go on.
	WindowS float64 `json:"window_s"`
	AfterS  float64 `json:"after_s"`
	// Dropped counts events the memory bound dropped before their time
	// since the previous recording.
	Dropped uint64 `json:"dropped_events"`
}

func describeFlight(fi trace.FileInfo) *FlightRecording {
	f := fi.Flight
	if f == nil {
		return nil
	}
	fr := &FlightRecording{Trigger: f.Trigger, Detail: f.Detail, TriggerNS: f.TriggerNS,
		AfterS: float64(f.AfterNS) / 1e9, Dropped: f.Dropped}
	if f.TriggerNS >= f.WindowNS {
		fr.WindowS = float64(f.TriggerNS-f.WindowNS) / 1e9
	}
	if t, ok := fi.Anchor().At(f.TriggerNS); ok {
		fr.TriggerWall = t.UTC().Format(time.RFC3339Nano)
	}
	return fr
}

// text is the line a text report says it in.
func (fr *FlightRecording) text() string {
	at := fr.TriggerWall
	if at == "" {
		at = fmt.Sprintf("%d ns (CLOCK_MONOTONIC)", fr.TriggerNS)
	}
	detail := ""
	if fr.Detail != "" {
		detail = " (" + fr.Detail + ")"
	}
	dropped := ""
	if fr.Dropped > 0 {
		dropped = fmt.Sprintf(" (%d events before it dropped by the memory bound, --flight-mib)", fr.Dropped)
	}
	return fmt.Sprintf("flight recording: triggered by %s%s at %s; the window before it holds %.3f s%s, the one after up to %.3f s; "+
		"QPs' state at its start comes from the retained window: occupancy a lower bound until a completion re-synchronises it, as after a late attach",
		fr.Trigger, detail, at, fr.WindowS, dropped, fr.AfterS)
}

// Describe says what was read of the recording at path.
func Describe(path string, r *trace.Reader, res *ReadResult) RecordingInfo {
	fi := r.Info()
	rec := RecordingInfo{File: path, FormatVersion: int(r.Version()), Hostname: fi.Hostname, Kernel: fi.Kernel,
		Version: fi.Version, StartMonoNS: fi.StartMonoNS, Target: fi.Target, TargetPID: fi.TargetPID,
		ProbeMode: fi.ProbeMode, Complete: res.Truncated == nil && res.Corrupt == nil, SkippedRecords: r.Skipped(),
		Flight: describeFlight(fi)}
	if !fi.StartWall.IsZero() {
		rec.StartWall = fi.StartWall.UTC().Format(time.RFC3339Nano)
	}
	if te := res.Truncated; te != nil {
		rec.TruncatedAt, rec.LeftoverBytes, rec.CutRecords = &te.Offset, te.Leftover, te.CutRecords
	}
	return rec
}

// Describe says what the session traces, as Describe says what was read
// of a recording; it has no file (TextHeader says "live trace").
func (s *Session) Describe() RecordingInfo {
	fi := s.fileInfo()
	return RecordingInfo{Hostname: fi.Hostname, Kernel: fi.Kernel, Version: fi.Version, StartWall: s.startWall.UTC().Format(time.RFC3339Nano),
		Target: fi.Target, TargetPID: fi.TargetPID, ProbeMode: fi.ProbeMode, Complete: true}
}

// TextHeader is the line above a text report saying what was read.
func (rec *RecordingInfo) TextHeader() string {
	parts := []string{"recording " + rec.File + ":"}
	if rec.File == "" {
		parts[0] = "live trace:"
	}
	if rec.Target != "" {
		t := rec.Target
		if rec.TargetPID != 0 && !strings.Contains(t, fmt.Sprint(rec.TargetPID)) {
			t += fmt.Sprintf(" (pid %d)", rec.TargetPID)
		}
		parts = append(parts, t)
	}
	if rec.Hostname != "" {
		parts = append(parts, "on "+rec.Hostname)
	}
	if rec.Kernel != "" {
		parts = append(parts, "kernel "+rec.Kernel)
	}
	if rec.StartWall != "" {
		parts = append(parts, "started "+rec.StartWall)
	}
	if rec.ProbeMode != "" {
		parts = append(parts, "probes "+rec.ProbeMode)
	}
	if rec.Version != "" {
		parts = append(parts, "sqscope "+rec.Version)
	}
	if !rec.Complete {
		parts = append(parts, "INCOMPLETE")
	}
	if rec.SkippedRecords > 0 {
		parts = append(parts, fmt.Sprintf("(%d records of kinds this sqscope does not know were skipped: a newer sqscope wrote them)", rec.SkippedRecords))
	}
	if rec.Flight != nil {
		return strings.Join(parts, " ") + "\n" + rec.Flight.text()
	}
	return strings.Join(parts, " ")
}

// ReadFile opens the recording at path and streams every event of it
// to fn (a pass after a first one that reported how reading ended). The
// events are reused (trace.Reader.Reuse): fn must keep nothing of one.
func ReadFile(ctx context.Context, path string, fn func(trace.Event)) error {
	r, err := OpenRecording(path)
	if err != nil {
		return err
	}
	defer r.Close()
	r.Reuse()
	_, err = ReadAll(ctx, r, fn)
	return err
}
