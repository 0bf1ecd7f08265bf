package tui

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer/analyzertest"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTUICPU runs the real view (a tview application on a simulated
// screen) at 10 Hz for 5 s over a live analyzer holding 64 and 4,096 QPs
// and reports the CPU the process used as a percentage of one core.
func BenchmarkTUICPU(b *testing.B) {
	for _, n := range []int{64, 4096} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) {
			a := analyzertest.SteadyEvery(n, 50, 10_000_000)
			scr := tcell.NewSimulationScreen("UTF-8")
			if err := scr.Init(); err != nil {
				b.Fatal(err)
			}
			scr.SetSize(200, 60)
			app := tview.NewApplication().SetScreen(scr)
			u := New(Live{A: a}, Info{Target: "bench", Mode: "events"}, app)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			b.ResetTimer()
			before := cpuTime()
			start := time.Now()
			go func() { done <- u.Run(ctx, 100*time.Millisecond) }()
			time.Sleep(5 * time.Second)
			cpu := cpuTime() - before
			wall := time.Since(start)
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%cpu@10Hz")
		})
	}
}

// BenchmarkTick is one refresh of the view of 64 and 4,096 QPs: the
// analyzer's snapshot, its rows, and the draw on a simulated 200×60
// screen. cpu-ms/tick is the process's CPU time per refresh; at 10 Hz it
// is also the share of a core in percent.
func BenchmarkTick(b *testing.B) {
	for _, n := range []int{64, 4096} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) {
			a := analyzertest.SteadyEvery(n, 50, 10_000_000)
			app := &fakeApp{}
			u := New(Live{A: a}, Info{Target: "bench", Mode: "events"}, app)
			scr := tcell.NewSimulationScreen("UTF-8")
			if err := scr.Init(); err != nil {
				b.Fatal(err)
			}
			scr.SetSize(200, 60)
			u.Root().SetRect(0, 0, 200, 60)
			b.ReportAllocs()
			before := cpuTime()
			for b.Loop() {
				u.Tick()
				u.Root().Draw(scr)
				scr.Show()
			}
			b.ReportMetric(float64(cpuTime()-before)/1e6/float64(b.N), "cpu-ms/tick")
		})
	}
}
