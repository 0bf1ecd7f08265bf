package analyzer

import (
	"slices"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// bnxtModel is a provider model in miniature, as a new provider's file
// would hold it: a bnxt_re-like provider whose post checks a WR's SGEs
// and inline data before the queue's room, and says so in the report.
// It borrows the generic model's overflow, figures and unexplained ENOMEM
// by embedding it, and gives its causes as its own checks (no basis).
type bnxtModel struct{ genericModel }

func (bnxtModel) causeBasis() string { return "" }

func (bnxtModel) cause(q *sq, p *trace.Post, i int) errCause {
	if p.Ret != ibv.ENOMEM || !q.capsKnown || i >= len(p.WRs) {
		return genericModel{}.cause(q, p, i)
	}
	w := &p.WRs[i]
	switch {
	case w.NumSGE > q.caps.MaxSendSGE:
		return causeSGE
	case w.Flags&ibv.SendInline != 0 && w.Bytes > q.caps.MaxInlineData:
		return causeInline
	case q.outstanding()+uint64(i) >= uint64(q.caps.MaxSendWR):
		return causeSQFull
	}
	return causeUnknownENOMEM
}

func (bnxtModel) notes(q *QP) []string {
	return []string{"provider " + q.Provider + " (example model): a WR's SGEs and inline data are checked before the queue's room"}
}

// Adding a provider is its file and its test: registered, it is found by
// its library, its causes come in its order, and its notes are the
// report's.
func TestProviderExample(t *testing.T) {
	bnxt := &Provider{Name: "bnxt_re", Files: []string{"libbnxt_re"}, Model: bnxtModel{}}
	registerProvider(bnxt)
	t.Cleanup(func() { providers = slices.DeleteFunc(providers, func(p *Provider) bool { return p == bnxt }) })

	const qpn = 3
	s := streamtest.New()
	s.CreateOn(qpn, streamtest.RCCaps(8, 64, 1), "/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so")
	s.ToRTS(qpn)
	s.Send(qpn, 8, 0, 0)
	// the queue is full and the WR has too many SGEs: the generic and
	// mlx5 models blame the room, this provider checks the SGEs first
	s.Post(qpn, s.WRs(qpn, 1, ibv.WRSend, ibv.SendSignaled, 2, 64, 0), ibv.ENOMEM, 0)
	snap, q := oneQP(t, s)
	if q.Provider != "bnxt_re" || q.Model != "" || q.CauseBasis != "" {
		t.Errorf("provider %q model %q basis %q, want bnxt_re with no HCA model and its own causes", q.Provider, q.Model, q.CauseBasis)
	}
	if q.ENOMEMSGE != 1 || q.ENOMEMSQFull != 0 {
		t.Errorf("ENOMEM too many SGEs %d, SQ full %d: want the SGE cause its order gives", q.ENOMEMSGE, q.ENOMEMSQFull)
	}
	if got := diagKinds(snap); !slices.Equal(got, []string{"too_many_sge"}) || snap.Diagnoses[0].CauseBasis != "" {
		t.Errorf("diagnoses %v (basis %q), want [too_many_sge] of its own checks", got, snap.Diagnoses[0].CauseBasis)
	}
	if q.Reported("bf_writes") || !q.Reported("enomem_sge") {
		t.Errorf("Reported: bf_writes %v, enomem_sge %v; want the generic figures it borrows", q.Reported("bf_writes"), q.Reported("enomem_sge"))
	}
	// its own checks: nothing marked inferred
	checkWords(t, snap, []string{"provider bnxt_re (example model)"}, []string{"INFERRED"})
}
