package analyzer

import (
	"github.com/sqscope/sqscope/trace"
)

// cqCalls is what a CQ lifetime's control-path calls said, and what its
// extended polls need to find a completion's QP.
type cqCalls struct {
	createSeen   bool // its create call (trace.CQChange) was applied
	ex           bool
	resizes      uint64
	modCount     uint16
	modPeriod    uint16
	destroyed    bool
	exUnmatched  uint64
	cands        []*sq  // QPs an extended-poll completion may belong to
	candsAt      uint64 // Analyzer.qpEpoch when cands was made
	candsMatched int    // the last candidate a completion matched
}

// cqChange applies a CQ control-path call to the CQ lifetime at its
// address. A create goes to the lifetime its trace.CQCreate started;
// without one (a recording made before generations), a create at an
// address whose CQ was created or destroyed before starts a new lifetime.
func (a *Analyzer) cqChange(e *trace.CQChange) {
	c := a.cqs[cqKey{e.PID, e.CQ}]
	switch e.Op {
	case trace.CQOpCreate, trace.CQOpCreateEx:
		if c == nil || c.createSeen || c.destroyed {
			c = a.newCQ(e.PID, e.CQ, 0, true)
		}
		c.createSeen = true
		c.ex = e.Op == trace.CQOpCreateEx
		c.cqe = uint32(max(e.CQE, 0))
		return
	}
	if c == nil {
		c = a.cq(e.PID, e.CQ)
	}
	switch e.Op {
	case trace.CQOpResize:
		if e.Ret == 0 {
			c.cqe = uint32(max(e.CQE, 0))
			c.resizes++
		}
	case trace.CQOpModify:
		if e.Ret == 0 {
			c.modCount, c.modPeriod = e.ModCount, e.ModPeriodUS
		}
	case trace.CQOpDestroy:
		if e.Ret == 0 {
			c.destroyed = true
			a.qpEpoch++
		}
	}
}

// exWCQP finds the QP of a completion an extended poll of CQ lifetime c
// returned, by its wr_id: the QP whose oldest outstanding signaled WR has
// it (send completions come in order), else one with any outstanding WR
// that has it (a flush completes unsignaled WRs too). Candidates are the
// live QPs whose send CQ is this lifetime, or is not known (created before
// the tracer attached). nil when none matches: a receive completion, or a
// WR the trace did not see.
func (a *Analyzer) exWCQP(c *cqState, wc *trace.WC) *sq {
	if c.cands == nil || c.candsAt != a.qpEpoch {
		c.cands = c.cands[:0]
		for _, q := range a.all {
			if q.key.pid == c.pid && !q.destroyed && (q.cq == c || q.sendCQ == 0) {
				c.cands = append(c.cands, q)
			}
		}
		c.candsAt, c.candsMatched = a.qpEpoch, 0
	}
	n := len(c.cands)
	for i := range n {
		// start with the QP the last completion matched
		q := c.cands[(c.candsMatched+i)%n]
		if e, ok := q.sigOldest(); ok && q.slot(e.seq).id == wc.ID {
			c.candsMatched = (c.candsMatched + i) % n
			return q
		}
	}
	for i, q := range c.cands {
		for s := q.tail; s < q.head; s++ {
			if q.slot(s).id == wc.ID {
				c.candsMatched = i
				return q
			}
		}
	}
	c.exUnmatched++
	return nil
}
