package analyzer

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// steadyCycle is a QP create, then posts of 16 WRs whose last WR is
// signaled, each followed by the poll of its CQE: the cycle ends with the SQ
// empty, so it can be fed again and again with fresh times.
func steadyCycle(posts int) (create trace.Event, cycle []trace.Event, wrs int) {
	s := streamtest.New()
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 60, 1), false)
	for range posts {
		s.Send(1, 16, ibv.SendInline, 16)
		s.Poll(1, s.IDs[1]-1)
	}
	return s.Events[0], s.Events[1:], posts * 16
}

// feedCycle ingests the cycle with times continuing from *now.
func feedCycle(a *Analyzer, cycle []trace.Event, now *uint64) {
	for _, ev := range cycle {
		*now += 100
		h := ev.Hdr()
		h.TimeNS = *now
		if p, ok := ev.(*trace.Post); ok {
			p.EntryNS = *now - 40
		}
		a.Ingest(ev)
	}
}

// BenchmarkIngest reports the analyzer's ingest rate in WRs per second on
// one core, from a synthetic stream of 16-WR posts and polls.
func BenchmarkIngest(b *testing.B) {
	create, cycle, wrs := steadyCycle(64)
	a := New(Options{BF: DefaultBF})
	a.Ingest(create)
	now := uint64(1_000_000)
	feedCycle(a, cycle, &now)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		feedCycle(a, cycle, &now)
	}
	b.ReportMetric(float64(b.N)*float64(wrs)/b.Elapsed().Seconds(), "WRs/s")
	b.ReportMetric(float64(b.N)*float64(len(cycle))/b.Elapsed().Seconds(), "events/s")
}

// The steady state (SQ model, history ring, histograms, run counts) must not
// allocate per WR.
func TestIngestDoesNotAllocate(t *testing.T) {
	create, cycle, _ := steadyCycle(64)
	a := New(Options{BF: DefaultBF, HistoryStepNS: 1000})
	a.Ingest(create)
	now := uint64(1_000_000)
	feedCycle(a, cycle, &now)
	cycles := uint64(1)
	n := testing.AllocsPerRun(20, func() { feedCycle(a, cycle, &now); cycles++ })
	if n != 0 {
		t.Fatalf("%.1f allocations per cycle of %d events, want 0", n, len(cycle))
	}
	q := a.Snapshot().QPs[0]
	if q.Outstanding != 0 || q.WRs != cycles*64*16 || q.PeakOutstanding != 16 || q.BFWrites != 0 || q.Doorbells != cycles*64 {
		t.Fatalf("after the cycles: %+v", q.Counters)
	}
}
