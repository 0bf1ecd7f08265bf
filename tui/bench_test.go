package tui

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// BenchmarkTUICPU runs the real view (a tview application on a simulated
// screen) at 10 Hz over a live analyzer holding 64 QPs and reports the CPU
// it uses as a percentage of one core.
func BenchmarkTUICPU(b *testing.B) {
	a := analyzer.New(analyzer.Options{})
	var evs []trace.Event
	now := uint64(1e9)
	for q := uint32(0); q < 64; q++ {
		evs = append(evs, &trace.QPCreate{Header: trace.Header{TimeNS: now, PID: 1}, QP: uint64(q + 1), QPNum: 0x100 + q,
			Type: trace.QPTypeRC, SendCQ: uint64(0x1000 + q), Caps: trace.Caps{MaxSendWR: 256, MaxInlineData: 124, MaxSendSGE: 1}})
	}
	for i := 0; i < 2000; i++ {
		now += 1000
		for q := uint32(0); q < 64; q++ {
			wrs := make([]trace.WR, 16)
			for j := range wrs {
				wrs[j] = trace.WR{ID: uint64(i*16 + j), Opcode: 2, Flags: 8, NumSGE: 1, Bytes: 64}
			}
			wrs[15].Flags |= 2
			evs = append(evs, &trace.Post{Header: trace.Header{TimeNS: now, PID: 1}, QP: uint64(q + 1), QPNum: 0x100 + q, WRs: wrs, Accepted: 16},
				&trace.Poll{Header: trace.Header{TimeNS: now + 500, PID: 1}, CQ: uint64(0x1000 + q), Max: 16, Ret: 1,
					WCs: []trace.WC{{ID: uint64(i*16 + 15), QPNum: 0x100 + q}}})
		}
	}
	a.IngestAll(evs)

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
