package probe

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/trace"
)

// BenchmarkProbeOverhead measures, side by side in one run, what tracing
// costs the traced loop (one ibv_post_send and one non-empty ibv_poll_cq
// per iteration on the fake provider): untraced, events mode, counters
// mode, and events mode on the perf-event uprobes older kernels fall back
// to. Run with -benchtime=1x; it prints the ratios.
func BenchmarkProbeOverhead(b *testing.B) {
	if err := checkKernel(); err != nil {
		b.Skip(err)
	}
	if err := checkPrivileges(); err != nil {
		b.Skip(err)
	}
	bin := buildTarget(&testing.T{})
	const iters = "200000"
	run := func(opts *Options) (float64, uint64, int) {
		var stdout bytes.Buffer
		cmd := exec.Command(bin, "bench", iters)
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		if opts == nil {
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			return parseBench(b, stdout.Bytes()), 0, 0
		}
		ch, err := StartHeldCmd(cmd)
		if err != nil {
			b.Fatal(err)
		}
		o := *opts
		o.Child = ch
		tr, err := Open(o)
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		n := 0
		done := make(chan error, 1)
		go func() {
			done <- tr.Run(context.Background(), func(trace.Event) { n++ })
		}()
		ch.Release()
		ch.Wait()
		select {
		case err := <-done:
			if err != nil {
				b.Fatal(err)
			}
		case <-time.After(bpftest.Timeout(b, 30*time.Second)):
			b.Fatal("Run did not end")
		}
		return parseBench(b, stdout.Bytes()), tr.Lost(), n
	}
	for range b.N {
		base, _, _ := run(nil)
		ev, evLost, evN := run(&Options{})
		ct, ctLost, ctN := run(&Options{Mode: ModeCounters})
		pe, _, _ := run(&Options{perfEventUprobes: true})
		b.ReportMetric(base, "ns/iter-untraced")
		b.ReportMetric(ev, "ns/iter-events")
		b.ReportMetric(ct, "ns/iter-counters")
		b.ReportMetric(pe, "ns/iter-events-perf-uprobes")
		b.Logf("per iteration (1 post + 1 poll): untraced %.0f ns, events %.0f ns (x%.1f, %d events, %d lost), counters %.0f ns (x%.1f, %d events, %d lost); probe cost events %.0f ns, counters %.0f ns (counters/events %.2f); events on perf-event uprobes %.0f ns (x%.2f of uprobe_multi)",
			base, ev, ev/base, evN, evLost, ct, ct/base, ctN, ctLost, ev-base, ct-base, (ct-base)/(ev-base), pe, (pe-base)/(ev-base))
	}
}

func parseBench(b *testing.B, out []byte) float64 {
	var s targetStats
	t := &testing.T{}
	s = parseStats(t, out)
	if s.NsPerIter == 0 {
		b.Fatalf("bench output %q", out)
	}
	return s.NsPerIter
}
