package analyzer

import (
	"bytes"
	"slices"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The generic model explains an ENOMEM of a provider sqscope has no model
// of by the first cause the QP's caps show, marks it inferred, says why
// when none fits, and predicts nothing from the WRs outstanding.
func TestGenericModel(t *testing.T) {
	const qpn = 1
	inlineWR := func(s *streamtest.Stream, bytes uint32) []trace.WR {
		return s.WRs(qpn, 1, ibv.WRSend, ibv.SendInline|ibv.SendSignaled, 1, bytes, 0)
	}
	tests := []struct {
		name     string
		build    func(s *streamtest.Stream)
		diags    []string
		basis    string // of the first diagnosis
		counters Counters
		text     []string // in the analyzer's words: its diagnoses, its provider notes
		notText  []string
	}{
		{"inline too big", func(s *streamtest.Stream) {
			s.CreateOn(qpn, streamtest.RCCaps(64, 64, 1), streamtest.OtherLib)
			s.Post(qpn, inlineWR(s, 100), ibv.ENOMEM, 0)
		}, []string{"inline_too_big"}, CauseInferred, Counters{ENOMEMInline: 1, ENOMEM: 1},
			[]string{"more than the QP's max_inline_data 64; cause INFERRED FROM CAPS"}, nil},
		{"too many SGEs", func(s *streamtest.Stream) {
			s.CreateOn(qpn, streamtest.RCCaps(64, 64, 2), streamtest.OtherLib)
			s.Post(qpn, s.WRs(qpn, 1, ibv.WRSend, ibv.SendSignaled, 3, 96, 0), ibv.ENOMEM, 0)
		}, []string{"too_many_sge"}, CauseInferred, Counters{ENOMEMSGE: 1, ENOMEM: 1},
			[]string{"has 3 SGEs, more than the QP's max_send_sge 2; cause INFERRED FROM CAPS"}, nil},
		{"the SQ full first, as a provider checks it", func(s *streamtest.Stream) {
			// both the room and the SGEs refuse the WR: the room is checked first
			s.CreateOn(qpn, streamtest.RCCaps(8, 64, 1), streamtest.OtherLib)
			s.Send(qpn, 8, 0, 0)
			s.Post(qpn, s.WRs(qpn, 1, ibv.WRSend, 0, 2, 64, 0), ibv.ENOMEM, 0)
		}, []string{"sq_overflow_inferred"}, CauseInferred, Counters{ENOMEMSQFull: 1, ENOMEM: 1},
			[]string{"8 WRs outstanding (posted, completion not polled), at or over the max_send_wr 8", "none of the 8 WRs posted was signaled"}, nil},
		{"not in RTS", func(s *streamtest.Stream) {
			s.CreateOn(qpn, streamtest.RCCaps(64, 64, 1), streamtest.OtherLib)
			s.Modify(qpn, ibv.QPSInit, 0)
			s.Send(qpn, 0, 0, 0)
			s.Post(qpn, s.WRs(qpn, 1, ibv.WRSend, ibv.SendSignaled, 1, 32, 0), ibv.ENOMEM, 0)
		}, []string{"post_qp_not_rts"}, CauseInferred, Counters{NotRTS: 1, ENOMEM: 1},
			[]string{"QP not in RTS (state INIT): ibv_post_send returned errno 12 for WR 0", "cause INFERRED FROM CAPS"}, []string{"mlx5"}},
		{"caps unknown: a QP found in memory", func(s *streamtest.Stream) {
			s.MemQP(qpn, ibv.QPSRTS)
			s.Send(qpn, 4, 0, 4)
			s.Post(qpn, s.WRs(qpn, 1, ibv.WRSend, ibv.SendSignaled, 1, 32, 0), ibv.ENOMEM, 0)
		}, []string{"enomem_cause_unknown"}, "", Counters{ENOMEMUnknown: 1, ENOMEM: 1},
			[]string{"caps are unknown (it was created before the trace began)"}, []string{"INFERRED"}},
		{"no cap explains it", func(s *streamtest.Stream) {
			s.CreateOn(qpn, streamtest.RCCaps(64, 64, 1), streamtest.OtherLib)
			s.ToRTS(qpn)
			s.Send(qpn, 4, 0, 4)
			s.Post(qpn, s.WRs(qpn, 1, ibv.WRSend, ibv.SendSignaled, 1, 32, 0), ibv.ENOMEM, 0)
		}, []string{"enomem_cause_unknown"}, "", Counters{ENOMEMUnknown: 1, ENOMEM: 1},
			[]string{"the QP's caps explain none of it (WR 0 of the list: 4 WRs outstanding, below max_send_wr 64; 1 SGEs, within max_send_sge 1)"}, nil},
		{"healthy: a long unsignaled run predicts nothing", func(s *streamtest.Stream) {
			// the mlx5 model would predict an overflow here; the generic
			// model does not know when a slot frees
			s.CreateOn(qpn, streamtest.RCCaps(64, 64, 1), streamtest.OtherLib)
			s.Send(qpn, 63, 0, 0)
		}, nil, "", Counters{}, []string{"an ENOMEM's cause is INFERRED FROM CAPS"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.build(s)
			snap, q := oneQP(t, s)
			if q.Provider != "unknown" || q.Model != "" {
				t.Errorf("provider %q model %q, want unknown and none", q.Provider, q.Model)
			}
			if got := diagKinds(snap); !slices.Equal(got, tc.diags) {
				t.Errorf("diagnoses %v, want %v", got, tc.diags)
			}
			if len(snap.Diagnoses) > 0 && snap.Diagnoses[0].CauseBasis != tc.basis {
				t.Errorf("cause basis %q, want %q", snap.Diagnoses[0].CauseBasis, tc.basis)
			}
			got := Counters{ENOMEMSQFull: q.ENOMEMSQFull, ENOMEMInline: q.ENOMEMInline, ENOMEMSGE: q.ENOMEMSGE,
				ENOMEMUnknown: q.ENOMEMUnknown, NotRTS: q.NotRTS, ENOMEM: q.ENOMEM}
			if got != tc.counters {
				t.Errorf("counters %+v, want %+v", got, tc.counters)
			}
			checkWords(t, snap, tc.text, tc.notText)
			qj, err := q.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if want := q.CapsKnown; bytes.Contains(qj, []byte(`"cause_basis":"inferred from caps"`)) != want {
				t.Errorf("QP JSON with caps known %v: cause_basis present is not %v: %s", q.CapsKnown, want, qj)
			}
		})
	}
}

// Every provider is registered once, by a name and library prefixes of
// its own; the simulator and mlx5 share the mlx5 model, and a library no
// entry names gets the generic one.
func TestProviderRegistry(t *testing.T) {
	names, files := map[string]bool{}, map[string]bool{}
	for _, p := range providers {
		if p.Name == "" || p.Name == unknownName || names[p.Name] || p.Model == nil {
			t.Errorf("provider %+v: a name of its own and a model needed", p)
		}
		names[p.Name] = true
		for _, f := range p.Files {
			if files[f] {
				t.Errorf("library prefix %q registered twice", f)
			}
			files[f] = true
		}
	}
	for _, tc := range []struct{ via, lib, name, label string }{
		{"sqsim_create_qp", "", "sim", Mlx5Model},
		{"ibv_create_qp", streamtest.Mlx5Lib, "mlx5", Mlx5Model},
		{"ibv_create_qp", "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so", "mlx5", Mlx5Model},
		{"ibv_create_qp", streamtest.RxeLib, "rxe", ""},
		{"ibv_create_qp", streamtest.OtherLib, "unknown", ""},
		{"ibv_create_qp", "", "unknown", ""},
	} {
		p := providerOf(tc.via, tc.lib)
		if nameOf(p) != tc.name || modelOf(p).label() != tc.label {
			t.Errorf("providerOf(%q, %q) = %s with model %q, want %s with %q", tc.via, tc.lib, nameOf(p), modelOf(p).label(), tc.name, tc.label)
		}
	}
}
