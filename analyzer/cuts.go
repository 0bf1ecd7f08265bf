package analyzer

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Cuts count what the tracer's bounds kept it from seeing whole on a QP.
// They are left out of JSON while zero, as the text leaves out their line.
// sq.post counts a post's: SGE lists for the WRs posted, whose bytes the
// model sums; a capped walk for any call.
type Cuts struct {
	// SGECutWRs counts posted WRs with more SGEs (or inline buffers) than
	// the tracer sums: their byte counts, and the payload and inline bytes
	// of the QP, are lower bounds.
	SGECutWRs uint64 `json:"wrs_sge_cut,omitempty"`
	// SGEsNotSummed counts the SGEs of those WRs past the bound (each WR's
	// count saturates at 255).
	SGEsNotSummed uint64 `json:"sges_not_summed,omitempty"`
	// WalkCappedPosts counts post calls whose WR list was longer than the
	// tracer walks: the WRs past the walk bound were neither seen nor
	// counted, so the WR counts of the QP are lower bounds.
	WalkCappedPosts uint64 `json:"posts_walk_capped,omitempty"`
	// CQEsPastBound counts completions polls returned past the
	// PollRecordWCs a poll record holds: counted in their CQ's CQEs (the
	// poll's return value), but not attributed to a QP nor told send from
	// receive. Like its polls, a QP's are its send CQ's (its CQEs polled
	// are then a lower bound, its occupancy an upper bound:
	// QP.OutstandingUpperBound); the total's are every CQ's.
	CQEsPastBound uint64 `json:"cqes_past_bound,omitempty"`
	// CQEsPastBoundRecv: of CQEsPastBound, those known to be receives of
	// their CQ's only receiving QP (no QP sends to it, the post probes in
	// place), counted as its receives; the rest are not attributed.
	CQEsPastBoundRecv uint64 `json:"cqes_past_bound_receives,omitempty"`
	// PollRecordWCs is how many completions a poll record held where a
	// poll returned more (the tracer's bound); 0 when none did.
	PollRecordWCs uint64 `json:"poll_record_wcs,omitempty"`
	// SignaledUnkept counts signaled WRs the kernel's send-queue model had
	// no room to keep (counters mode: more than trace.SigRing outstanding,
	// or more than 32 in one list): their completions retired late, so the
	// occupancy read high until a later kept WR's completion.
	SignaledUnkept uint64 `json:"signaled_unkept,omitempty"`
}

func (c *Cuts) add(o *Cuts) {
	c.SignaledUnkept += o.SignaledUnkept
	c.SGECutWRs += o.SGECutWRs
	c.SGEsNotSummed += o.SGEsNotSummed
	c.WalkCappedPosts += o.WalkCappedPosts
	c.CQEsPastBound += o.CQEsPastBound
	c.CQEsPastBoundRecv += o.CQEsPastBoundRecv
	c.PollRecordWCs = max(c.PollRecordWCs, o.PollRecordWCs)
}

// pollCut counts on CQ c the completions a poll returned past what its
// record holds: the poll's return value says how many it returned, the
// record holds the first of them.
func (c *cqState) pollCut(e *trace.Poll) {
	if e.Ret <= 0 || int(e.Ret) <= len(e.WCs) {
		return
	}
	c.pastBound += uint64(int(e.Ret) - len(e.WCs))
	c.recordWCs = max(c.recordWCs, uint64(len(e.WCs)))
}

// pastBoundRecv attributes the completions a poll of CQ c returned past
// its record when they can only be receives of one QP: c is the receive
// CQ of that QP alone, no QP sending to it has posted (the post probes
// in place), and every completion the record holds is a receive of it.
// They are then counted as its receives, exact, not a lower bound.
func (a *Analyzer) pastBoundRecv(c *cqState, e *trace.Poll, now uint64) {
	past := int(e.Ret) - len(e.WCs)
	if e.Ex || past <= 0 || !a.postProbed || a.postFailed {
		return
	}
	if c.users == nil || c.usersAt != a.qpEpoch {
		c.users = c.users[:0]
		for _, q := range a.all {
			if q.key.pid == c.pid && !q.destroyed && (q.cq == c || q.rq.rcq == c) {
				c.users = append(c.users, q)
			}
		}
		c.usersAt = a.qpEpoch
	}
	var r *sq
	for _, q := range c.users {
		if q.cq == c && (q.c.PostCalls > 0 || q.c.WRs > 0 || q.c.WRAPICalls > 0 || q.c.UnmatchedCQEs > 0) {
			return // it sends to c: some may be send completions
		}
		if q.rq.rcq == c {
			if r != nil {
				return // two QPs receive on c: whose is not known
			}
			r = q
		}
	}
	if r == nil {
		return
	}
	for i := range e.WCs {
		if !ibv.IsRecvWC(e.WCs[i].Opcode) || e.WCs[i].QPNum != r.key.qpNum {
			return
		}
	}
	was := r.rqEmpty()
	r.c.RecvCQEs += uint64(past)
	c.recvCQEs += uint64(past)
	c.pastRecv += uint64(past)
	r.lastNS = max(r.lastNS, now)
	a.noteRQ(r, was)
}
