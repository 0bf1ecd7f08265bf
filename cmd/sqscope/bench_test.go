package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/export"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/workload"
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

// BenchmarkExport records 30 s of the demo (four QPs, one overflowing
// after 8 s) and measures its exports: the size of each format against
// the recording; the Perfetto export's rate over decoded events on one
// core, per second and per CPU-second, and end to end (reading the file
// too) per CPU-second; and the live heap an export holds, at its peak,
// for the whole recording and for its first third.
func BenchmarkExport(b *testing.B) {
	bpftest.Require(b, probe.Preflight)
	bin := sqscopeBin(b)
	dir := b.TempDir()
	rec := filepath.Join(dir, "demo.sqscope")
	args := append([]string{"record", "-o", rec, "--workload", "--"}, workload.DemoArgs(30, 8)...)
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		b.Fatalf("record: %v\n%s", err, out)
	}
	recSize := fileSize(b, rec)
	open := func(path string) *trace.Reader {
		r, err := trace.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	// the first third, as a recording of its own
	r := open(rec)
	info := r.Info()
	var n int
	session.ReadAll(context.Background(), r, func(trace.Event) { n++ })
	r.Close()
	third := filepath.Join(dir, "third.sqscope")
	w, err := trace.Create(third, info)
	if err != nil {
		b.Fatal(err)
	}
	r, i := open(rec), 0
	session.ReadAll(context.Background(), r, func(ev trace.Event) {
		if i++; i <= n/3 {
			if err := w.Write(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	r.Close()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	opts := export.Options{Info: info, Model: analyzer.Options{BF: analyzer.BFFromEnv(info.Env)}}

	// the live heap of an export streaming from the file, every 32768 events
	peakHeap := func(path string) float64 {
		r := open(path)
		defer r.Close()
		x, err := export.New(io.Discard, export.FormatPerfetto, opts)
		if err != nil {
			b.Fatal(err)
		}
		var peak uint64
		var ms runtime.MemStats
		k := 0
		session.ReadAll(context.Background(), r, func(ev trace.Event) {
			x.Event(ev)
			if k++; k%32768 == 0 {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
		})
		x.Close()
		return float64(peak) / (1 << 20)
	}
	heapThird, heapWhole := peakHeap(third), peakHeap(rec)

	// end to end, in a process of its own: size and CPU time
	run := func(format string) (int64, time.Duration) {
		out := filepath.Join(dir, "out."+format)
		cmd := exec.Command(bin, "export", "--format", format, rec, "-o", out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("export: %v\n%s", err, msg)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return fileSize(b, out), time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	pfSize, pfCPU := run("perfetto")
	jsonSize, _ := run("chrome")

	// the export alone on one core, over decoded events: the median of 5
	var evs []trace.Event
	r = open(rec)
	session.ReadAll(context.Background(), r, func(ev trace.Event) { evs = append(evs, ev) })
	r.Close()
	prev := runtime.GOMAXPROCS(1)
	var rates, cpuRates []float64
	for range 5 {
		x, err := export.New(io.Discard, export.FormatPerfetto, opts)
		if err != nil {
			b.Fatal(err)
		}
		start, cpu0 := time.Now(), cpuTime()
		for _, ev := range evs {
			x.Event(ev)
		}
		if err := x.Close(); err != nil {
			b.Fatal(err)
		}
		rates = append(rates, float64(len(evs))/time.Since(start).Seconds())
		cpuRates = append(cpuRates, float64(len(evs))/(cpuTime()-cpu0).Seconds())
	}
	runtime.GOMAXPROCS(prev)
	sort.Float64s(rates)
	sort.Float64s(cpuRates)
	for i := 0; i < b.N; i++ { // the work is above; run with -benchtime 1x
	}
	b.ReportMetric(float64(recSize)/1e6, "recording-MB")
	b.ReportMetric(float64(len(evs)), "recorded-events")
	b.ReportMetric(float64(pfSize)/float64(recSize), "perfetto/recording")
	b.ReportMetric(float64(jsonSize)/float64(recSize), "json/recording")
	b.ReportMetric(rates[len(rates)/2], "events/s")
	b.ReportMetric(cpuRates[len(cpuRates)/2], "events/cpu-s")
	b.ReportMetric(float64(len(evs))/pfCPU.Seconds(), "e2e-events/cpu-s")
	b.ReportMetric(heapThird, "heap-MiB-third")
	b.ReportMetric(heapWhole, "heap-MiB-whole")
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fileSize(b *testing.B, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}
