package analyzer

import (
	"fmt"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Receive-queue starvation: on RC a SEND (or a WRITE with immediate) takes
// a receive at the responder; when its RQ is empty the responder answers
// RNR NAK and the requester retries every min_rnr_timer, forever with
// rnr_retry 7, else until IBV_WC_RNR_RETRY_EXC_ERR (the QP then goes to
// error). The SENDs wait meanwhile, so the SQ fills. The trace sees both
// sides when the receiver is traced: its ibv_post_recv calls and its
// receive completions.

// qpRecvTrack is the receive side of a QP, and the receive-taking WRs it
// posted as a sender.
type qpRecvTrack struct {
	sendsPosted uint64 // WRs posted that take a receive at the responder
	rnrExc      uint64 // IBV_WC_RNR_RETRY_EXC_ERR completions
	// starved: diagnosed waiting on an empty RQ, and no completion since
	starved bool
}

// takesRecv reports whether opcode op takes a receive at the responder.
func takesRecv(op uint8) bool {
	switch op {
	case ibv.WRSend, ibv.WRSendWithImm, ibv.WRSendWithInv, ibv.WRRDMAWriteWithImm:
		return true
	}
	return false
}

// rqEmpty reports whether every receive the QP posted came back: its RQ
// holds none (a receive consumed but not yet polled still counts as held,
// so an empty RQ is certain, never guessed).
func (q *sq) rqEmpty() bool {
	return q.c.PostRecvs > 0 && q.c.RecvCQEs >= q.c.PostRecvs
}

// noteRecvWC applies a receive completion to its QP.
func (a *Analyzer) noteRecvWC(pid uint32, wc *trace.WC, now uint64) {
	q := a.wcQP(pid, wc.QPNum, now)
	was := q.rqEmpty()
	q.c.RecvCQEs++
	q.lastNS = max(q.lastNS, now)
	a.noteRQ(q, was)
}

// noteRQ keeps the count of empty RQs as q's changes from was.
func (a *Analyzer) noteRQ(q *sq, was bool) {
	switch now := q.rqEmpty(); {
	case now && !was:
		a.rqsEmpty++
	case was && !now:
		a.rqsEmpty--
	}
}

// starvedReceiver finds, among the traced receiving QPs of the sender's
// process, one whose RQ is empty; it returns it and how many of how many
// traced receivers are empty (the trace does not say which QP a SEND
// goes to).
func (a *Analyzer) starvedReceiver(q *sq) (r *sq, empty, traced uint64) {
	for _, x := range a.all {
		if x == q || x.key.pid != q.key.pid || x.destroyed || x.c.PostRecvs == 0 {
			continue
		}
		traced++
		if x.rqEmpty() {
			empty++
			if r == nil {
				r = x
			}
		}
	}
	return r, empty, traced
}

// checkStarved records the starvation on sender q when it has
// receive-taking WRs outstanding and a traced receiver's RQ is empty; it
// reports whether it did.
func (a *Analyzer) checkStarved(q *sq, now uint64) bool {
	if q.sendsPosted == 0 || q.outstanding() == 0 {
		return false
	}
	r, empty, traced := a.starvedReceiver(q)
	if r == nil {
		return false
	}
	depth := noValue
	if r.capsKnown && r.caps.MaxRecvWR > 0 {
		depth = uint64(r.caps.MaxRecvWR)
	}
	a.record(q, DiagRQStarved, now, evidence{q.outstanding(), q.depth(), uint64(r.key.qpNum), r.c.PostRecvs,
		r.c.RecvCQEs, depth, empty, traced})
	q.starved = true
	return true
}

// rnrExceeded notes an IBV_WC_RNR_RETRY_EXC_ERR completion on sender q.
func (a *Analyzer) rnrExceeded(q *sq, now uint64) {
	q.rnrExc++
	r, empty, traced := a.starvedReceiver(q)
	rn, posted, done := noValue, noValue, noValue
	if r != nil {
		rn, posted, done = uint64(r.key.qpNum), r.c.PostRecvs, r.c.RecvCQEs
	}
	a.record(q, DiagRNRRetryExceeded, now, evidence{q.rnrExc, rn, posted, done, empty, traced})
}

// checkStarvedCQ looks, on an empty poll of CQ c, for its senders stalled
// on a starved receiver.
func (a *Analyzer) checkStarvedCQ(c *cqState, now uint64) {
	if c.sigPending == 0 || a.rqsEmpty == 0 {
		return
	}
	for _, q := range a.all {
		if q.cq == c && !q.destroyed {
			a.checkStarved(q, now)
		}
	}
}

// exportRecv writes the message and fix of this file's diagnoses.
func (r *diagRec) exportRecv(d *Diagnosis) {
	e := &r.ev
	others := func(empty, traced uint64) string {
		if traced <= 1 {
			return ""
		}
		return fmt.Sprintf("; %d of the %d receiving QPs traced in the process have an empty RQ, and the trace does not say which one this QP sends to", empty, traced)
	}
	switch r.kind {
	case DiagRQStarved:
		depth := ""
		if e[5] != noValue {
			depth = fmt.Sprintf(" of its %d", e[5])
		}
		d.Message = fmt.Sprintf("receiver starved: %d of %d WRs outstanding on the SQ, its SENDs waiting for receives; receiving QP %#x has had every receive%s taken (%d posted, %d completed): its RQ is empty, so the responder answers RNR NAK and the SENDs are retried instead of completing%s",
			e[0], e[1], e[2], depth, e[3], e[4], others(e[6], e[7]))
		d.Fix = fmt.Sprintf("Post a new receive on QP %#x for every receive completion it reaps (keep its RQ full), or limit the SENDs in flight to the receives the peer has posted (credits).", e[2])
	case DiagRNRRetryExceeded:
		recv := "the receiver is not traced, so its RQ is not seen"
		if e[1] != noValue {
			recv = fmt.Sprintf("receiving QP %#x had every receive taken (%d posted, %d completed)%s", e[1], e[2], e[3], others(e[4], e[5]))
		}
		d.Message = fmt.Sprintf("RNR retries exhausted (IBV_WC_RNR_RETRY_EXC_ERR, %d completions): the responder had no receive posted for a SEND through every retry, so the QP went to the error state; %s",
			e[0], recv)
		d.Fix = "Keep receives posted ahead of the SENDs at the responder (a receive per expected SEND), and create the sender with rnr_retry 7 (retry forever) and the responder with a larger min_rnr_timer if the receiver is only slow."
	}
}
