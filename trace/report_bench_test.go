package trace_test

import (
	"runtime"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// BenchmarkReport reads a recording of the synthetic workload stream
// (trace.StreamEvents) into an analyzer, as sqscope report does (the
// reader's events reused, handed over in batches), on one core: WRs per
// CPU-second of the whole (read and analysed), of the reading alone and of
// the analysis alone over events read before, each op measuring the three
// in turn under the same load; and the recording's bytes per WR.
func BenchmarkReport(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  trace.StreamConfig
	}{
		{"post_list=1", trace.StreamConfig{QPs: 4, Threads: 2, PostList: 1, Signal: 16, Posts: 100_000}},
		{"post_list=16", trace.StreamConfig{QPs: 4, Threads: 2, PostList: 16, Signal: 16, Posts: 6_250}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			evs := trace.StreamEvents(tc.cfg)
			wrs := 0
			for _, ev := range evs {
				if p, ok := ev.(*trace.Post); ok {
					wrs += len(p.WRs)
				}
			}
			data := trace.Recorded(b, evs)
			read := func(fn func([]trace.Event)) { readBatches(b, data, true, fn) }
			prev := runtime.GOMAXPROCS(1)
			defer runtime.GOMAXPROCS(prev)
			var whole, reading, analysis int64
			b.ResetTimer()
			for range b.N {
				t0 := trace.CPUNow()
				a := analyzer.New(analyzer.Options{BF: analyzer.DefaultBF})
				read(a.IngestAll)
				t1 := trace.CPUNow()
				read(func([]trace.Event) {})
				t2 := trace.CPUNow()
				analyzer.New(analyzer.Options{BF: analyzer.DefaultBF}).IngestAll(evs)
				whole, reading, analysis = whole+t1-t0, reading+t2-t1, analysis+trace.CPUNow()-t2
			}
			b.StopTimer()
			rate := func(ns int64) float64 { return float64(wrs) * float64(b.N) / (float64(ns) / 1e9) }
			b.ReportMetric(rate(whole), "WR/cpu-s")
			b.ReportMetric(rate(reading), "read-WR/cpu-s")
			b.ReportMetric(rate(analysis), "analyse-WR/cpu-s")
			b.ReportMetric(float64(len(data))/float64(wrs), "B/WR")
		})
	}
}
