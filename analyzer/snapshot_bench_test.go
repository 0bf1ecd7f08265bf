package analyzer_test

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
)

// fullQPs is an analyzer of 4,096 QPs over 70 s of trace time, one round
// of posts and polls every 100 ms: every occupancy history is as long as
// the history budget lets it be.
func fullQPs() *analyzer.Analyzer { return analyzertest.SteadyEvery(4096, 700, 100_000_000) }

// cpuTime is the CPU time this process has used (every thread: the
// garbage collector's work counts too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSnapshot4096 is one snapshot of 4,096 QPs with full histories:
// as the live view takes it (the history of the one QP it draws; "reused":
// into the QPs of a snapshot it let go, as it does) and whole (reports). cpu-ms/snapshot is the process's CPU time per snapshot,
// which a loaded machine does not inflate as it does the wall time.
func BenchmarkSnapshot4096(b *testing.B) {
	a := fullQPs()
	view := func(pid, qpNum uint32) bool { return qpNum == 0x100 }
	for _, tc := range []struct {
		name  string
		keep  func(pid, qpNum uint32) bool
		reuse bool
	}{
		{"view", view, false},
		{"view-reused", view, true},
		{"whole", nil, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			runtime.GC()
			var held [2][]analyzer.QP // the view holds two snapshots
			cpu := cpuTime()
			for i := 0; b.Loop(); i++ {
				var buf []analyzer.QP
				if tc.reuse {
					buf = held[i%2]
				}
				s, _ := a.SnapshotWith(analyzer.SnapshotOptions{History: tc.keep, Reuse: buf})
				if len(s.QPs) != 4096 {
					b.Fatalf("%d QPs", len(s.QPs))
				}
				held[i%2] = s.QPs
			}
			b.ReportMetric(float64(cpuTime()-cpu)/1e6/float64(b.N), "cpu-ms/snapshot")
		})
	}
}

// BenchmarkMemory4096 reports the heap an analyzer of 4,096 QPs with full
// histories holds, per QP and in all.
func BenchmarkMemory4096(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		a := fullQPs()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/4096, "B/QP")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
		runtime.KeepAlive(a)
	}
}
