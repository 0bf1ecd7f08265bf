package analyzer

import (
	"math"
	"math/bits"
)

// Occupancy history defaults: one sample per 10 ms of trace time, the last
// 60 s, enough for a live view without growing with the trace.
const (
	DefaultHistoryStepNS = 10_000_000
	DefaultHistoryLen    = 6000
)

// Trend prediction, on the most WRs outstanding in each window (a window's
// end is a sample at a random moment: a flow-controlled queue that swings
// between a quarter and all of its depth in every signal interval can end
// windows in rising order by chance, while its maximum stays at the top): the
// maxima of trendWindows consecutive windows never fell and rose from one to
// the next at least trendMinRises times (a ramp, not the one step of an
// application that starts or resumes); they reach at least half the depth and
// more than the queue held before those windows since it last stayed below
// half for trendWindows windows (an application with its own flow control
// holds a plateau it reached before; a slow one swings up to it again in
// every signal interval); completions lag behind (a signaled WR posted before
// the second half of those windows is still outstanding: between two
// signaled WRs a queue grows by design, and one CQE retires it); and at that
// rate the maxima reach the depth within trendHorizonNS. A queue past the
// depth its QP reports (the provider holds more than it says) that still
// grows that way is predicted too, without a time to full.
const (
	trendWindows   = 8
	trendMinRises  = (trendWindows - 1) / 2
	trendHorizonNS = 1_000_000_000
)

// OccSample is a send queue's occupancy over one window of trace time.
type OccSample struct {
	Max  uint32 `json:"max"`  // most WRs outstanding at any moment of the window
	End  uint32 `json:"end"`  // outstanding at the end of the window
	WRs  uint32 `json:"wrs"`  // WRs posted in the window
	CQEs uint32 `json:"cqes"` // send CQEs of the QP polled in the window
	// Min is the fewest WRs outstanding at any moment of the window (from
	// its start, or the QP's first event in it): with Max, the band a
	// downsampled plot draws without losing a peak or a trough.
	Min uint32 `json:"min"`
}

// Join makes s the sample of its window and the next one, o, as one
// longer window: the band of both, the end of the later, the WRs and CQEs
// of both (a plot of a long run, downsampled).
func (s *OccSample) Join(o OccSample) {
	s.Max, s.Min, s.End = max(s.Max, o.Max), min(s.Min, o.Min), o.End
	s.WRs += o.WRs
	s.CQEs += o.CQEs
}

// history is a ring of the most recent windows. Window w covers trace time
// [w*step, (w+1)*step). The analyzer lowers n when many QPs share the
// history budget (histbudget.go).
type history struct {
	step, n uint64
	// samples is a ring of n windows, window w at (w-base)%n, grown as
	// windows come: a short-lived QP holds the windows it lived, not n
	samples    []OccSample
	base       uint64
	first, cur uint64 // window numbers of the oldest and the current sample
	curAt      uint64 // where the current sample is in samples
	curEnd     uint64 // first ns past the current window
	started    bool
	closed     bool // a window closed since the analyzer last looked
	trendArmed bool // a trend prediction may be made (re-armed below half)
	// peak is the most WRs outstanding in windows before peakNext, since
	// the queue last stayed below half its depth for trendWindows windows,
	// folded in as the trend moves past them; low says the last window
	// looked at was below half, since window lowFrom
	peak     uint32
	peakNext uint64
	low      bool
	lowFrom  uint64
}

func clamp32(v uint64) uint32 {
	if v > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}

// note records the occupancy after an event at time now. Events slightly
// out of order (from different CPUs) count in the current window.
func (h *history) note(now, out uint64, wrs, cqes uint32) {
	if h.started && now < h.curEnd { // the usual case, in line
		h.samples[h.curAt].add(clamp32(out), wrs, cqes)
		return
	}
	h.noteAfter(now, out, wrs, cqes)
}

// add notes o outstanding after wrs posted and cqes polled.
func (s *OccSample) add(o, wrs, cqes uint32) {
	s.Max = max(s.Max, o)
	s.Min = min(s.Min, o)
	s.End = o
	s.WRs += wrs
	s.CQEs += cqes
}

// noteAfter is note of an event that starts the history or a window.
func (h *history) noteAfter(now, out uint64, wrs, cqes uint32) {
	if h.n == 0 {
		return
	}
	o := clamp32(out)
	if !h.started {
		h.started, h.trendArmed = true, true
		h.first = now / h.step
		h.base, h.cur = h.first, h.first
		h.grow(h.cur)
		h.curAt = 0
		*h.at(h.cur) = OccSample{Min: o}
		h.curEnd = (h.cur + 1) * h.step
	} else if now >= h.curEnd {
		h.advance(now / h.step)
	}
	h.samples[h.curAt].add(o, wrs, cqes)
}

// at is window w's sample (w between first and cur).
func (h *history) at(w uint64) *OccSample { return &h.samples[(w-h.base)%h.n] }

// grow makes room for the windows up to w, n at most.
func (h *history) grow(w uint64) {
	need := min(h.n, w-h.base+1)
	if uint64(len(h.samples)) >= need {
		return
	}
	if uint64(cap(h.samples)) < need {
		s := make([]OccSample, len(h.samples), min(h.n, max(need, 2*uint64(cap(h.samples)), 16)))
		copy(s, h.samples)
		h.samples = s
	}
	h.samples = h.samples[:need]
}

// advance closes the current window and starts window w; windows without an
// event in between carry the occupancy over.
func (h *history) advance(w uint64) {
	end := h.at(h.cur).End
	if w-h.cur > h.n {
		h.cur = w - h.n
	}
	h.grow(w)
	for i := h.cur + 1; i <= w; i++ {
		*h.at(i) = OccSample{Max: end, End: end, Min: end}
	}
	h.cur, h.curAt = w, (w-h.base)%h.n
	h.curEnd = (w + 1) * h.step
	if h.cur-h.first >= h.n {
		h.first = h.cur - h.n + 1
	}
	h.closed = true
}

// limit keeps at most m windows from now on, dropping the oldest beyond.
func (h *history) limit(m uint64) {
	if h.n <= m {
		return
	}
	if !h.started {
		h.n = m
		return
	}
	first := h.first
	if h.cur+1-first > m {
		first = h.cur + 1 - m
	}
	out := make([]OccSample, h.cur-first+1)
	for w := first; w <= h.cur; w++ {
		out[w-first] = *h.at(w)
	}
	h.samples, h.base, h.first, h.n = out, first, first, m
	h.curAt = h.cur - first
}

// copyOut returns the samples oldest first and the start of the oldest.
func (h *history) copyOut() ([]OccSample, uint64) {
	if !h.started {
		return nil, 0
	}
	out := make([]OccSample, 0, h.cur-h.first+1)
	for w := h.first; w <= h.cur; w++ {
		out = append(out, *h.at(w))
	}
	return out, h.first * h.step
}

// trend looks at the last trendWindows closed windows, given when the oldest
// outstanding signaled WR was posted (dueNS, noValue when none is). It
// returns the most WRs outstanding in the first and the last of them, the
// projected time to reach depth, and whether that is a prediction worth making now.
func (h *history) trend(depth, dueNS uint64) (from, to, etaNS uint64, ok bool) {
	if !h.started || depth == 0 || h.cur == h.first {
		return 0, 0, 0, false
	}
	last := uint64(h.at(h.cur - 1).Max)
	if last < depth/2 {
		h.trendArmed = true
		if !h.low {
			// windows that closed together, with no event to look
			// at them, may have been below half already
			h.low, h.lowFrom = true, h.cur-1
			for h.lowFrom > h.first && h.cur-h.lowFrom < trendWindows &&
				uint64(h.at(h.lowFrom-1).Max) < depth/2 {
				h.lowFrom--
			}
		}
		if h.cur-h.lowFrom >= trendWindows {
			// drained for as long as a trend takes to see: what the
			// queue held before says nothing of what comes next
			h.peak, h.peakNext = 0, h.cur
		}
		return 0, 0, 0, false
	}
	h.low = false
	if !h.trendArmed || h.cur < h.first+trendWindows {
		return 0, 0, 0, false
	}
	start := h.cur - trendWindows
	peakBefore := h.peakThrough(start)
	prev := uint64(h.at(start).Max)
	from = prev
	rises := 0
	for w := start + 1; w < h.cur; w++ {
		m := uint64(h.at(w).Max)
		if m < prev {
			return 0, 0, 0, false
		}
		if m > prev {
			rises++
		}
		prev = m
	}
	if rises < trendMinRises || last <= peakBefore {
		return 0, 0, 0, false
	}
	// completions lag behind: a WR whose completion was asked for before
	// the second half of the trend is still outstanding (between two
	// signaled WRs a queue grows by design, and one CQE retires it)
	if dueNS > (start+trendWindows/2)*h.step {
		return 0, 0, 0, false
	}
	if last >= depth {
		// full (the overflow diagnosis speaks); the mlx5 model never holds
		// more than the depth (boundByDepth)
		return 0, 0, 0, false
	}
	// growth per ns over trendWindows-1 windows
	span := (trendWindows - 1) * h.step
	etaNS = (depth - last) * span / (last - from)
	if etaNS > trendHorizonNS {
		return 0, 0, 0, false
	}
	h.trendArmed = false
	return from, last, etaNS, true
}

// peakThrough is the most WRs outstanding in the windows up to and
// including the closed window w, since the queue last stayed below half
// its depth for trendWindows windows; each window is folded in once.
func (h *history) peakThrough(w uint64) uint64 {
	for i := max(h.peakNext, h.first); i <= w; i++ {
		h.peak = max(h.peak, h.at(i).Max)
	}
	h.peakNext = max(h.peakNext, w+1)
	return uint64(h.peak)
}

// HistBucket is one bucket of a log2 histogram: values Lo..Hi inclusive.
type HistBucket struct {
	Lo    uint64 `json:"lo"`
	Hi    uint64 `json:"hi"`
	Count uint64 `json:"count"`
}

// bucketBounds returns the values bucket i of a bits.Len64 histogram holds.
func bucketBounds(i int) (lo, hi uint64) {
	if i == 0 {
		return 0, 0
	}
	lo = 1 << (i - 1)
	if i == 64 {
		return lo, math.MaxUint64
	}
	return lo, 1<<i - 1
}

// occExact is how many occupancy values are counted one by one: every
// depth a provider offers (mlx5 and rxe cap max_qp_wr at 32768 or less)
// but the deepest. The counts grow with the peak, not the depth, so a QP
// costs 8 B per occupancy value it reached, at most 256 KiB; values past
// it (a queue deeper than that, or an inconsistent stream) are counted in
// log2 buckets, and a percentile that falls there is an upper bound.
const occExact = 1 << 15

// occDist counts the occupancy left by each post call.
type occDist struct {
	exact []uint64   // exact[v]: post calls that left v outstanding
	over  [65]uint64 // past occExact, by bits.Len64
	sum   uint64
	n     uint64
}

func (d *occDist) note(out uint64) {
	d.sum += out
	d.n++
	if out >= occExact {
		d.over[bits.Len64(out)]++
		return
	}
	if out >= uint64(len(d.exact)) {
		n := max(2*uint64(len(d.exact)), out+1, 64)
		d.exact = append(d.exact, make([]uint64, min(n, occExact)-uint64(len(d.exact)))...)
	}
	d.exact[out]++
}

// rank returns the value of nearest rank r (1-based), and whether it is
// exact; past occExact it is the bucket's upper bound, at most peak.
func (d *occDist) rank(r, peak uint64) (uint64, bool) {
	var seen uint64
	for v, n := range d.exact {
		if seen += n; seen >= r {
			return uint64(v), true
		}
	}
	for i, n := range d.over {
		if seen += n; n > 0 && seen >= r {
			_, hi := bucketBounds(i)
			return min(hi, peak), false
		}
	}
	return peak, false
}

// Occupancy summarizes how full a send queue was.
type Occupancy struct {
	Now   uint64 `json:"now"`
	Peak  uint64 `json:"peak"`
	Depth uint64 `json:"depth"` // max_send_wr the model uses; 0 when unknown
	// After each post call: the mean, the median and the 99th percentile
	// (nearest rank), exact unless PercentilesBound (then upper bounds:
	// see occExact), and a log2 histogram whose last bucket ends at the
	// peak.
	Mean             float64      `json:"mean_after_post"`
	P50              uint64       `json:"p50_after_post"`
	P99              uint64       `json:"p99_after_post"`
	PercentilesBound bool         `json:"percentiles_upper_bounds,omitempty"`
	Histogram        []HistBucket `json:"histogram_after_post"`
}

// occupancy is the QP's occupancy figures; the histogram only when
// withHist.
func (q *sq) occupancy(withHist bool) Occupancy {
	now, _ := q.sampledOutstanding() // between sentinel windows, the last one's
	o := Occupancy{Now: now, Peak: q.c.PeakOutstanding, Depth: q.depth()}
	d := &q.occ
	if d.n == 0 {
		return o
	}
	o.Mean = float64(d.sum) / float64(d.n)
	var exact50, exact99 bool
	o.P50, exact50 = d.rank((d.n+1)/2, o.Peak)
	o.P99, exact99 = d.rank(d.n-d.n/100, o.Peak)
	o.PercentilesBound = !exact50 || !exact99
	if !withHist {
		return o
	}
	var buckets [65]uint64
	for v, n := range d.exact {
		buckets[bits.Len64(uint64(v))] += n
	}
	for i, n := range d.over {
		buckets[i] += n
	}
	for i, n := range buckets {
		if n > 0 {
			lo, hi := bucketBounds(i)
			o.Histogram = append(o.Histogram, HistBucket{Lo: lo, Hi: min(hi, o.Peak), Count: n})
		}
	}
	return o
}
