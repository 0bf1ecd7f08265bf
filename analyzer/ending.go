package analyzer

import (
	"github.com/sqscope/sqscope/trace"
)

// Cut is where every probe stopped at once when the trace ended while the
// target ran on (trace.End field CutNS): a post is in the trace when its
// entry came before the cut, a poll when its return did.
type Cut struct {
	AtNS uint64 `json:"at_ns"`
	// PostsInFlightUnseen are posts in flight at the cut whose return came
	// too late to be recorded.
	PostsInFlightUnseen uint64 `json:"posts_in_flight_unseen"`
	// WRsOutstanding are the WRs posted before the cut that the trace did
	// not see retired: their completions came after it. Nil when no QP was
	// traced per call (counters mode keeps no occupancy).
	WRsOutstanding *uint64 `json:"wrs_outstanding_at_cut,omitempty"`
}

// ended applies the trace's end.
func (a *Analyzer) ended(e *trace.End) {
	a.snap.Ended, a.snap.EndedOnError = e.Reason, e.Err
	a.snap.Cut = nil
	if e.CutNS != 0 {
		a.snap.Cut = &Cut{AtNS: e.CutNS, PostsInFlightUnseen: e.InFlightUnseen}
	}
}

// cutSnapshot is the snapshot's copy of the cut, with the WRs its QPs
// (of s) had outstanding.
func cutSnapshot(c *Cut, qps []QP) *Cut {
	if c == nil {
		return nil
	}
	out := *c
	for i := range qps {
		if qps[i].CountersOnly {
			continue
		}
		if out.WRsOutstanding == nil {
			out.WRsOutstanding = new(uint64)
		}
		*out.WRsOutstanding += qps[i].Outstanding
	}
	return &out
}
