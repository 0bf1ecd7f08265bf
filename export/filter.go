package export

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqscope/sqscope/trace"
)

// Filter selects what an export writes: a time window, QPs, processes.
// The zero Filter selects everything. Events outside it still feed the
// exporter's model, so that the occupancy drawn inside the window is the
// one the whole recording leads to.
type Filter struct {
	From, To Time    // the window; a zero Time is open
	QPs      Numbers // QP numbers; empty: every QP
	PIDs     Numbers // processes; empty: every process
}

// Numbers is a list of QP numbers or PIDs; as a flag.Value, each Set adds
// a comma-separated list.
type Numbers []uint32

func (n *Numbers) String() string {
	s := make([]string, len(*n))
	for i, v := range *n {
		s[i] = strconv.FormatUint(uint64(v), 10)
	}
	return strings.Join(s, ",")
}

// Type names the value in help: a list of numbers.
func (n *Numbers) Type() string { return "N,..." }

func (n *Numbers) Set(s string) error {
	v, err := ParseNumbers(s)
	*n = append(*n, v...)
	return err
}

// String, Set and Type make a Time a flag.Value.
func (t *Time) String() string { return t.Source }

// Type names the value in help.
func (t *Time) Type() string { return "TIME" }

func (t *Time) Set(s string) (err error) {
	*t, err = ParseTime(s)
	return err
}

// Time is a bound of the window as given: seconds from the start of the
// recording, or a wall-clock time.
type Time struct {
	Given       bool
	FromStartNS uint64        // from the start of the recording, when Wall is zero
	Wall        time.Time     // a date and time
	Clock       time.Duration // a time of day (local), on the day the recording started
	IsTOD       bool
	Source      string // as the user wrote it
}

// Check says what is wrong with the filter before a recording is read:
// --to before --from where both are of one kind (from the start, a date
// and time, or a time of day); nil when nothing can be told yet.
func (f *Filter) Check() error {
	a, b := f.From, f.To
	if !a.Given || !b.Given {
		return nil
	}
	var before bool
	switch {
	case a.IsTOD && b.IsTOD:
		before = b.Clock < a.Clock
	case !a.Wall.IsZero() && !b.Wall.IsZero():
		before = b.Wall.Before(a.Wall)
	case a.Wall.IsZero() && b.Wall.IsZero() && !a.IsTOD && !b.IsTOD:
		before = b.FromStartNS < a.FromStartNS
	}
	if before {
		return fmt.Errorf("--to %s is before --from %s", b.Source, a.Source)
	}
	return nil
}

// maxSeconds bounds a time from the start: the trace clock's range.
const maxSeconds = float64(math.MaxUint64) / 1e9

// ParseTime reads --from and --to values: seconds from the start ("12.5",
// "12.5s", "1m30s"), a date and time (RFC 3339, "2026-12-01T10:00:05Z"),
// or a time of day ("10:00:05.25", local time, on the recording's day).
func ParseTime(s string) (Time, error) {
	t := Time{Given: true, Source: s}
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 || math.IsNaN(v) {
			return Time{}, fmt.Errorf("%q: seconds from the start cannot be negative", s)
		}
		if v >= maxSeconds {
			return Time{}, fmt.Errorf("%q: more seconds than the trace clock counts", s)
		}
		t.FromStartNS = uint64(v * 1e9)
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return Time{}, fmt.Errorf("%q: a time from the start cannot be negative", s)
		}
		t.FromStartNS = uint64(d)
		return t, nil
	}
	if w, err := time.Parse(time.RFC3339Nano, s); err == nil {
		t.Wall = w
		return t, nil
	}
	for _, layout := range []string{"15:04:05.999999999", "15:04:05", "15:04"} {
		if c, err := time.Parse(layout, s); err == nil {
			t.IsTOD = true
			t.Clock = time.Duration(c.Hour())*time.Hour + time.Duration(c.Minute())*time.Minute +
				time.Duration(c.Second())*time.Second + time.Duration(c.Nanosecond())
			return t, nil
		}
	}
	return Time{}, fmt.Errorf("%q: want seconds from the start (12.5), a date and time (2026-12-01T10:00:05Z) or a time of day (10:00:05)", s)
}

// monoNS maps the bound to the trace clock: start is the recording's
// start on the trace clock, info says when that was on the wall clock.
func (t Time) monoNS(start uint64, info *trace.FileInfo) (uint64, error) {
	if !t.Wall.IsZero() || t.IsTOD {
		if info.StartWall.IsZero() || info.StartMonoNS == 0 {
			return 0, fmt.Errorf("%s: the recording does not say when it started on the wall clock: give seconds from the start", t.Source)
		}
		w := t.Wall
		if t.IsTOD {
			sw := info.StartWall.Local()
			day := time.Date(sw.Year(), sw.Month(), sw.Day(), 0, 0, 0, 0, sw.Location())
			w = day.Add(t.Clock)
			if w.Before(sw.Add(-12 * time.Hour)) { // past midnight
				w = w.Add(24 * time.Hour)
			}
		}
		d := w.Sub(info.StartWall)
		if d < 0 {
			return info.StartMonoNS - min(uint64(-d), info.StartMonoNS), nil
		}
		return info.StartMonoNS + uint64(d), nil
	}
	if t.FromStartNS > math.MaxUint64-start {
		return math.MaxUint64, nil
	}
	return start + t.FromStartNS, nil
}

// ParseNumbers reads a list of QP numbers or PIDs: decimal or 0x hex,
// separated by commas.
func ParseNumbers(s string) ([]uint32, error) {
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseUint(f, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: want a number (decimal or 0x hex)", f)
		}
		out = append(out, uint32(v))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%q: no number given", s)
	}
	return out, nil
}

// window is a Filter resolved against a recording.
type window struct {
	from, to uint64 // trace-clock ns; to == 0: open
	qps      []uint32
	pids     []uint32
}

func (f *Filter) resolve(info *trace.FileInfo, firstNS uint64) (window, error) {
	w := window{qps: f.QPs, pids: f.PIDs}
	start := info.StartMonoNS
	if start == 0 || (firstNS != 0 && firstNS < start) {
		start = firstNS
	}
	var err error
	if f.From.Given {
		if w.from, err = f.From.monoNS(start, info); err != nil {
			return w, err
		}
	}
	if f.To.Given {
		if w.to, err = f.To.monoNS(start, info); err != nil {
			return w, err
		}
		if w.to < w.from {
			return w, fmt.Errorf("--to %s is before --from %s", f.To.Source, f.From.Source)
		}
	}
	return w, nil
}

func (w *window) inTime(ns uint64) bool { return ns >= w.from && (w.to == 0 || ns <= w.to) }

func (w *window) pid(pid uint32) bool { return len(w.pids) == 0 || slices.Contains(w.pids, pid) }

func (w *window) qp(pid, qpn uint32) bool {
	return w.pid(pid) && (len(w.qps) == 0 || slices.Contains(w.qps, qpn))
}

// describe says what the filter named, for the message that it selected
// nothing.
func (f *Filter) describe() string {
	var parts []string
	if f.From.Given {
		parts = append(parts, "--from "+f.From.Source)
	}
	if f.To.Given {
		parts = append(parts, "--to "+f.To.Source)
	}
	hexes := func(v []uint32) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = hex(uint64(x))
		}
		return strings.Join(s, ",")
	}
	if len(f.QPs) > 0 {
		parts = append(parts, "--qp "+hexes(f.QPs))
	}
	if len(f.PIDs) > 0 {
		s := make([]string, len(f.PIDs))
		for i, x := range f.PIDs {
			s[i] = strconv.FormatUint(uint64(x), 10)
		}
		parts = append(parts, "--pid "+strings.Join(s, ","))
	}
	return strings.Join(parts, " ")
}

func (f *Filter) empty() bool {
	return !f.From.Given && !f.To.Given && len(f.QPs) == 0 && len(f.PIDs) == 0
}
