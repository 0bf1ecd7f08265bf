package report

import (
	"cmp"
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
// recording's length.
type Series struct {
	StepNS uint64
	hist   map[seriesKey]*analyzer.QP
	fails  map[failKey]map[uint64]uint32 // window number -> failed post calls
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
	m[t/s.StepNS]++
}

// Take keeps the occupancy history of each QP of snap.
func (s *Series) Take(snap analyzer.Snapshot) {
	s.hist = make(map[seriesKey]*analyzer.QP, len(snap.QPs))
	for i := range snap.QPs {
		q := &snap.QPs[i]
		s.hist[seriesKey{q.PID, q.QPNum, q.Gen}] = q
	}
}

// of returns the history of the report's QP q and when it starts, nil
// when the series has none of it.
func (s *Series) of(q *analyzer.QP) ([]analyzer.OccSample, uint64) {
	if s == nil {
		return nil, 0
	}
	h := s.hist[seriesKey{q.PID, q.QPNum, q.Gen}]
	if h == nil {
		return nil, 0
	}
	return h.History, h.HistoryStartNS
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
