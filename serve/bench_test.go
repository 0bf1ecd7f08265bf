package serve

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/sqscope/sqscope/analyzer"
)

// promAccept is what Prometheus asks a target for (with gzip).
const promAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

// BenchmarkScrape measures a scrape of an analyzer holding n QPs of one
// process in events mode, each with posts, completions and an occupancy
// history, side by side with client_golang building, gathering and
// encoding the same series (the way scrapes were answered before):
//   - ms/scrape: /metrics in the Prometheus text format, snapshot included
//   - ms/scrape-om-gzip: what Prometheus asks for (OpenMetrics, gzip)
//   - encode-ms: the series of one snapshot already taken, written as text
//   - snapshot-ms: the analyzer snapshot alone
//   - alloc-MiB/scrape: memory allocated per text scrape
//   - heap-MiB: the heap the analyzer and the collector hold
//   - rss-MiB: the process's resident memory after the scrapes
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
			own := prometheus.NewRegistry()
			own.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			h := newMetricsHandler(c, own, prometheus.NewRegistry())
			h.share = 0 // every scrape renders: a render is what is measured
			size := 0
			scrape := func(accept, encoding string) {
				req := httptest.NewRequest("GET", "/metrics", nil)
				req.Header.Set("Accept", accept)
				req.Header.Set("Accept-Encoding", encoding)
				w := &discard{h: http.Header{}}
				h.ServeHTTP(w, req)
				if w.code != 0 {
					b.Fatalf("scrape: status %d", w.code)
				}
				size = w.n
			}
			scrape("text/plain", "")
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ResetTimer() // which forgets metrics reported before it
			b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/(1<<20), "heap-MiB")
			ms, alloc := timed(b.N, func() { scrape("text/plain", "") })
			b.ReportMetric(ms, "ms/scrape")
			b.ReportMetric(alloc, "alloc-MiB/scrape")
			b.ReportMetric(float64(size)/1024, "KiB/scrape")
			ms, _ = timed(b.N, func() { scrape(promAccept, "gzip") })
			b.ReportMetric(ms, "ms/scrape-om-gzip")
			b.ReportMetric(float64(size)/1024, "KiB/scrape-om-gzip")

			snap := an.SnapshotHistory(noHistory)
			var x exposer
			encode := func() {
				x.reset()
				c.visitSnapshot(snap, x.emit)
				if err := x.write(false, nil); err != nil {
					b.Fatal(err)
				}
			}
			encode() // its buffers grown, as the handler's are
			ms, _ = timed(b.N, encode)
			b.ReportMetric(ms, "encode-ms")
			ms, _ = timed(b.N, func() { snap = an.SnapshotHistory(noHistory) })
			b.ReportMetric(ms, "snapshot-ms")
			b.ReportMetric(rssMiB(b), "rss-MiB")

			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			var buf bytes.Buffer
			ms, alloc = timed(b.N, func() {
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
			})
			b.ReportMetric(ms, "ms/scrape-client_golang")
			b.ReportMetric(alloc, "alloc-MiB/scrape-client_golang")
			b.ReportMetric(rssMiB(b), "rss-MiB-client_golang")
			runtime.KeepAlive(an)
		})
	}
}

// timed runs f n times: milliseconds and MiB allocated per run.
func timed(n int, f func()) (ms, allocMiB float64) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	for range n {
		f()
	}
	d := time.Since(start)
	runtime.ReadMemStats(&m1)
	return float64(d.Microseconds()) / 1000 / float64(n), float64(m1.TotalAlloc-m0.TotalAlloc) / (1 << 20) / float64(n)
}

// rssMiB is the process's resident memory now (VmRSS).
func rssMiB(b *testing.B) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// discard is a ResponseWriter that counts the body.
type discard struct {
	h       http.Header
	code, n int
}

func (d *discard) Header() http.Header { return d.h }
func (d *discard) WriteHeader(c int)   { d.code = c }
func (d *discard) Write(p []byte) (int, error) {
	d.n += len(p)
	return len(p), nil
}
