package analyzer

import "math/bits"

// The occupancy histories of all QPs share a budget: with a few QPs each
// keeps Options.HistoryLen windows; with thousands each keeps its share,
// down to histMinLen windows (enough for the trend, trendWindows, and a
// sparkline), so that memory grows by at most histMinLen samples per QP.
const (
	DefaultHistoryBytes = 32 << 20 // 279 QPs keep the default 60 s; 4,096 keep 4 s
	histMinLen          = 256
	sampleBytes         = 20 // unsafe.Sizeof(OccSample{})
)

// histLenFor is the most windows each of n QPs keeps: the budget shared
// by n rounded up to a power of two, so that the rings shrink only
// log2(n) times as QPs come.
func histLenFor(budget uint64, n int, most uint64) uint64 {
	share := budget / sampleBytes
	if n > 1 {
		share >>= bits.Len(uint(n - 1))
	}
	return min(most, max(share, histMinLen))
}

// fitHistories gives a new QP its history length and, when the QPs'
// share of the budget fell, shortens the rings of the QPs before it.
func (a *Analyzer) fitHistories(q *sq) {
	if a.opts.HistoryLen <= 0 {
		return
	}
	a.histQPs++
	n := histLenFor(uint64(a.opts.HistoryBytes), a.histQPs, uint64(a.opts.HistoryLen))
	if n < a.histLen {
		for _, o := range a.all {
			o.hist.limit(n)
		}
	}
	a.histLen = n
	q.hist.step, q.hist.n = a.opts.HistoryStepNS, n
}

// HistoryWindows is how many windows of stepNS each QP's occupancy
// history keeps now: Options.HistoryLen, fewer as QPs come to share the
// budget; a window older than that is gone from a QP whose ring is full.
func (a *Analyzer) HistoryWindows() (n int, stepNS uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.histQPs == 0 {
		return a.opts.HistoryLen, a.opts.HistoryStepNS
	}
	return int(a.histLen), a.opts.HistoryStepNS
}
