package analyzer

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Polls of a CQ: each completion retires its QP's WRs (sqmodel.go), a
// receive completion goes to the receive side (recv.go), an extended
// poll's to the QP that has its wr_id outstanding (excq.go); empty polls
// are counted on the CQ.

// onPoll applies one poll of a CQ and the completions it returned.
func (a *Analyzer) onPoll(e *trace.Poll) {
	c := a.cq(e.PID, e.CQ)
	c.notePolls(1+e.EmptyBefore, e.TimeNS)
	c.empty += e.EmptyBefore
	if e.Ret > 0 {
		c.cqes += uint64(e.Ret)
		c.pollCut(e)
		a.pastBoundRecv(c, e, e.TimeNS)
	} else if e.Ret == 0 {
		c.empty++
	}
	if e.Ret == 0 || e.EmptyBefore > 0 {
		a.cqEmpty(c, e.TimeNS)
	}
	var last *sq
	// a poll returns Ret completions: WCs past them (a damaged
	// record) are none
	for i := range min(len(e.WCs), max(int(e.Ret), 0)) {
		wc := &e.WCs[i]
		var q *sq
		if e.Ex {
			// no QP number or opcode: found by the wr_id
			if q = a.exWCQP(c, wc); q == nil {
				continue
			}
		} else {
			if ibv.IsRecvWC(wc.Opcode) {
				a.recvWC(e.PID, c, wc, e.TimeNS)
				continue
			}
			q = a.wcQP(e.PID, wc.QPNum, e.TimeNS)
		}
		a.onSendWC(q, c, e, wc)
		if last != nil && last != q {
			a.checkTrend(last, e.TimeNS)
		}
		last = q
	}
	if last != nil {
		a.checkTrend(last, e.TimeNS)
	}
}

// onSendWC applies a send completion of q polled from CQ c.
func (a *Analyzer) onSendWC(q *sq, c *cqState, e *trace.Poll, wc *trace.WC) {
	if q.sendCQ == 0 {
		q.sendCQ, q.cq = e.CQ, c // attached late: learn the send CQ from its CQEs
		a.qpEpoch++
	}
	q.noteFound(FoundCompletion)
	skipped := q.skippedCQEs
	q.complete(wc, e.TimeNS)
	if n := q.skippedCQEs - skipped; n > 0 {
		a.cqSkipped(q, c, n, e.TimeNS) // diag_state.go
	}
	a.notePending(q, e.TimeNS)
	if wc.Status == ibv.WCRNRRetryExcErr {
		a.rnrExceeded(q, e.TimeNS)
	} else if wc.Status == 0 {
		q.starved = false
	}
	if q.c.UnmatchedCQEs != q.notTracedNoted[0] {
		a.checkNotTraced(q, e.TimeNS)
	}
	q.lastPoll = e.TimeNS
	q.lastNS = max(q.lastNS, e.TimeNS)
	q.hist.note(e.TimeNS, q.outstanding(), 0, 1)
}

// onEmptyPolls counts polls of a CQ that returned nothing, reported
// together.
func (a *Analyzer) onEmptyPolls(e *trace.EmptyPolls) {
	c := a.cqOfGen(e.PID, e.CQ, e.Gen)
	c.notePolls(e.Count, e.TimeNS)
	c.empty += e.Count
	a.cqEmpty(c, e.TimeNS)
}
