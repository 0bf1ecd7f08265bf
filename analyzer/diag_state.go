package analyzer

import (
	"fmt"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Diagnoses of a QP's state and of its send CQ's depth: a post to a QP not
// in RTS, and a CQ holding fewer entries than the signaled completions its
// QPs leave unpolled.

// qpStateTrack is what the control path said about a QP's state. sqOpen
// mirrors mlx5's sq.qp_state_max_gs (rdma-core v40, providers/mlx5
// set_qp_operational_state): -1 from create and from every move to RESET,
// max_gs from the move to RTS, unchanged by the other moves (a QP moved
// from RTS to ERR takes posts, which are flushed).
type qpStateTrack struct {
	state       int32 // the last state a successful modify (or the create) set
	stateKnown  bool
	sqOpen      bool
	sqOpenKnown bool
}

// stateCreated applies a QP's create: it starts in RESET. Whether its SQ
// is open is left unknown until a modify is seen, so that a trace whose
// ibv_modify_qp probe saw nothing never calls a QP closed.
func (q *sq) stateCreated() {
	q.qpStateTrack = qpStateTrack{state: ibv.QPSReset, stateKnown: true}
}

// stateModified applies an ibv_modify_qp that carried a state.
func (q *sq) stateModified(e *trace.QPModify) {
	if e.Ret != 0 || e.State < 0 {
		return
	}
	q.state, q.stateKnown = e.State, true
	switch e.State {
	case ibv.QPSReset, ibv.QPSInit, ibv.QPSRTR:
		// INIT and RTR are reached only from RESET (or INIT): the SQ
		// has not been in RTS since its last reset
		q.sqOpen, q.sqOpenKnown = false, true
	case ibv.QPSRTS:
		q.sqOpen, q.sqOpenKnown = true, true
	}
}

// notRTS reports whether a failed post is mlx5's refusal of a QP whose
// SQ is not in RTS: ENOMEM from ibv_post_send (its SGE check against -1;
// the opcode check, EINVAL, comes first and an SQ reset is empty), EINVAL
// from ibv_wr_complete (its batch rolled back).
func (q *sq) notRTS(p *trace.Post) bool {
	if !q.sqOpenKnown || q.sqOpen {
		return false
	}
	if p.API == trace.APIWR {
		return p.Ret == ibv.EINVAL
	}
	return p.Ret == ibv.ENOMEM
}

// recordNotRTS records a post refused because the QP is not in RTS.
func (a *Analyzer) recordNotRTS(q *sq, p *trace.Post, n int, inferred bool) {
	numSGE := noValue
	if n < len(p.WRs) {
		numSGE = uint64(p.WRs[n].NumSGE)
	}
	state := noValue
	if q.stateKnown {
		state = uint64(q.state)
	}
	a.recordAs(q, DiagQPNotRTS, p.TimeNS, evidence{state, uint64(p.Ret), uint64(p.API), uint64(n), numSGE,
		uint64(q.caps.MaxSendSGE), q.c.NotRTS}, inferred)
}

// cqPending counts, per CQ lifetime, the signaled WRs its QPs posted and
// have not seen retired: completions the CQ must hold until they are
// polled. riskSaid is cleared once the count falls below half the depth.
// over is the QP whose post first took the count past the depth, at
// overNS, with overPending completions pending and overCQEs returned by
// then; overrunSaid that the overrun was diagnosed (an overrun CQ stays in
// error).
type cqPending struct {
	cqMemPending // memsample.go
	sigPending   uint64
	riskSaid     bool
	over         *sq
	overNS       uint64
	overPending  uint64
	overCQEs     uint64
	overQPs      uint64 // the QPs reporting to it then (some may be gone when the overrun is said)
	overrunSaid  bool
	// dryNS: the first of the empty polls since the CQ returned its
	// dryCQEs-th completion, once an overrun may have happened (cqEmpty)
	dryNS, dryCQEs uint64
	// skipped: signaled completions of its QPs that never came, later
	// ones having come (cqSkipped); skippedSaid that it was diagnosed
	skipped     uint64
	skippedSaid bool
}

// qpPending is what a QP added to its send CQ's count.
type qpPending struct {
	pendCQ    *cqState
	pendNoted uint64
}

// notePending brings the QP's share of its send CQ's pending completions
// up to date after a post or a completion, and makes the prediction.
func (a *Analyzer) notePending(q *sq, now uint64) {
	if q.pendCQ != q.cq {
		if q.pendCQ != nil {
			q.pendCQ.sigPending -= min(q.pendNoted, q.pendCQ.sigPending)
		}
		q.pendCQ, q.pendNoted = q.cq, 0
	}
	c := q.cq
	if c == nil || q.countersOnly && !q.kernUsable() {
		return
	}
	moveShare(&c.sigPending, &q.pendNoted, q.sigOutstanding())
	d := uint64(c.cqe)
	if d == 0 {
		return // depth unknown: its create was not seen
	}
	risk := riskDue(c.sigPending, d, &c.riskSaid)
	if c.sigPending > d && c.over == nil {
		c.over, c.overNS, c.overPending, c.overCQEs = q, now, c.sigPending, c.cqes
		c.overQPs = a.cqQPs(c)
	}
	if risk {
		a.record(q, DiagCQOverrunRisk, now, evidence{c.sigPending, d, 100 * c.sigPending / d, c.addr, a.cqQPs(c), noValue})
	}
}

// moveShare replaces a QP's share *noted of a CQ's count *total with cur.
func moveShare(total, noted *uint64, cur uint64) {
	*total = *total - min(*noted, *total) + cur
	*noted = cur
}

// riskDue reports whether a CQ's count of completions pending calls for
// the risk to be said, and notes it in *said: once past the depth d, and
// again only after the count fell below half of it. An application that
// keeps its signaled WRs within the CQ (perftest's CQ of -t entries under
// -Q 1) is safe however full the CQ runs: only more pending than it
// holds is a risk.
func riskDue(pending, d uint64, said *bool) bool {
	if pending < half(d) {
		*said = false
	}
	if *said || pending <= d {
		return false
	}
	*said = true
	return true
}

// overrunDryNS is how long a CQ that may have overrun must stay dry,
// polled and returning nothing, for the overrun to be said: one that
// overran never returns a completion again, while one waiting on a slow
// HCA, a long message or retries does.
const overrunDryNS = 250_000_000

// cqEmpty notes polls of CQ c that came back empty. Once more signaled
// completions were pending than the CQ holds, a CQ that goes dry before
// returning them all, with some still pending, has lost them: it overran
// (the overrun itself happens in the HCA, out of the trace's sight). An
// overrun is a completion due on a full CQ, whose entries are all
// returned after it: so the CQ has returned at least its depth since the
// post that took the pending past it, and then stays dry (overrunDryNS).
// Fewer returned, or a completion after the dry spell began, and it was
// waiting on the HCA: no overrun.
func (a *Analyzer) cqEmpty(c *cqState, now uint64) {
	a.checkStarvedCQ(c, now)
	if c.overrunSaid || c.over == nil || c.cqe == 0 || c.sigPending == 0 ||
		c.cqes-c.overCQEs >= c.overPending || c.cqes-c.overCQEs < uint64(c.cqe) {
		return
	}
	if c.dryNS == 0 || c.dryCQEs != c.cqes || now < c.dryNS {
		c.dryNS, c.dryCQEs = now, c.cqes // dry from this poll on
		return
	}
	if now-c.dryNS < overrunDryNS {
		return
	}
	c.overrunSaid = true
	a.record(c.over, DiagCQOverrun, now, evidence{c.overPending, uint64(c.cqe), c.addr,
		c.cqes - c.overCQEs, c.overNS, c.overQPs, c.sigPending, noValue, noValue})
}

// cqSkipped notes n signaled WRs of q whose completions never came from
// CQ c, a later WR's having come: a provider that drops a completion due
// on a full CQ and goes on (rxe: the kernel drops it and raises
// IB_EVENT_CQ_ERR on the async event file; the QP stays in RTS) overran
// it, once more completions were pending than it holds. Not said where
// the trace may have missed the completions itself: a poll record cut
// (completions past its bound), a late QP not yet synced or synced by a
// guess (its wr_ids repeat).
func (a *Analyzer) cqSkipped(q *sq, c *cqState, n, now uint64) {
	c.skipped += n
	if c.skippedSaid || c.over == nil || c.cqe == 0 || c.pastBound > 0 || q.syncGuessed || q.lateUnsynced() {
		return
	}
	c.skippedSaid = true
	a.record(c.over, DiagCQOverrun, now, evidence{c.overPending, uint64(c.cqe), c.addr,
		c.cqes - c.overCQEs, c.overNS, c.overQPs, noValue, noValue, c.skipped})
}

// cqesLost is how many of the QP's signaled WRs never wrote a CQE: once
// its send CQ has overrun and gone dry, the ones still pending (the CQ is
// in error and takes none).
//
// So too a sender starved by an empty RQ and not completing since: its
// signaled WRs still outstanding wait on RNR retries and wrote no CQE.
func (q *sq) cqesLost() uint64 {
	if q.starved || (q.cq != nil && q.cq.overrunSaid) {
		return q.sigOutstanding()
	}
	return 0
}

// cqQPs counts the live QPs whose send CQ is c.
func (a *Analyzer) cqQPs(c *cqState) uint64 {
	var n uint64
	for _, q := range a.all {
		if q.cq == c && !q.destroyed {
			n++
		}
	}
	return n
}

// cqOverrunFix is the fix of a CQ overrun, however it was seen.
const cqOverrunFix = "Create the CQ with more entries than the signaled WRs its QPs can have outstanding together (their max_send_wr over their signal interval), or poll it before that many are pending; then destroy and recreate the QPs and the CQ."

// exportState writes the message and fix of this file's diagnoses.
func (r *diagRec) exportState(d *Diagnosis) {
	e := &r.ev
	switch r.kind {
	case DiagQPNotRTS:
		state := "unknown"
		if e[0] != noValue {
			state = ibv.QPStateName(int32(e[0]))
		}
		if trace.API(e[2]) == trace.APIWR {
			d.Message = fmt.Sprintf("QP not in RTS (state %s): ibv_wr_complete returned EINVAL and its batch was rolled back; mlx5 refuses every post to a QP whose send queue has not reached RTS (%d posts refused)",
				state, e[6])
		} else {
			sge := ""
			if e[4] != noValue {
				sge = fmt.Sprintf(" (%d SGEs, max_send_sge %d)", e[4], e[5])
			}
			d.Message = fmt.Sprintf("QP not in RTS (state %s): ibv_post_send returned ENOMEM for WR %d of the list; since rdma-core v40 mlx5 checks num_sge against -1 outside RTS, so every post fails its SGE check: this is not too many SGEs%s (%d posts refused)",
				state, e[3], sge, e[6])
		}
		d.Fix = "Move the QP through INIT and RTR to RTS with ibv_modify_qp before posting sends (wait for the connection to be established), and move it back to RTS after a reset."
	case DiagCQOverrunRisk:
		read := ""
		if e[5] != noValue {
			read = ", by the provider's own counts read in the process's memory"
		}
		d.Message = fmt.Sprintf("send CQ %#x has %d signaled completions pending (posted, not yet polled%s), more than its %d entries (%d%%; QPs reporting to it: %d): it overruns unless they are polled before all their WRs complete",
			e[3], e[0], read, e[1], e[2], e[4])
		d.Fix = fmt.Sprintf("Create the CQ with at least as many entries as signaled WRs its QPs can have outstanding together (their max_send_wr over their signal interval), or poll it before more than %d completions are pending.", e[1])
	case DiagCQOverrun:
		if e[7] != noValue {
			cq, of := "its send CQ", ""
			if e[2] != noValue {
				cq = fmt.Sprintf("its send CQ %#x", e[2])
			}
			if e[1] != noValue {
				of = fmt.Sprintf(" (%d entries; QPs reporting to it: %d)", e[1], e[5])
			}
			d.Message = fmt.Sprintf("send CQ overrun: the provider's own count, read from the process's memory, says %s%s overran (%d time(s)): a completion was due on the full CQ, so (on mlx5) it is in error, its QPs in the error state, and no further completion comes; no post failed, so no probe on the error paths saw it",
				cq, of, e[7])
			d.Fix = cqOverrunFix
			break
		}
		if e[8] != noValue {
			d.Message = fmt.Sprintf("send CQ overrun: CQ %#x holds %d entries but %d signaled completions were pending (QPs reporting to it: %d); %d signaled WRs' completions never came while later WRs' did (%d returned since): completions due on the full CQ were dropped and the QPs went on (rxe drops them and raises IB_EVENT_CQ_ERR on the async event file), so the application waits for completions that never come",
				e[2], e[1], e[0], e[5], e[8], e[3])
			d.Fix = "Create the CQ with more entries than the signaled WRs its QPs can have outstanding together (their max_send_wr over their signal interval), or poll it before that many are pending; count the completions of the WRs dropped as lost (read the async events to see IBV_EVENT_CQ_ERR)."
			break
		}
		d.Message = fmt.Sprintf("send CQ overrun: CQ %#x holds %d entries but %d signaled completions were pending (QPs reporting to it: %d); it returned %d of them and now comes back empty with %d still pending: the CQ overran, so (on mlx5) it is in error, its QPs in the error state, and no further completion comes",
			e[2], e[1], e[0], e[5], e[3], e[6])
		d.Fix = cqOverrunFix
	}
}

// onQPModify applies an ibv_modify_qp to its QP's state.
func (a *Analyzer) onQPModify(e *trace.QPModify) {
	q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
	q.noteFound(FoundModify)
	q.stateModified(e)
}
