package export

import (
	"fmt"
	"io"
	"time"
)

// progress tells, on stderr, how far an export that takes more than a
// second has got: quick exports print nothing.
type progress struct {
	w      io.Writer
	offset func() int64
	size   int64
	start  time.Time
	last   time.Time // of the last line; zero: none yet
}

const (
	progressAfter = time.Second
	progressEvery = time.Second
)

func (p *progress) line(events int64, now time.Time) string {
	s := fmt.Sprintf("export: %d events read in %.1f s", events, now.Sub(p.start).Seconds())
	if p.offset != nil && p.size > 0 {
		s += fmt.Sprintf(", %.0f%% of the recording", 100*float64(p.offset())/float64(p.size))
	}
	return s
}

// report prints a line when one is due.
func (p *progress) report(events int64) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < progressAfter || (!p.last.IsZero() && now.Sub(p.last) < progressEvery) {
		return
	}
	p.last = now
	fmt.Fprintln(p.w, "sqscope:", p.line(events, now))
}

// done prints the last line when earlier ones were printed.
func (p *progress) done(events int64) {
	if p.w == nil || p.last.IsZero() {
		return
	}
	p.last = time.Time{}
	fmt.Fprintf(p.w, "sqscope: export: %d events read in %.1f s, done\n", events, time.Since(p.start).Seconds())
}
