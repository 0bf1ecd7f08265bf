package tui

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer/analyzertest"
)

// BenchmarkTUICPU runs the real view (a tview application on a simulated
// screen) at 10 Hz over a live analyzer holding 64 QPs and reports the CPU
// it uses as a percentage of one core.
func BenchmarkTUICPU(b *testing.B) {
	a := analyzertest.Steady(64, 2000)

	scr := tcell.NewSimulationScreen("UTF-8")
	if err := scr.Init(); err != nil {
		b.Fatal(err)
	}
	scr.SetSize(200, 60)
	app := tview.NewApplication().SetScreen(scr)
	u := New(Live{A: a}, Info{Target: "bench", Mode: "events"}, app)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var before, after syscall.Rusage
	b.ResetTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	go func() { done <- u.Run(ctx, 100*time.Millisecond) }()
	time.Sleep(5 * time.Second)
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	wall := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%cpu@10Hz/64QPs")
}
