package session

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// Replay plays a recording into an analyzer at the pace it was recorded (or
// faster, or slower), with pause and seek. Seeking back replays from the
// start, since the analyzer only moves forward.
type Replay struct {
	open func() (*trace.Reader, error)
	opts analyzer.Options

	mu      sync.Mutex
	an      *analyzer.Analyzer
	rd      *trace.Reader
	pending trace.Event
	first   uint64 // trace ns of the first event
	pos     uint64 // trace ns reached (relative to first)
	length  uint64
	speed   float64
	paused  bool
	done    bool
	err     error
	damage  error // where the recording stops early or is damaged
	events  int64 // events before the damage
	skipped int64 // records of kinds this version does not know
	last    time.Time
	now     func() time.Time
}

// OpenReplay opens the recording at path for a paced replay; model gives
// the analyzer's options for the recording's header.
func OpenReplay(path string, model func(trace.FileInfo) analyzer.Options) (*Replay, trace.FileInfo, error) {
	r, err := OpenRecording(path)
	if err != nil {
		return nil, trace.FileInfo{}, err
	}
	info := r.Info()
	r.Close()
	rp, err := NewReplay(func() (*trace.Reader, error) { return OpenRecording(path) }, model(info))
	return rp, info, err
}

// NewReplay opens path (via open, called again on a backward seek). It
// reads the recording once to learn its length.
func NewReplay(open func() (*trace.Reader, error), opts analyzer.Options) (*Replay, error) {
	return newReplay(open, opts, time.Now)
}

// newReplay is NewReplay on a given clock.
func newReplay(open func() (*trace.Reader, error), opts analyzer.Options, now func() time.Time) (*Replay, error) {
	r := &Replay{open: open, opts: opts, speed: 1, now: now}
	rd, err := open()
	if err != nil {
		return nil, err
	}
	var first, last uint64
	for {
		ev, err := rd.Next()
		if err != nil {
			// a damaged recording plays up to the damage; Warning and
			// Err say so
			var te *trace.TruncatedError
			var ce *trace.CorruptError
			if errors.As(err, &te) || errors.As(err, &ce) {
				r.damage = err
			}
			if errors.Is(err, io.EOF) || r.damage != nil {
				break
			}
			rd.Close()
			return nil, err
		}
		r.events++
		t := ev.Hdr().TimeNS
		if first == 0 || (t != 0 && t < first) {
			first = t
		}
		last = max(last, t)
	}
	r.skipped = rd.Skipped()
	rd.Close()
	r.first = first
	if last > first {
		r.length = last - first
	}
	if err := r.restart(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Replay) restart() error {
	if r.rd != nil {
		r.rd.Close()
	}
	rd, err := r.open()
	if err != nil {
		return err
	}
	opts := r.opts
	if opts.Mode == "" { // the recording's own
		opts.Mode = rd.Info().ProbeMode
	}
	r.rd, r.an, r.pending, r.pos, r.done = rd, analyzer.New(opts), nil, 0, false
	r.last = r.now()
	return nil
}

// advance feeds every event up to pos into the analyzer.
func (r *Replay) advanceTo(pos uint64) {
	for !r.done {
		ev := r.pending
		r.pending = nil
		if ev == nil {
			var err error
			ev, err = r.rd.Next()
			if err != nil {
				r.done = true
				var te *trace.TruncatedError
				if !errors.Is(err, io.EOF) && !errors.As(err, &te) {
					r.err = err
				}
				break
			}
		}
		t := ev.Hdr().TimeNS
		if t > r.first && t-r.first > pos {
			r.pending = ev
			break
		}
		r.an.Ingest(ev)
	}
	r.pos = min(pos, r.length)
}

// Snapshot advances by the wall time since the last call times the speed,
// then takes the snapshot o asks for (analyzer.Analyzer.SnapshotWith).
func (r *Replay) Snapshot(o analyzer.SnapshotOptions) (analyzer.Snapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if !r.paused {
		step := uint64(float64(now.Sub(r.last).Nanoseconds()) * r.speed)
		r.advanceTo(r.pos + step)
	}
	r.last = now
	return r.an.SnapshotWith(o)
}

// SetPaused stops or resumes the clock of the replay.
func (r *Replay) SetPaused(p bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = p
	r.last = r.now()
}

// Speed multiplies the speed by f (bounded to 1/64..1024) and returns it.
func (r *Replay) Speed(f float64) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.speed = min(max(r.speed*f, 1.0/64), 1024)
	return r.speed
}

// Seek moves the position by d.
func (r *Replay) Seek(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	target := int64(r.pos) + d.Nanoseconds()
	if target < 0 {
		target = 0
	}
	if uint64(target) < r.pos {
		if err := r.restart(); err != nil {
			r.err = err
			return
		}
	}
	r.advanceTo(uint64(target))
	r.last = r.now()
}

// Position is where the replay is, and the recording's length.
func (r *Replay) Position() (time.Duration, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Duration(r.pos), time.Duration(r.length)
}

// Warning says where a recording that stops early or is damaged stops,
// and what is shown of it; "" for a whole recording.
func (r *Replay) Warning() string {
	var w []string
	if r.damage != nil {
		w = append(w, fmt.Sprintf("the recording stops early (%v): showing the %d events before", r.damage, r.events))
	}
	if r.skipped > 0 {
		w = append(w, fmt.Sprintf("%d records of kinds this sqscope does not know were skipped", r.skipped))
	}
	return strings.Join(w, "; ")
}

// Err is the first read error other than a clean or truncated end.
func (r *Replay) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return fmt.Errorf("reading recording: %w", r.err)
	}
	return nil
}

// Close releases the recording.
func (r *Replay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rd != nil {
		return r.rd.Close()
	}
	return nil
}
