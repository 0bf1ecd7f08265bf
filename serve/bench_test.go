package serve

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/sqscope/sqscope/analyzer"
)

// BenchmarkScrape measures a scrape (one snapshot, every series, encoded
// as Prometheus text) of an analyzer holding n QPs of one process in
// events mode, each with posts, completions and an occupancy history, and
// the heap the analyzer and the collector hold for them.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1024, 4096} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			an := analyzer.New(analyzer.Options{})
			var e events
			for q := range uint32(n) {
				e.create(q+1, 256)
			}
			for range 100 { // 100 windows of history on every QP
				for q := range uint32(n) {
					e.post(q+1, 4, 2, 0)
				}
				e.t += uint64(analyzer.DefaultHistoryStepNS)
				an.IngestAll(e.evs)
				e.evs = e.evs[:0]
			}
			c := NewCollector(Options{MaxQPs: n, Grace: time.Minute, DiagWindow: time.Minute})
			c.ch.alive = func(uint32) bool { return true }
			c.Attach(an, 0)
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			var buf bytes.Buffer
			scrape := func() {
				mfs, err := reg.Gather()
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
				for _, mf := range mfs {
					if err := enc.Encode(mf); err != nil {
						b.Fatal(err)
					}
				}
			}
			scrape()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				scrape()
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/scrape")
			b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "heap-MiB")
			b.ReportMetric(float64(buf.Len())/1024, "KiB/scrape")
			runtime.KeepAlive(an)
		})
	}
}
