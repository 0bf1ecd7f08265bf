package analyzer

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
)

// Each provider gets its own model: mlx5 and the simulator the mlx5 model
// (labelled so), rxe what is true there (no mlx5-only figure, its own
// overflow cause, more outstanding than it reports said so), a provider
// sqscope has no model of the generic one: the application's side and the
// causes its caps show, marked inferred.
func TestProviders(t *testing.T) {
	type want struct {
		provider string
		model    string
		diags    []string
		absent   []string // QP JSON keys left out
	}
	wants := map[string]want{
		"rxe_send_lazy_poll": {"rxe", "", []string{"sq_overflow_rnr_retry"},
			[]string{"bf_writes", "wqebbs", "dma_reads_wqe", "dma_reads_payload", "dma_bytes_payload", "mmio_bytes", "pcie", "enomem_inline", "enomem_sge"}},
		"rxe_write_lazy_poll":      {"rxe", "", nil, []string{"bf_writes", "wqebbs", "dma_reads_payload", "dma_bytes_payload", "pcie"}},
		"rxe_write_not_completing": {"rxe", "", []string{"sq_overflow_not_completing"}, nil},
		"mlx5_send_lazy_poll":      {"mlx5", Mlx5Model, []string{"sq_overflow_cq_not_polled"}, nil},
		"unknown_provider": {"unknown", "", []string{"sq_overflow_inferred"},
			[]string{"bf_writes", "wqebbs", "dma_reads_payload", "dma_bytes_payload", "pcie"}},
		"late_attach_rxe": {"rxe", "", []string{"sq_overflow_rnr_retry"}, nil},
		"late_attach_unknown_provider": {"unknown", "", []string{"enomem_cause_unknown"},
			[]string{"enomem_sq_full", "enomem_inline", "enomem_sge", "cause_basis", "bf_writes", "dma_reads_payload", "pcie"}},
	}
	for _, c := range streamtest.Providers {
		t.Run(c.Name, func(t *testing.T) {
			tc := streamtest.Want(t, wants, c.Name)
			s := streamtest.New()
			c.Build(s)
			snap, q := oneQP(t, s)
			if q.Provider != tc.provider || q.Model != tc.model {
				t.Errorf("provider %q model %q, want %q %q", q.Provider, q.Model, tc.provider, tc.model)
			}
			kinds := diagKinds(snap)
			if !slices.Equal(kinds, tc.diags) {
				t.Errorf("diagnoses %v, want %v", kinds, tc.diags)
			}
			qj, err := q.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tc.absent {
				if bytes.Contains(qj, []byte(`"`+k+`"`)) {
					t.Errorf("QP JSON has %q: %s", k, qj)
				}
			}
		})
	}
}

// oneQP runs the stream and returns its snapshot and its one QP.
func oneQP(t *testing.T, s *streamtest.Stream) (Snapshot, QP) {
	t.Helper()
	snap := run(t, s, Options{BF: DefaultBF})
	if len(snap.QPs) != 1 {
		t.Fatalf("%d QPs, want 1", len(snap.QPs))
	}
	return snap, snap.QPs[0]
}

func TestReported(t *testing.T) {
	tests := []struct {
		name string
		q    QP
		key  string
		want bool
	}{
		{"mlx5 model, events mode: BlueFlame", QP{Model: Mlx5Model}, "bf_writes", true},
		{"mlx5 model, events mode: PCIe savings", QP{Model: Mlx5Model}, "wqe_fetches_saved_batching", true},
		{"mlx5 model, counters mode: BlueFlame", QP{Model: Mlx5Model, CountersOnly: true}, "bf_writes", false},
		{"mlx5 model, counters mode: doorbells saved", QP{Model: Mlx5Model, CountersOnly: true}, "doorbells_saved", true},
		{"unknown provider: WRs", QP{Provider: "unknown"}, "wrs", true},
		{"unknown provider: BlueFlame", QP{Provider: "unknown"}, "bf_writes", false},
		{"unknown provider: SQ-full cause, inferred from caps", QP{Provider: "unknown", CapsKnown: true}, "enomem_sq_full", true},
		{"unknown provider: inline cause, inferred from caps", QP{Provider: "unknown", CapsKnown: true}, "enomem_inline", true},
		{"unknown provider, caps unknown: no SQ-full cause", QP{Provider: "unknown"}, "enomem_sq_full", false},
		{"unknown provider, caps unknown: no SGE cause", QP{Provider: "unknown"}, "enomem_sge", false},
		{"unknown provider, caps unknown: causes unknown", QP{Provider: "unknown"}, "enomem_unknown", true},
		{"rxe, caps unknown: SQ-full cause (its own checks)", QP{Provider: "rxe"}, "enomem_sq_full", true},
		{"rxe: inline cause (EINVAL there)", QP{Provider: "rxe"}, "enomem_inline", false},
		{"unknown provider: doorbells saved", QP{Provider: "unknown"}, "doorbells_saved", false},
		{"rxe: SQ-full cause", QP{Provider: "rxe", CapsKnown: true}, "enomem_sq_full", true},
		{"rxe: PCIe savings", QP{Provider: "rxe"}, "cqe_writes_saved_unsignaled", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.q.Reported(tc.key); got != tc.want {
				t.Errorf("Reported(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

// The invariant checker holds every front end's snapshot to the rule: a
// figure the QP's provider model does not give is none, in the QP and in
// the totals.
func TestCheckFiguresNotGiven(t *testing.T) {
	s := streamtest.New()
	s.CreateOn(1, streamtest.RCCaps(64, 64, 1), streamtest.RxeLib)
	s.LazyPoll(1, 10, ibv.WRSend)
	snap, _ := oneQP(t, s)
	if errs := snap.Check(); len(errs) != 0 {
		t.Fatalf("invariants of the rxe snapshot: %v", errs)
	}
	for _, tc := range []struct {
		name string
		set  func(q *QP)
		want string
	}{
		{"payload reads", func(q *QP) { q.DMAReadsPayload, q.DMABytesPayload = 10, 640 }, "dma_reads_payload 10, a figure the model of provider rxe does not give"},
		{"BlueFlame", func(q *QP) { q.BFWrites = 1 }, "bf_writes 1"},
		{"savings", func(q *QP) { q.PCIe = Savings{DoorbellsSaved: 3} }, "PCIe savings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := snap
			bad.QPs = slices.Clone(snap.QPs)
			tc.set(&bad.QPs[0])
			bad.Total.Counters = bad.QPs[0].Counters
			var got []string
			for _, err := range bad.Check() {
				got = append(got, err.Error())
			}
			if !strings.Contains(strings.Join(got, "\n"), tc.want) {
				t.Errorf("invariants %q, want one saying %q", got, tc.want)
			}
		})
	}
}
