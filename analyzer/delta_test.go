package analyzer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

func TestDeltas(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name   string
		first  func(s *streamtest.Stream) // before the first report
		second func(s *streamtest.Stream) // between the first and the second
		want   map[string]float64
		absent []string // keys the second interval's QP must not have
	}{
		{"events mode: what the interval added, levels left out", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
			s.Send(1, 10, 0, 2)
		}, func(s *streamtest.Stream) {
			s.Send(1, 6, 0, 2)
			s.Send(1, 2, 0, 2)
		}, map[string]float64{"wrs": 8, "post_calls": 2, "doorbells": 2, "signaled": 4, "total.wrs": 8},
			[]string{"peak_outstanding", "longest_unsignaled_run"}},
		{"counters mode: only what it measures", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
			s.Add(&trace.QPCounters{Header: s.Header(), QP: streamtest.QPAddr(1), QPNum: 1, WRs: 100, PostCalls: 100, Doorbells: 100})
		}, func(s *streamtest.Stream) {
			s.Add(&trace.QPCounters{Header: s.Header(), QP: streamtest.QPAddr(1), QPNum: 1, WRs: 30, PostCalls: 30, Doorbells: 30})
		}, map[string]float64{"wrs": 30, "post_calls": 30, "total.wrs": 30},
			[]string{"bf_writes", "cqes_polled", "enomem_sq_full", "peak_outstanding"}},
		{"a QP created in the interval counts from 0", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
			s.Send(1, 10, 0, 2)
		}, func(s *streamtest.Stream) {
			s.Create(2, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
			s.Send(2, 5, 0, 1)
		}, map[string]float64{"wrs": 5, "signaled": 5, "total.wrs": 5}, nil},
		{"rxe: no figure of the mlx5 model, in the QP or the total", func(s *streamtest.Stream) {
			s.CreateOn(1, streamtest.RCCaps(64, 60, 1), streamtest.RxeLib)
			s.Send(1, 10, 0, 2)
		}, func(s *streamtest.Stream) {
			s.Send(1, 6, 0, 2)
		}, map[string]float64{"wrs": 6, "doorbells": 1, "total.wrs": 6},
			[]string{"bf_writes", "wqebbs", "dma_reads_wqe", "dma_reads_payload", "dma_bytes_payload", "cqe_writes", "mmio_bytes",
				"total.bf_writes", "total.dma_reads_payload", "total.dma_bytes_payload"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			a := New(Options{})
			d := NewDeltas(t0.Add(-time.Second))
			tc.first(s)
			a.IngestAll(s.Events)
			first := d.Next(a.Snapshot(), t0)
			if first.Seconds != 1 || first.Total.WRs != a.Snapshot().Total.WRs {
				t.Errorf("first interval: %v s, %d WRs; want 1 s and every WR so far", first.Seconds, first.Total.WRs)
			}
			s.Events = s.Events[:0]
			tc.second(s)
			a.IngestAll(s.Events)
			iv := d.Next(a.Snapshot(), t0.Add(1500*time.Millisecond))
			b, err := json.Marshal(iv)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Seconds float64
				Events  float64
				Total   map[string]any
				QPs     []map[string]any
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if got.Seconds != 1.5 || got.Events != float64(len(s.Events)) {
				t.Errorf("seconds %v events %v, want 1.5 and %d\n%s", got.Seconds, got.Events, len(s.Events), b)
			}
			last := got.QPs[len(got.QPs)-1]
			for k, want := range tc.want {
				m, key := last, k
				if after, ok := strings.CutPrefix(k, "total."); ok {
					m, key = got.Total, after
				}
				if m[key] != want {
					t.Errorf("%s = %v, want %v\n%s", k, m[key], want, b)
				}
			}
			for _, k := range tc.absent {
				m, key := last, k
				if after, ok := strings.CutPrefix(k, "total."); ok {
					m, key = got.Total, after
				}
				if v, ok := m[key]; ok {
					t.Errorf("%s = %v, want it left out", k, v)
				}
			}
		})
	}
}
