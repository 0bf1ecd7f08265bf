package report

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// Series is each QP's occupancy over the whole run for the HTML report's
// plots: the occupancy histories of an analyzer made with
// SeriesOptions, whose windows (buckets) are long enough that a QP's
// history holds the run from its first event to the last, and the posts
// that failed in each bucket, counted from the events as they stream by.
// Its memory is bounded by the QPs times the buckets, whatever the
// recording's length. A live trace's Series (NewLiveSeries) is the
// trace's own analyzer's histories instead, which keep each QP's latest
// windows (Note says what that leaves out).
type Series struct {
	StepNS uint64
	// Note says what of the run the series leaves out, when it does;
	// empty when it spans the run.
	Note  string
	hist  map[seriesKey]occHist
	fails map[failKey]map[uint64]uint32 // window number -> failed post calls
	// live is the analyzer a live series counts failed posts in the
	// windows of; keep is how many windows of them each QP keeps (as
	// many as a history holds: the older are dropped as posts fail)
	live *analyzer.Analyzer
	keep uint64
}

type occHist struct {
	samples []analyzer.OccSample
	startNS uint64
}

type seriesKey struct {
	pid, qpNum uint32
	gen        uint64
}

type failKey struct{ pid, qpNum uint32 }

// Buckets is how many windows each QP's plotted series has at most for a
// report of qps QPs: fewer as QPs come, so that the page stays small
// (4,096 QPs: 128 each).
func Buckets(qps int) int {
	return min(512, max(64, (1<<19)/max(qps, 1)))
}

// SeriesOptions are the analyzer options whose histories hold the run
// from firstNS to lastNS in Buckets(qps) windows per QP, opts' BlueFlame
// settings and clock kept.
func SeriesOptions(opts analyzer.Options, firstNS, lastNS uint64, qps int) analyzer.Options {
	b := uint64(Buckets(qps))
	span := lastNS - min(firstNS, lastNS) + 1
	step := max((span+b-1)/b, 1)
	n := b + 2 // the run's first and last windows need not fall on a boundary
	opts.HistoryStepNS, opts.HistoryLen = step, int(n)
	// every QP keeps all its windows: the budget is n windows of each of
	// qps QPs, rounded up as the analyzer shares it (histbudget.go)
	opts.HistoryBytes = int(n*uint64(unsafe.Sizeof(analyzer.OccSample{}))) << bits.Len(uint(max(qps, 1)))
	return opts
}

// NewSeries returns a Series of windows of stepNS; feed it every event
// (Event) and then the snapshot of the analyzer made with SeriesOptions
// (Take).
func NewSeries(stepNS uint64) *Series {
	return &Series{StepNS: max(stepNS, 1), fails: map[failKey]map[uint64]uint32{}}
}

// NewLiveSeries returns the Series of a live trace whose analyzer is a:
// feed it every event of the trace (Event), then a's last snapshot
// (TakeLive).
func NewLiveSeries(a *analyzer.Analyzer) *Series {
	n, step := a.HistoryWindows()
	s := NewSeries(step)
	s.live, s.keep = a, uint64(n)
	return s
}

// Event counts the post calls that failed, by QP and window.
func (s *Series) Event(ev trace.Event) {
	var k failKey
	var t uint64
	switch e := ev.(type) {
	case *trace.Post:
		if e.Ret == 0 {
			return
		}
		k, t = failKey{e.PID, e.QPNum}, e.TimeNS
	case *trace.PostFail:
		k, t = failKey{e.PID, e.QPNum}, e.TimeNS
	default:
		return
	}
	m := s.fails[k]
	if m == nil {
		m = map[uint64]uint32{}
		s.fails[k] = m
	}
	w := t / s.StepNS
	m[w]++
	if s.live != nil && uint64(len(m)) > 2*s.keep {
		s.prune(m, w)
	}
}

// prune drops the failed posts of m in windows no history keeps now,
// those before the latest keep windows up to w.
func (s *Series) prune(m map[uint64]uint32, w uint64) {
	n, _ := s.live.HistoryWindows()
	s.keep = max(uint64(n), 1)
	for x := range m {
		if x+s.keep <= w {
			delete(m, x)
		}
	}
}

// Take keeps the occupancy history of each QP of snap.
func (s *Series) Take(snap analyzer.Snapshot) {
	s.hist = make(map[seriesKey]occHist, len(snap.QPs))
	for i := range snap.QPs {
		q := &snap.QPs[i]
		s.hist[seriesKey{q.PID, q.QPNum, q.Gen}] = occHist{q.History, q.HistoryStartNS}
	}
}

// TakeLive keeps the occupancy history of each QP of snap, the last
// snapshot of the live trace's analyzer: its windows joined k to a
// bucket, k the fewest that fit the longest history in
// Buckets(len(snap.QPs)), and the failed posts counted alike. Note says
// how many QPs' histories are full, their oldest windows gone.
func (s *Series) TakeLive(snap analyzer.Snapshot) {
	n, _ := s.live.HistoryWindows()
	b := uint64(Buckets(len(snap.QPs)))
	longest, full := 1, 0
	for i := range snap.QPs {
		l := len(snap.QPs[i].History)
		longest = max(longest, l)
		if n > 0 && l >= n {
			full++
		}
	}
	// a history of L windows spans at most (L-1)/k+1 buckets
	k := max(1, (uint64(longest)-1+b-2)/(b-1))
	s.hist = make(map[seriesKey]occHist, len(snap.QPs))
	for i := range snap.QPs {
		q := &snap.QPs[i]
		s.hist[seriesKey{q.PID, q.QPNum, q.Gen}] = joinWindows(q.History, q.HistoryStartNS/s.StepNS, k, s.StepNS)
	}
	for key, m := range s.fails {
		j := make(map[uint64]uint32, len(m))
		for w, c := range m {
			j[w/k] += c
		}
		s.fails[key] = j
	}
	if full > 0 {
		s.Note = fmt.Sprintf(" A trace keeps each QP's latest %s of occupancy (%d windows of %s among %d QPs): the plots of %d QP(s) whose history is full start there, not at the QP's first event; record the run and report --html the recording for all of it.",
			durText(uint64(n)*s.StepNS), n, durText(s.StepNS), len(snap.QPs), full)
	}
	s.StepNS *= k
}

// joinWindows joins the windows of h, the first window number w0 of
// stepNS, k to a bucket (bucket b holds windows b*k to b*k+k-1), and
// returns the buckets and when the first starts.
func joinWindows(h []analyzer.OccSample, w0, k, stepNS uint64) occHist {
	if k == 1 || len(h) == 0 {
		return occHist{h, w0 * stepNS}
	}
	out := make([]analyzer.OccSample, 0, uint64(len(h))/k+2)
	for i, smp := range h {
		if i == 0 || (w0+uint64(i))%k == 0 {
			out = append(out, smp)
			continue
		}
		out[len(out)-1].Join(smp)
	}
	return occHist{out, w0 / k * k * stepNS}
}

// of returns the history of the report's QP q and when it starts, nil
// when the series has none of it.
func (s *Series) of(q *analyzer.QP) ([]analyzer.OccSample, uint64) {
	if s == nil {
		return nil, 0
	}
	h := s.hist[seriesKey{q.PID, q.QPNum, q.Gen}]
	return h.samples, h.startNS
}

// failsOf returns the windows of q's history (from its first) in which
// post calls on its number failed, and how many: pairs of (window index,
// count), in window order.
func (s *Series) failsOf(q *analyzer.QP, startNS uint64, n int) [][2]uint64 {
	if s == nil || n == 0 {
		return nil
	}
	m := s.fails[failKey{q.PID, q.QPNum}]
	first := startNS / s.StepNS
	var out [][2]uint64
	for w, c := range m {
		if w >= first && w < first+uint64(n) {
			out = append(out, [2]uint64{w - first, uint64(c)})
		}
	}
	slices.SortFunc(out, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	return out
}

// SeriesFrom builds the Series of the run snap was taken of, with opts'
// model settings: replay reads the run's events again, handing each to
// fn, in one pass.
func SeriesFrom(opts analyzer.Options, snap *analyzer.Snapshot, replay func(fn func(trace.Event)) error) (*Series, error) {
	so := SeriesOptions(opts, snap.FirstNS, snap.LastNS, len(snap.QPs))
	a := analyzer.New(so)
	s := NewSeries(so.HistoryStepNS)
	if err := replay(func(ev trace.Event) {
		a.Ingest(ev)
		s.Event(ev)
	}); err != nil {
		return nil, err
	}
	s.Take(a.Snapshot())
	return s, nil
}
