package analyzer

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Object lifetimes. A QP, CQ or SRQ is one object from its create to its
// destroy (a CQ: until another CQ is created at its address). A new
// generation, a QP number used again after a destroy, or a CQ created at
// an address another CQ had, starts a new object with figures of its own:
// nothing one lifetime counted is added to another's. Events that name an
// object by number or address go to the one living there; counts that
// carry a generation go to that generation's object, even after its end.

// objKey is one object lifetime, by its generation (never 0).
type objKey struct {
	pid uint32
	gen uint64
}

// CQ is one completion queue lifetime in a snapshot: what its
// control-path calls said (depth, moderation, how it is polled) and its
// polls, every poll of it while it lived (an extended poll session is
// one); a QP's poll figures are its send CQ's.
type CQ struct {
	PID uint32 `json:"pid"`
	CQ  uint64 `json:"cq"`
	Gen uint64 `json:"gen"`
	// CQE is its depth, from its creation or last resize; 0 when the CQ
	// was created before the tracer attached.
	CQE uint32 `json:"cqe,omitempty"`
	// Extended: created with ibv_create_cq_ex, polled (also) with
	// ibv_start_poll..ibv_end_poll, whose completions carry no QP number:
	// each is matched to a QP of the CQ by its wr_id.
	Extended   bool   `json:"extended"`
	Polls      uint64 `json:"polls"`
	EmptyPolls uint64 `json:"empty_polls"`
	CQEs       uint64 `json:"cqes"`
	// UnmatchedExCQEs are extended-poll completions whose wr_id matched no
	// WR outstanding on a QP of this CQ: receive completions of a CQ
	// shared with a receive queue, or WRs posted through calls not traced.
	UnmatchedExCQEs uint64 `json:"unmatched_ex_cqes"`
	// CQEsPastBound counts the completions its polls returned past the
	// PollRecordWCs a poll record holds: in CQEs, but not attributed to
	// a QP nor told send from receive (RecvCQEs, and the counts of its
	// QPs' completions, are then lower bounds).
	CQEsPastBound uint64 `json:"cqes_past_bound,omitempty"`
	// CQEsPastBoundRecv: of them, those counted as receives of its only
	// receiving QP (no QP sends to it), in RecvCQEs and exact.
	CQEsPastBoundRecv uint64 `json:"cqes_past_bound_receives,omitempty"`
	PollRecordWCs     uint64 `json:"poll_record_wcs,omitempty"`
	Resizes           uint64 `json:"resizes"`
	ModCount          uint16 `json:"moderation_count"`
	ModPeriodUS       uint16 `json:"moderation_period_us"`
	// Replaced: another CQ was created at its address, which ended it.
	// Destroyed: its ibv_destroy_cq was seen, which ended it.
	Replaced    bool    `json:"replaced,omitempty"`
	Destroyed   bool    `json:"destroyed"`
	SpanNS      uint64  `json:"span_ns"`
	PollsPerSec float64 `json:"polls_per_s"`
	// SendQPs and RecvQPs are the QPs whose send or receive CQ it is
	// (recv.go); RecvCQEs the receive completions ibv_poll_cq returned
	// from it, absent where they are not told apart (counters mode, a CQ
	// polled with ibv_start_poll), a lower bound when CQEsPastBound.
	SendQPs  []uint32 `json:"send_qps,omitempty"`
	RecvQPs  []uint32 `json:"recv_qps,omitempty"`
	RecvCQEs *uint64  `json:"recv_cqes,omitempty"`
}

// SRQ is one shared receive queue lifetime in a snapshot.
type SRQ struct {
	PID       uint32 `json:"pid"`
	SRQ       uint64 `json:"srq"`
	Gen       uint64 `json:"gen"`
	MaxWR     uint32 `json:"max_wr"`
	Destroyed bool   `json:"destroyed"`
	// Recv is what was posted to it (recv.go); nil when receives are not
	// traced.
	Recv *SRQRecv `json:"recv,omitempty"`
}

type srqState struct {
	SRQ
	recv SRQRecv
}

// newQP starts a QP lifetime and makes it the latest of its number.
func (a *Analyzer) newQP(pid, num uint32, addr, gen, now uint64) *sq {
	k := qpKey{pid, num}
	q := &sq{key: k, qp: addr, gen: gen, firstNS: now, late: true, // until its create says otherwise
		countersOnly: a.opts.Mode == ModeCounters}
	a.fitHistories(q)
	q.edge = a.sentinel.between(pid)
	for i := range q.diags {
		q.diags[i] = -1
	}
	if old := a.qps[k]; old != nil {
		old.destroyed = true // a number names one live QP: the old one is gone
	}
	a.qps[k] = q
	a.qpCache[num%qpCacheLen] = q
	if gen != 0 {
		a.qpGens[objKey{pid, gen}] = q
	}
	a.all = append(a.all, q)
	a.qpEpoch++
	return q
}

// qp is the QP living under a number: posts, receives and modifies go to
// it. A number whose QP was destroyed starts a new lifetime.
func (a *Analyzer) qp(pid, num uint32, addr uint64, now uint64) *sq {
	q := a.lookupQP(qpKey{pid, num})
	if q == nil || q.destroyed {
		q = a.newQP(pid, num, addr, 0, now)
	}
	return q
}

// qpOfGen is the QP lifetime a generation names (the latest of the
// number when the generation is not known).
func (a *Analyzer) qpOfGen(pid, num uint32, addr, gen, now uint64) *sq {
	if gen == 0 {
		if q := a.qps[qpKey{pid, num}]; q != nil && (q.gen == 0 || (!q.destroyed && q.qp == addr)) {
			return q
		}
		return a.newQP(pid, num, addr, 0, now)
	}
	if q := a.qpGens[objKey{pid, gen}]; q != nil {
		return q
	}
	return a.newQP(pid, num, addr, gen, now)
}

// qpCreated applies a QP's create.
func (a *Analyzer) qpCreated(e *trace.QPCreate) *sq {
	var q *sq
	switch old := a.qps[qpKey{e.PID, e.QPNum}]; {
	case e.Gen != 0:
		q = a.qpGens[objKey{e.PID, e.Gen}] // its counts may have come first
		if q == nil && old != nil && !old.destroyed && old.gen == 0 && old.found == FoundMemory && old.qp == e.QP {
			// found in memory while its create was returning (the scan
			// saw the QP, the record of its create came after): the same
			// QP, not a second one
			q = old
			q.gen = e.Gen
			a.qpGens[objKey{e.PID, e.Gen}] = q
		}
		if q == nil {
			q = a.newQP(e.PID, e.QPNum, e.QP, e.Gen, e.TimeNS)
		}
	case old != nil && !old.destroyed:
		q = old // a recording without generations: the create again
	default:
		q = a.newQP(e.PID, e.QPNum, e.QP, 0, e.TimeNS)
	}
	q.destroyed = false
	return q
}

// qpDestroyed applies a QP's destroy.
func (a *Analyzer) qpDestroyed(e *trace.QPDestroy) {
	q := a.qps[qpKey{e.PID, e.QPNum}]
	if e.Gen != 0 {
		q = a.qpGens[objKey{e.PID, e.Gen}]
	}
	if q != nil && e.Ret == 0 {
		q.destroyed = true
		a.qpEpoch++
		a.memSigMove(q, nil) // its pending completions no longer count on its CQ
	}
}

// newCQ starts a CQ lifetime; at makes it the CQ living at its address.
func (a *Analyzer) newCQ(pid uint32, addr, gen uint64, at bool) *cqState {
	c := &cqState{pid: pid, addr: addr, gen: gen}
	if gen != 0 {
		a.cqGens[objKey{pid, gen}] = c
	}
	if at {
		a.liveCQ(c)
	}
	a.allCQs = append(a.allCQs, c)
	return c
}

// liveCQ makes c the CQ at its address, ending the one there before.
func (a *Analyzer) liveCQ(c *cqState) {
	k := cqKey{c.pid, c.addr}
	if old := a.cqs[k]; old != nil && old != c {
		old.replaced = true
	}
	a.cqs[k] = c
}

// cq is the CQ living at an address: polls and QP creates name it.
func (a *Analyzer) cq(pid uint32, addr uint64) *cqState {
	if c := a.cqs[cqKey{pid, addr}]; c != nil {
		return c
	}
	return a.newCQ(pid, addr, 0, true)
}

// cqOfGen is the CQ lifetime counts of a generation belong to.
func (a *Analyzer) cqOfGen(pid uint32, addr, gen uint64) *cqState {
	if gen == 0 {
		return a.cq(pid, addr)
	}
	if c := a.cqGens[objKey{pid, gen}]; c != nil {
		return c
	}
	return a.newCQ(pid, addr, gen, false) // its create is still on its way
}

// cqCreated applies a CQ's create.
func (a *Analyzer) cqCreated(e *trace.CQCreate) {
	c := a.cqGens[objKey{e.PID, e.Gen}]
	if e.Gen == 0 || c == nil {
		c = a.newCQ(e.PID, e.CQ, e.Gen, false)
	}
	c.cqe = e.CQE
	c.createdNS = e.TimeNS
	a.liveCQ(c)
}

// srqEvent applies an SRQ's create or destroy.
func (a *Analyzer) srqEvent(ev trace.Event) {
	switch e := ev.(type) {
	case *trace.SRQCreate:
		a.srqs = append(a.srqs, &srqState{SRQ: SRQ{PID: e.PID, SRQ: e.SRQ, Gen: e.Gen, MaxWR: e.MaxWR}})
	case *trace.SRQDestroy:
		if e.Ret != 0 {
			return
		}
		for i := len(a.srqs) - 1; i >= 0; i-- {
			s := a.srqs[i]
			if s.PID == e.PID && s.SRQ.SRQ == e.SRQ && !s.Destroyed && (e.Gen == 0 || s.Gen == e.Gen) {
				s.Destroyed = true
				return
			}
		}
	}
}

// cqSnapshot is the snapshot of every CQ lifetime.
func (a *Analyzer) cqSnapshot() []CQ {
	out := make([]CQ, 0, len(a.allCQs))
	for _, c := range a.allCQs {
		span := c.lastNS - c.firstNS
		if c.counted {
			span = countedSpan(c.createdNS, a.snap.FirstNS, c.lastNS)
		}
		out = append(out, CQ{PID: c.pid, CQ: c.addr, Gen: c.gen, CQE: c.cqe, Extended: c.ex,
			Polls: c.polls, EmptyPolls: c.empty, CQEs: c.cqes, UnmatchedExCQEs: c.exUnmatched,
			CQEsPastBound: c.pastBound, CQEsPastBoundRecv: c.pastRecv, PollRecordWCs: c.recordWCs,
			Resizes: c.resizes, ModCount: c.modCount, ModPeriodUS: c.modPeriod,
			Replaced: c.replaced, Destroyed: c.destroyed, SpanNS: span,
			PollsPerSec: perSec(c.polls, span)})
	}
	a.cqUsers(out)
	return out
}

// srqSnapshot is the snapshot of every SRQ lifetime.
func (a *Analyzer) srqSnapshot() []SRQ {
	var out []SRQ
	known := a.recvKnown().srqs
	for _, s := range a.srqs {
		v := s.SRQ
		if known {
			r := s.recv
			v.Recv = &r
		}
		out = append(out, v)
	}
	return out
}

// onQPCreate starts a QP's life at its create (or its listing by the
// memory scan, caps unknown).
func (a *Analyzer) onQPCreate(e *trace.QPCreate) {
	q := a.qpCreated(e)
	q.qp = e.QP
	q.typ = e.Type
	q.caps = e.Caps
	q.capsKnown = e.Via != trace.ViaMemory // a QP in memory: caps unknown
	// a QP a flight recording's window starts with: caps known, what it
	// had outstanding not
	q.late = !q.capsKnown || e.Window
	q.found = FoundCreate
	switch {
	case !q.capsKnown:
		q.found, q.stateFound = FoundMemory, ibv.QPStateName(e.State)
	case q.late:
		q.found, q.stateFound = FoundFlight, ibv.QPStateName(e.State)
	}
	q.sendCapsInferred = false
	q.createdNS = e.TimeNS
	q.sigAll = e.SigAll
	q.stateCreated()
	q.sendCQ = e.SendCQ
	q.cq = nil
	if e.SendCQ != 0 {
		q.cq = a.cq(e.PID, e.SendCQ)
	}
	a.qpRecvCreated(q, e)
	a.qpCreateProvider(q, e)
	a.qpEpoch++
	a.checkPeakOverCaps(q, e.TimeNS)
}
