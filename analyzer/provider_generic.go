package analyzer

import (
	"fmt"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The generic model is every provider's that has no model of its own
// (bnxt_re, irdma, efa, hns, erdma, mana, ...): it knows the caps the QP
// reported at its create (trace.QPCreate field Caps: max_send_wr,
// max_send_sge, max_inline_data) and what the application did, nothing of
// the provider's code. A post it refused with ENOMEM is explained by the
// first of these the caps show, in the order a provider checks them:
//   - the WRs outstanding (posted, completion not polled) at max_send_wr:
//     SQ full. Every provider frees a slot no later than the poll of the
//     completion that retires it, so fewer outstanding means room; as many
//     or more is consistent with a full queue, not proof of one;
//   - inline data over max_inline_data: inline too big;
//   - more SGEs than max_send_sge: too many SGEs;
//   - a QP whose modifies show its send queue not in RTS: not in RTS
//     (also for an EINVAL whose WR's opcode the QP type takes).
//
// Each such cause is marked inferred from caps (QP.CauseBasis,
// Diagnosis.CauseBasis, and the words of the text). When the caps are
// unknown (a QP found in memory) or none of them fits, it says the cause
// is unknown and why (enomem_cause_unknown).
//
// What it leaves out, and why: when a slot frees is not known (it may be
// at the poll of a CQE, as on mlx5, or when the WR executes, as on rxe),
// so the WRs counted outstanding are no occupancy. No prediction (an
// unsignaled run near the depth, occupancy trending to full), no
// over-the-depth check of calls_not_traced, no retiring of WRs past the
// depth, no depth inferred from an SQ-full error and no overflow cause
// from the signaling and polling pattern (those rest on mlx5's rule that
// only a CQE frees a slot): on a provider that frees slots as WRs execute
// they would warn a healthy application. Nor any figure of what a post
// costs (doorbells rung by MMIO, BlueFlame, WQE blocks, DMA, PCIe): they
// are the hardware's.
type genericModel struct{}

func (genericModel) label() string             { return "" }
func (genericModel) slotFree() SlotRule        { return SlotFreeUnknown }
func (genericModel) causeBasis() string        { return CauseInferred }
func (genericModel) notGiven() map[string]bool { return genericNotGiven }

var genericNotGiven = union(costCounters, keySet("pcie"))

// refused infers a refusal's cause as mlx5's checks would give it, from
// the caps (sentinel.go).
func (genericModel) refused(q *sq, e *trace.PostFail) errCause { return refusedByChecks(q, e) }

// cause infers the cause of a failed post from the QP's caps, and an
// EINVAL of a valid opcode from a QP known not to be in RTS.
func (genericModel) cause(q *sq, p *trace.Post, i int) errCause {
	notRTS := q.sqOpenKnown && !q.sqOpen
	switch {
	case p.Ret == ibv.EINVAL:
		if i < len(p.WRs) && !opcodeValid(q.typ, p.WRs[i].Opcode) || !notRTS {
			return causeEINVAL
		}
		return causeNotRTS
	case p.Ret != ibv.ENOMEM:
		return causeOther
	case !q.capsKnown:
		return causeUnknownENOMEM
	}
	last := i // ibv_post_send names the WR it failed at (bad_wr)
	if p.API == trace.APIWR {
		// a wr batch fails as a whole: the first WR the caps refuse
		last = len(p.WRs) - 1
	}
	for j := i; j <= max(last, i); j++ {
		q.failWR = j
		if q.outstanding()+uint64(j) >= uint64(q.caps.MaxSendWR) {
			return causeSQFull
		}
		if j >= len(p.WRs) { // past the tracer's list bound: shape unknown
			break
		}
		w := &p.WRs[j]
		switch {
		case w.Flags&ibv.SendInline != 0 && w.Bytes > q.caps.MaxInlineData:
			return causeInline
		case w.NumSGE > q.caps.MaxSendSGE:
			return causeSGE
		}
	}
	q.failWR = i
	if notRTS {
		return causeNotRTS
	}
	return causeUnknownENOMEM
}

// overflow says the SQ was full, by the caps, and what the application's
// side shows: which WRs were left to retire.
// siteOverflow: the generic model's cause of a full queue needs the
// signaled WRs outstanding, which a site does not see.
func (genericModel) siteOverflow(*Analyzer, *sq, *trace.PostFail) bool { return false }

func (genericModel) overflow(a *Analyzer, q *sq, now uint64) {
	a.recordAs(q, DiagOverflowInferred, now, evidence{q.outstanding(), q.depth(), q.sigOutstanding(),
		q.c.WRs, q.c.Signaled, q.curRun}, true)
}

// unexplained says why an ENOMEM has no cause: the caps are unknown, or
// none of them explains it.
func (genericModel) unexplained(a *Analyzer, q *sq, p *trace.Post, i int) {
	sge, inl := noValue, noValue
	if i < len(p.WRs) {
		w := &p.WRs[i]
		sge, inl = uint64(w.NumSGE), 0
		if w.Flags&ibv.SendInline != 0 {
			inl = uint64(w.Bytes)
		}
	}
	known := uint64(0)
	if q.capsKnown {
		known = 1
	}
	a.record(q, DiagENOMEMUnexplained, p.TimeNS, evidence{uint64(i), q.outstanding(), q.depth(), sge,
		uint64(q.caps.MaxSendSGE), inl, uint64(q.caps.MaxInlineData), known})
}

// notes say what the generic model gives and what it cannot know.
func (genericModel) notes(q *QP) []string {
	if q.PostCalls == 0 { // a QP that only receives: nothing of its provider to say
		return nil
	}
	lib := ""
	if q.ProviderLib != "" {
		lib = " (post_send in " + q.ProviderLib + ")"
	}
	var notes []string
	if q.CapsKnown {
		notes = append(notes, fmt.Sprintf("provider %s%s: the application's side and the QP's caps only; no HCA model applies, so no doorbell, BlueFlame, WQE or PCIe figures; an ENOMEM's cause is INFERRED FROM CAPS (SQ full at max_send_wr outstanding, inline data over max_inline_data, SGEs over max_send_sge, a QP not in RTS), not from the provider's own checks, and when a slot frees is not known, so no overflow is predicted", q.Provider, lib))
	} else {
		notes = append(notes, fmt.Sprintf("provider %s%s: the application's side only; no HCA model applies, so no doorbell, BlueFlame, WQE or PCIe figures and no ENOMEM cause", q.Provider, lib))
	}
	if d := uint64(q.MaxSendWR); d > 0 && q.PeakOutstanding > d {
		notes = append(notes, fmt.Sprintf("%d WRs outstanding at the peak, more than the max_send_wr %d the QP reports: the provider holds more than it reports, or frees slots before their completions are polled", q.PeakOutstanding, d))
	}
	return notes
}

// inferredNote is what a cause inferred from caps adds to its diagnosis.
const inferredNote = "; cause INFERRED FROM CAPS (the QP's reported caps, not the provider's own checks, which sqscope does not model)"

// exportGeneric writes the message and fix of the generic model's
// diagnoses.
func exportGeneric(r *diagRec, d *Diagnosis) {
	e := &r.ev
	switch r.kind {
	case DiagOverflowInferred:
		var held string
		switch {
		case e[4] == 0:
			held = fmt.Sprintf("none of the %d WRs posted was signaled, so no completion retires them", e[3])
		case e[2] == 0:
			held = fmt.Sprintf("the last %d WRs posted carried no IBV_SEND_SIGNALED, so no completion retires them", e[5])
		default:
			held = fmt.Sprintf("%d signaled WRs among them have completions not yet polled", e[2])
		}
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM): %d WRs outstanding (posted, completion not polled), at or over the max_send_wr %d the QP reports; %s",
			e[0], e[1], held)
		d.Fix = fmt.Sprintf("Signal at least one WR in every %d (half of max_send_wr) and poll the send CQ so completions keep up with posting, or create the QP with a larger max_send_wr.", half(e[1]))
	case DiagENOMEMUnexplained:
		if e[7] == 0 {
			d.Message = "ENOMEM, cause unknown: sqscope has no model of this provider and the QP's caps are unknown (it was created before the trace began), so no cause can be inferred from them"
			d.Fix = "Trace the application from its start (-c CMD or -- CMD ARGS) so that the QP's create and the caps it reports are seen."
			return
		}
		shape := "its SGEs and inline data past the tracer's list bound"
		if e[3] != noValue {
			shape = fmt.Sprintf("%d SGEs, within max_send_sge %d", e[3], e[4])
			if e[5] > 0 {
				shape += fmt.Sprintf("; %d bytes inline, within max_inline_data %d", e[5], e[6])
			}
		}
		d.Message = fmt.Sprintf("ENOMEM, cause unknown: the QP's caps explain none of it (WR %d of the list: %d WRs outstanding, below max_send_wr %d; %s) and its send queue is in RTS or its state unknown: the provider refused it for a reason of its own",
			e[0], e[1], e[2], shape)
		d.Fix = "Look at the provider's own limits and debug output for what it ran out of; sqscope has no model of its checks."
	}
}

// exportNotRTSInferred writes a not-in-RTS diagnosis inferred from caps:
// the generic model knows that the QP's state refuses posts, not which
// check of the provider's refused it.
func exportNotRTSInferred(r *diagRec, d *Diagnosis) {
	e := &r.ev
	state := "unknown"
	if e[0] != noValue {
		state = ibv.QPStateName(int32(e[0]))
	}
	call := "ibv_post_send"
	if trace.API(e[2]) == trace.APIWR {
		call = "ibv_wr_complete"
	}
	d.Message = fmt.Sprintf("QP not in RTS (state %s): %s returned errno %d for WR %d of the list, which the QP's caps do not explain; a QP whose send queue has not reached RTS takes no send (%d posts refused)",
		state, call, e[1], e[3], e[6])
	d.Fix = "Move the QP through INIT and RTR to RTS with ibv_modify_qp before posting sends (wait for the connection to be established), and move it back to RTS after a reset."
}
