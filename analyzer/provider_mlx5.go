package analyzer

import (
	"fmt"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The mlx5 model (rdma-core providers/mlx5, docs/design.md): what a post
// costs is its WQE geometry, doorbell and BlueFlame (sqmodel.go) and the
// PCIe transactions they make (pcie.go); a slot frees at the poll of the
// CQE that retires its WR and every earlier unsignaled one; a post checks
// each WR for a bad opcode (EINVAL), a full SQ, too many SGEs and inline
// data over the limit (ENOMEM), in that order, and outside RTS its SGE
// check refuses every WR. The simulated HCA (verbs/sim*.c) is built to it.
type mlx5Model struct{}

// Mlx5Model is the label of every figure and cause the mlx5 model gives.
const Mlx5Model = "mlx5 model"

func init() {
	registerProvider(&Provider{Name: "mlx5", Files: []string{"libmlx5"}, Model: mlx5Model{}})
	registerProvider(&Provider{Name: simName, Model: mlx5Model{}})
}

func (mlx5Model) label() string                           { return Mlx5Model }
func (mlx5Model) slotFree() SlotRule                      { return SlotFreedByCQE }
func (mlx5Model) causeBasis() string                      { return "" }
func (mlx5Model) notGiven() map[string]bool               { return nil }
func (mlx5Model) overflow(a *Analyzer, q *sq, now uint64) { a.diagnoseMlx5Overflow(q, now) }

// siteOverflow: mlx5's cause of a full queue (no signaled WR outstanding,
// or completions not polled) needs the queue's history, which a site does
// not see; an escalation window traces it.
func (mlx5Model) siteOverflow(*Analyzer, *sq, *trace.PostFail) bool { return false }
func (mlx5Model) unexplained(*Analyzer, *sq, *trace.Post, int)      {}

// refused: mlx5's checks that the WR and the QP decide (sentinel.go).
func (mlx5Model) refused(q *sq, e *trace.PostFail) errCause { return refusedByChecks(q, e) }

// cause classifies a failed post at WR index i of the list, by mlx5's
// order of checks.
func (mlx5Model) cause(q *sq, p *trace.Post, i int) errCause {
	if q.notRTS(p) { // mlx5's SGE check outside RTS
		return causeNotRTS
	}
	if p.Ret == ibv.EINVAL {
		if p.API == trace.APIWR { // the batch's first invalid opcode
			for j := i; j < len(p.WRs); j++ {
				if !opcodeValid(q.typ, p.WRs[j].Opcode) {
					q.failWR = j
					break
				}
			}
		}
		return causeEINVAL
	}
	if p.Ret != ibv.ENOMEM {
		return causeOther
	}
	if i >= len(p.WRs) {
		// the failing WR is past the tracer's bound
		if q.capsKnown && q.outstanding()+uint64(i) >= uint64(q.caps.MaxSendWR) {
			return causeSQFull
		}
		return causeUnknownENOMEM
	}
	w := &p.WRs[i]
	if q.capsKnown {
		if p.API == trace.APIWR {
			// wr API: the batch fails as a whole at its first WR that
			// finds the SQ full (when it is begun) or whose data does
			// not fit (when it is set): not necessarily the first WR
			for j := i; j < len(p.WRs); j++ {
				w := &p.WRs[j]
				q.failWR = j
				switch {
				case q.outstanding()+uint64(j) >= uint64(q.caps.MaxSendWR):
					return causeSQFull
				case w.Flags&ibv.SendInline != 0 && w.Bytes > q.caps.MaxInlineData:
					return causeInline
				case w.NumSGE > q.caps.MaxSendSGE:
					return causeSGE
				}
			}
			q.failWR = i
			return roomLeft(q)
		}
		if q.outstanding()+uint64(i) >= uint64(q.caps.MaxSendWR) {
			return causeSQFull
		}
		if w.NumSGE > q.caps.MaxSendSGE {
			return causeSGE
		}
		if w.Flags&ibv.SendInline != 0 && w.Bytes > q.caps.MaxInlineData {
			return causeInline
		}
		return roomLeft(q)
	}
	// caps unknown (attached late): the SQ being full is the only cause
	// that depends on history; infer the depth from it.
	q.caps.MaxSendWR = uint32(q.outstanding() + uint64(i))
	q.sendCapsInferred = true
	return causeSQFull
}

// roomLeft is the cause of an ENOMEM whose WRs are within the caps:
// where the WRs outstanding are a lower bound (attached late, or a
// sentinel's escalation window not yet re-synchronised), the queue's room
// is the only check left; else nothing explains it.
func roomLeft(q *sq) errCause {
	if q.lowerBound() {
		return causeSQFull
	}
	return causeUnknownENOMEM
}

// diagnoseMlx5Overflow finds why the SQ was full, from the state the
// failing call left: the WRs outstanding can only be retired by a CQE of
// a signaled WR among them, and that CQE only by a poll of the send CQ
// after it was posted.
func (a *Analyzer) diagnoseMlx5Overflow(q *sq, now uint64) {
	out, d := q.outstanding(), q.depth()
	sigOut := q.sigOutstanding()
	if sigOut == 0 {
		if q.signaledNow() == 0 {
			a.record(q, DiagOverflowNeverSignaled, now, evidence{out, d, max(q.c.WRs, q.head)})
			return
		}
		a.record(q, DiagOverflowUnsignaledRun, now, evidence{out, d, q.curRun, q.typicalEvidence(), q.signaledNow()})
		return
	}
	oldest, _ := q.sigOldest()
	if oldest.pollsUnknown {
		// counters mode, the CQ's totals not flushed since the oldest
		// signaled WR was posted: whether it was polled is not known
		a.record(q, DiagOverflowInferred, now, evidence{out, d, sigOut, max(q.c.WRs, q.head), q.signaledNow(), q.curRun})
		return
	}
	var postRate uint64
	if now > q.firstPost {
		postRate = q.c.WRs * 1e9 / (now - q.firstPost)
	}
	cs := q.cq
	if cs == nil || cs.polls == oldest.polls || cs.polls == 0 {
		lastPoll, polls := noValue, uint64(0)
		if cs != nil && cs.polls > 0 {
			lastPoll, polls = cs.lastNS, cs.polls
		}
		a.record(q, DiagOverflowCQNotPolled, now, evidence{out, d, sigOut, oldest.ns, q.sendCQ, lastPoll, polls})
		return
	}
	if since := cs.polls - oldest.polls; cs.empty-oldest.empty == since {
		// every poll since came back empty: the CQE was not there yet
		a.record(q, DiagOverflowCompletionsSlow, now, evidence{out, d, q.sendCQ, oldest.ns, since, postRate})
		return
	}
	var perPoll, pollRate uint64
	perPoll = (q.c.WRs + cs.polls/2) / cs.polls
	if cs.lastNS > cs.firstNS {
		pollRate = cs.polls * 1e9 / (cs.lastNS - cs.firstNS)
	}
	a.record(q, DiagOverflowPollsTooRare, now, evidence{out, d, q.sendCQ, q.c.WRs, cs.polls, perPoll, postRate, pollRate})
}

// notes are the HCA figures and savings of the mlx5 model: those of every
// call in events mode, the counted ones in counters mode.
func (mlx5Model) notes(q *QP) []string {
	p := &q.PCIe
	if q.CountersOnly {
		return []string{
			fmt.Sprintf("HCA: doorbells %d, DMA reads: payload %d; CQE writes %d", q.Doorbells, q.DMAReadsPayload, q.CQEWrites),
			fmt.Sprintf("saved vs one-WR-per-call, all signaled: doorbells %d, CQE writes %d (unsignaled)", p.DoorbellsSaved, p.CQEWritesSaved),
		}
	}
	hca := fmt.Sprintf("HCA (%s): doorbells %d (BlueFlame %d), WQEBBs %d, DMA reads: WQE %d, payload %d; CQE writes %d",
		q.Model, q.Doorbells, q.BFWrites, q.WQEBBs, q.DMAReadsWQE, q.DMAReadsPayload, q.CQEWrites)
	if q.DMAWritesResponse > 0 {
		hca += fmt.Sprintf("; DMA writes of READ/atomic responses %d (%d B)", q.DMAWritesResponse, q.DMABytesResponse)
	}
	notes := []string{hca, fmt.Sprintf("saved vs one-WR-per-call, not inline, all signaled: doorbells %d, WQE fetches %d (batching) + %d (BlueFlame), payload reads %d (inline), CQE writes %d (unsignaled); PCIe %.1f%% of transactions, ~%.1f%% of bytes",
		p.DoorbellsSaved, p.WQEFetchBatching, p.WQEFetchBF, p.PayloadReadsSaved, p.CQEWritesSaved, p.TransactionsPct, p.BytesPct)}
	if q.DMAWritesResponse > 0 {
		notes = append(notes, "  READ and atomic responses are written in the baseline too: no payload to inline, nothing the posting side saves")
	}
	return notes
}
