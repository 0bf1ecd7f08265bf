package analyzer

import (
	"sort"

	"github.com/sqscope/sqscope/trace"
)

// CQ is one completion queue in a snapshot: what its control-path calls
// said (depth, moderation, how it is polled) and its polls.
type CQ struct {
	PID uint32 `json:"pid"`
	CQ  uint64 `json:"cq"`
	// Depth is the depth from its creation or last resize; 0 when the CQ
	// was created before the tracer attached.
	Depth int32 `json:"cqe"`
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
	Resizes         uint64 `json:"resizes"`
	ModCount        uint16 `json:"moderation_count"`
	ModPeriodUS     uint16 `json:"moderation_period_us"`
	Destroyed       bool   `json:"destroyed"`
}

// cqInfo is what the analyzer keeps of a CQ beyond its poll counts.
type cqInfo struct {
	depth        int32
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

func (a *Analyzer) info(pid uint32, cq uint64) *cqInfo {
	k := cqKey{pid, cq}
	c := a.cqInfo[k]
	if c == nil {
		c = &cqInfo{}
		a.cqInfo[k] = c
	}
	return c
}

// cqChange applies a CQ control-path call.
func (a *Analyzer) cqChange(e *trace.CQChange) {
	c := a.info(e.PID, e.CQ)
	switch e.Op {
	case trace.CQCreate, trace.CQCreateEx:
		*c = cqInfo{depth: e.CQE, ex: e.Op == trace.CQCreateEx}
	case trace.CQResize:
		if e.Ret == 0 {
			c.depth = e.CQE
			c.resizes++
		}
	case trace.CQModify:
		if e.Ret == 0 {
			c.modCount, c.modPeriod = e.ModCount, e.ModPeriodUS
		}
	case trace.CQDestroy:
		if e.Ret == 0 {
			c.destroyed = true
		}
	}
}

// exWCQP finds the QP of a completion an extended poll of cq returned, by
// its wr_id: the QP whose oldest outstanding signaled WR has it (send
// completions come in order), else one with any outstanding WR that has
// it (a flush completes unsignaled WRs too). Candidates are the live QPs
// whose send CQ is cq, or is not known (created before the tracer
// attached). nil when none matches: a receive completion, or a WR the
// trace did not see.
func (a *Analyzer) exWCQP(pid uint32, cq uint64, wc *trace.WC) *sq {
	c := a.info(pid, cq)
	if c.cands == nil || c.candsAt != a.qpEpoch {
		c.cands = c.cands[:0]
		for _, k := range a.order {
			q := a.qps[k]
			if k.pid == pid && !q.destroyed && (q.sendCQ == cq || q.sendCQ == 0) {
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

// cqList lists the CQs a snapshot shows, by PID and address.
func (a *Analyzer) cqList() []CQ {
	out := make([]CQ, 0, len(a.cqs))
	seen := map[cqKey]bool{}
	add := func(k cqKey) {
		if seen[k] {
			return
		}
		seen[k] = true
		c := CQ{PID: k.pid, CQ: k.cq}
		if s := a.cqs[k]; s != nil {
			c.Polls, c.EmptyPolls, c.CQEs = s.polls, s.empty, s.cqes
		}
		if i := a.cqInfo[k]; i != nil {
			c.Depth, c.Extended, c.UnmatchedExCQEs = i.depth, i.ex, i.exUnmatched
			c.Resizes, c.ModCount, c.ModPeriodUS, c.Destroyed = i.resizes, i.modCount, i.modPeriod, i.destroyed
		}
		out = append(out, c)
	}
	for k := range a.cqs {
		add(k)
	}
	for k := range a.cqInfo {
		add(k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].CQ < out[j].CQ
	})
	return out
}
