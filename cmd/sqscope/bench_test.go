package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// BenchmarkRecording records the built-in workload (inline 64 B SENDs, a
// CQE every 16th WR, one WR per call, and 16 per call), reports the file's
// bytes per WR, then measures the analyzer's ingest rate (WRs/s on one
// core) over the recorded events.
func BenchmarkRecording(b *testing.B) {
	bpftest.Require(b, probe.Preflight)
	for _, list := range []string{"1", "16"} {
		b.Run("post_list="+list, func(b *testing.B) {
			bin := sqscopeBin(b)
			rec := filepath.Join(b.TempDir(), "bench.sqscope")
			out, err := exec.Command(bin, "record", "-o", rec, "--workload", "--", "-s", "64", "-I", "64",
				"-Q", "16", "-l", list, "-n", "200000", "--sim-deterministic").CombinedOutput()
			if err != nil {
				b.Fatalf("record: %v\n%s", err, out)
			}
			st, err := os.Stat(rec)
			if err != nil {
				b.Fatal(err)
			}
			r, err := trace.Open(rec)
			if err != nil {
				b.Fatal(err)
			}
			var evs []trace.Event
			var wrs uint64
			for {
				ev, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				if p, ok := ev.(*trace.Post); ok {
					wrs += uint64(p.NumWRs())
				}
				evs = append(evs, ev)
			}
			r.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				analyzer.New(analyzer.Options{}).IngestAll(evs)
			}
			b.ReportMetric(float64(wrs)*float64(b.N)/b.Elapsed().Seconds(), "WR/s")
			b.ReportMetric(float64(st.Size())/float64(wrs), "bytes/WR")
		})
	}
}
