package analyzer

import (
	"slices"
	"strings"

	"github.com/sqscope/sqscope/trace"
)

// The receive side: what each QP's receive queue and each SRQ was given
// (ibv_post_recv, ibv_post_srq_recv) and what receive completions took
// from it. A receive completion names its QP (the poll's ibv_wc), so a
// QP's receives are consumed by the receive CQEs polled for it, from
// whichever CQ; an extended poll's completion has no opcode, so a receive
// completion there is counted on its CQ only (excq.go).

// rqState is one QP lifetime's receive queue; the receives posted are
// Counters.PostRecvs, those consumed Counters.RecvCQEs.
type rqState struct {
	calls, failedCalls uint64
	errors             uint64 // receive CQEs with an error status
	peak               uint64 // receives outstanding after a post_recv, at most
	// counted: calls, failedCalls and PostRecvs are the kernel's totals
	// (counters mode), which sees no receive completion
	counted bool
	recvCQ  uint64
	rcq     *cqState // of recvCQ; nil while it is unknown
}

// rqOutstanding is the receives posted minus those consumed, and whether
// that is the RQ's occupancy: only when the QP's create was seen (no
// receives posted before tracing) and the completions do not outnumber
// the posts (a QP of an SRQ is given completions of receives posted to
// the SRQ).
func (q *sq) rqOutstanding() (uint64, bool) {
	if !q.capsKnown || q.c.RecvCQEs > q.c.PostRecvs {
		return 0, false
	}
	return q.c.PostRecvs - q.c.RecvCQEs, true
}

// RecvQueue is a QP's receive queue in a snapshot; nil when receives are
// not traced, and in counters mode without what completions tell
// (consumed, outstanding): Snapshot.ReceivesNotTraced says why.
type RecvQueue struct {
	// RecvCQ is the QP's receive CQ, from its create or, attached late,
	// from its first receive completion; 0 (absent) when not known.
	RecvCQ    uint64 `json:"recv_cq,omitempty"`
	RecvCQGen uint64 `json:"recv_cq_gen"`
	// Depth is max_recv_wr as the QP reported it; absent when its create
	// was not seen, 0 for a QP without its own receive queue (of an SRQ).
	Depth       *uint32 `json:"max_recv_wr,omitempty"`
	PostCalls   uint64  `json:"post_calls"`
	FailedCalls uint64  `json:"failed_calls"`
	Posted      uint64  `json:"posted"`
	// Consumed counts the receive completions polled for the QP
	// (ibv_poll_cq), CQEErrors those with an error status (flushes).
	Consumed  uint64 `json:"consumed"`
	CQEErrors uint64 `json:"cqe_errors"`
	// CQEsPastBound counts the completions its receive CQ returned past
	// what a poll record holds (CQ.CQEsPastBound), not attributed to a
	// QP: some may be this QP's receives, so Consumed is then a lower
	// bound (ConsumedLowerBound), Outstanding and Peak upper bounds.
	CQEsPastBound      uint64 `json:"recv_cq_cqes_past_bound,omitempty"`
	ConsumedLowerBound bool   `json:"consumed_lower_bound,omitempty"`
	// Outstanding and Peak are the receives posted and not yet consumed,
	// now and at most after any post; absent when not known, with the
	// reason in OutstandingUnknown.
	Outstanding        *uint64 `json:"outstanding,omitempty"`
	Peak               *uint64 `json:"peak_outstanding,omitempty"`
	OutstandingUnknown string  `json:"outstanding_unknown,omitempty"`
	counted            bool    // no completions seen: counters mode, or no poll function traced
}

// CompletionsSeen reports whether the receive queue's figures hold what
// its completions tell (consumed, errors): not in counters mode, nor
// where no poll function is traced.
func (r RecvQueue) CompletionsSeen() bool { return !r.counted }

// SRQRecv is what was posted to one SRQ lifetime (events mode).
type SRQRecv struct {
	PostCalls   uint64 `json:"post_calls"`
	FailedCalls uint64 `json:"failed_calls"`
	Posted      uint64 `json:"posted"`
}

// Why receives are not in a snapshot, or not all of them.
const (
	whyRecvCounters = "counters mode counts the receives posted to each QP, not their completions (what is outstanding) nor the receives posted to SRQs (--mode events traces them)"
	whyRecvOld      = "receives are not in these kernel totals (recorded before sqscope counted them; --mode events traces them)"
	whyRecvCounted  = "counters mode sees no receive completions"
	whyRecvNoPoll   = "no poll function is traced, so no receive completion is seen"
	whyRecvNoCreate = "the QP was created before tracing: receives it had then are unknown"
	whyRecvSRQ      = "more receive completions than receives posted to it: its receives come from an SRQ, or were posted through calls not traced"
)

// recvTrace is what decides which receive figures a trace has: the
// kernel's totals (counters mode), with or without receives, and whether
// the probes of ibv_post_recv and ibv_post_srq_recv were placed.
type recvTrace struct {
	kernel, old            bool   // kernel totals seen; some without receives
	attached, srqAttached  bool   // a probe of the call was placed
	attachErr, srqAttachEr string // why one was not (the first reason)
	srqRecvs               uint64 // receive WRs posted to SRQs
}

// recvKnown is which receive figures the snapshot has, and why not the
// others ("" when it has them all).
type recvKnown struct {
	posts       bool // receives posted to QPs
	completions bool // receive completions (consumed, outstanding)
	srqs        bool // receives posted to SRQs
	why         string
}

func (a *Analyzer) recvKnown() recvKnown {
	t := &a.recv
	k := recvKnown{posts: true, completions: !t.kernel && !a.completionsNotTraced(), srqs: !t.kernel}
	var why []string
	switch {
	case t.old:
		k.posts = false
		why = append(why, whyRecvOld)
	case t.kernel:
		why = append(why, whyRecvCounters)
	}
	if !t.attached && t.attachErr != "" {
		k.posts = false
		why = append(why, "ibv_post_recv was not traced ("+t.attachErr+")")
	}
	if k.srqs && !t.srqAttached && t.srqAttachEr != "" {
		k.srqs = false
		why = append(why, "ibv_post_srq_recv was not traced ("+t.srqAttachEr+")")
	}
	k.why = strings.Join(why, "; ")
	return k
}

// recvAttach notes where a receive call's probe was placed, or why not.
func (a *Analyzer) recvAttach(e *trace.Attach) {
	t := &a.recv
	switch {
	case e.Func == "post_recv" && e.Err == "":
		t.attached = true
	case e.Func == "post_recv" && t.attachErr == "":
		t.attachErr = e.Err
	case e.Func == "post_srq_recv" && e.Err == "":
		t.srqAttached = true
	case e.Func == "post_srq_recv" && t.srqAttachEr == "":
		t.srqAttachEr = e.Err
	}
}

// countedRecvs takes the receives of a QP's kernel totals (counters
// mode; CQ totals mark it too).
func (a *Analyzer) countedRecvs(q *sq, e *trace.QPCounters) {
	a.recv.kernel = true
	if !e.RecvsCounted {
		a.recv.old = true
		return
	}
	r := &q.rq
	r.counted = true
	r.calls, r.failedCalls = e.RecvCalls, e.RecvFailed
	q.c.PostRecvs = e.Recvs
}

// qpRecvCreated takes the receive CQ of a QP's create.
func (a *Analyzer) qpRecvCreated(q *sq, e *trace.QPCreate) {
	q.rq.recvCQ, q.rq.rcq = e.RecvCQ, nil
	if e.RecvCQ != 0 {
		q.rq.rcq = a.cq(e.PID, e.RecvCQ)
	}
}

// postRecv applies an ibv_post_recv or ibv_post_srq_recv call.
func (a *Analyzer) postRecv(e *trace.PostRecv) {
	if a.recv.kernel {
		return // a recording of both modes: the kernel's totals hold them
	}
	if e.SRQ {
		a.recv.srqRecvs += uint64(e.Accepted)
		s := a.srqAt(e.PID, e.QP)
		s.recv.PostCalls++
		s.recv.Posted += uint64(e.Accepted)
		if e.Ret != 0 {
			s.recv.FailedCalls++
		}
		return
	}
	q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
	q.noteFound(FoundRecv)
	was := q.rqEmpty()
	q.c.PostRecvs += uint64(e.Accepted)
	a.noteRQ(q, was)
	r := &q.rq
	r.calls++
	if e.Ret != 0 {
		r.failedCalls++
	}
	if q.c.PostRecvs > q.c.RecvCQEs {
		r.peak = max(r.peak, q.c.PostRecvs-q.c.RecvCQEs)
	}
	q.lastNS = max(q.lastNS, e.TimeNS)
}

// recvWC applies a receive completion that ibv_poll_cq returned from c.
func (a *Analyzer) recvWC(pid uint32, c *cqState, wc *trace.WC, now uint64) {
	c.recvCQEs++
	a.noteRecvWC(pid, wc, now)
	q := a.wcQP(pid, wc.QPNum, now)
	r := &q.rq
	if r.recvCQ == 0 {
		r.recvCQ, r.rcq = c.addr, c // attached late: learn the receive CQ from its CQEs
		a.qpEpoch++                 // the CQ's users changed
	}
	if wc.Status != 0 {
		r.errors++
	}
}

// srqAt is the SRQ living at an address, one created before tracing
// when none is known there.
func (a *Analyzer) srqAt(pid uint32, addr uint64) *srqState {
	for i := len(a.srqs) - 1; i >= 0; i-- {
		if s := a.srqs[i]; s.PID == pid && s.SRQ.SRQ == addr && !s.Destroyed {
			return s
		}
	}
	s := &srqState{SRQ: SRQ{PID: pid, SRQ: addr}}
	a.srqs = append(a.srqs, s)
	return s
}

// recvSnapshot is a QP's receive queue in a snapshot, nil when receives
// are not traced.
func (a *Analyzer) recvSnapshot(q *sq) *RecvQueue {
	known := a.recvKnown()
	if !known.posts {
		return nil
	}
	r := &q.rq
	// one allocation for the queue and the figures it points at: a
	// snapshot of thousands of QPs makes one per QP
	m := &struct {
		RecvQueue
		depth     uint32
		out, peak uint64
	}{RecvQueue: RecvQueue{RecvCQ: r.recvCQ, PostCalls: r.calls, FailedCalls: r.failedCalls, Posted: q.c.PostRecvs,
		Consumed: q.c.RecvCQEs, CQEErrors: r.errors}}
	out := &m.RecvQueue
	if r.rcq != nil {
		out.RecvCQGen = r.rcq.gen
		if past := r.rcq.pastBound - r.rcq.pastRecv; known.completions && past > 0 {
			out.CQEsPastBound, out.ConsumedLowerBound = past, true
		}
	}
	if q.capsKnown {
		m.depth = q.caps.MaxRecvWR
		out.Depth = &m.depth
	}
	switch n, ok := q.rqOutstanding(); {
	case !known.completions:
		out.counted, out.Consumed, out.CQEErrors = true, 0, 0
		out.OutstandingUnknown = whyRecvCounted
		if !a.recv.kernel {
			out.OutstandingUnknown = whyRecvNoPoll
		}
	case ok:
		m.out, m.peak = n, max(r.peak, n)
		if out.ConsumedLowerBound && m.depth > 0 {
			// upper bounds: never more than the queue holds
			m.out, m.peak = min(m.out, uint64(m.depth)), min(m.peak, uint64(m.depth))
		}
		out.Outstanding, out.Peak = &m.out, &m.peak
	case !q.capsKnown:
		out.OutstandingUnknown = whyRecvNoCreate
	default:
		out.OutstandingUnknown = whyRecvSRQ
	}
	return out
}

// cqUsers fills in, for every CQ lifetime of the snapshot, the QPs whose
// send or receive CQ it is (cqs is in the order of a.allCQs).
func (a *Analyzer) cqUsers(cqs []CQ) {
	idx := make(map[*cqState]int, len(a.allCQs))
	for i, c := range a.allCQs {
		idx[c] = i
	}
	// the lists share one array, each given its room first: a snapshot
	// of thousands of CQs makes one allocation, not one per CQ
	sends, recvs := make([]int, len(cqs)), make([]int, len(cqs))
	total := 0
	for _, q := range a.all {
		if i, ok := idx[q.cq]; ok && q.cq != nil {
			sends[i]++
			total++
		}
		if i, ok := idx[q.rq.rcq]; ok && q.rq.rcq != nil {
			recvs[i]++
			total++
		}
	}
	room := make([]uint32, total)
	for i := range cqs {
		if n := sends[i]; n > 0 {
			cqs[i].SendQPs, room = room[:0:n], room[n:]
		}
		if n := recvs[i]; n > 0 {
			cqs[i].RecvQPs, room = room[:0:n], room[n:]
		}
	}
	for _, q := range a.all {
		if i, ok := idx[q.cq]; ok && q.cq != nil {
			cqs[i].SendQPs = append(cqs[i].SendQPs, q.key.qpNum)
		}
		if i, ok := idx[q.rq.rcq]; ok && q.rq.rcq != nil {
			cqs[i].RecvQPs = append(cqs[i].RecvQPs, q.key.qpNum)
		}
	}
	completions := a.recvKnown().completions
	for i := range cqs {
		slices.Sort(cqs[i].SendQPs)
		slices.Sort(cqs[i].RecvQPs)
		// an extended poll's completion has no opcode to tell a receive by
		if c := a.allCQs[i]; completions && !c.counted && !c.ex && c.exUnmatched == 0 {
			n := c.recvCQEs
			cqs[i].RecvCQEs = &n
		}
	}
}

// srqRecvsSnapshot is the receive WRs posted to every SRQ, nil when
// receives are not traced.
func (a *Analyzer) srqRecvsSnapshot() *uint64 {
	if !a.recvKnown().srqs {
		return nil
	}
	n := a.recv.srqRecvs
	return &n
}

// snapshotRecv fills in what a snapshot says of the receive side beyond
// its QPs', CQs' and SRQs' own figures.
func (a *Analyzer) snapshotRecv(s *Snapshot) {
	known := a.recvKnown()
	for i := range s.QPs {
		s.QPs[i].recvUntraced = !known.posts
	}
	s.UnknownQPPosts += a.countedUnknownPosts()
	s.SRQRecvs = a.srqRecvsSnapshot()
	s.Total.recvUntraced = !known.posts
	s.ReceivesNotTraced = known.why
}

// countedUnknownPosts is, in counters mode, the post calls on QPs whose
// create the trace did not see: the kernel's totals of those QPs.
func (a *Analyzer) countedUnknownPosts() uint64 {
	var n uint64
	for _, q := range a.all {
		if q.countersOnly && !q.capsKnown {
			n += q.c.PostCalls
		}
	}
	return n
}
