package analyzer

import (
	"fmt"
	"io"
	"strings"

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

// writeEnding writes where the trace was cut and the completions that
// matched no post seen, in total (each QP's and CQ's own are on its lines).
func writeEnding(w io.Writer, s *Snapshot) {
	if c := s.Cut; c != nil {
		at := "at the stop"
		if c.AtNS >= s.FirstNS && s.FirstNS != 0 {
			at = fmt.Sprintf("%.6f s into the trace", float64(c.AtNS-s.FirstNS)/1e9)
		}
		fmt.Fprintf(w, "  trace cut %s, every probe at once (the target ran on): posts are in if they began before it, polls if they returned before it", at)
		if c.WRsOutstanding != nil {
			fmt.Fprintf(w, "; %d WRs posted before it not seen retired (their completions came after)", *c.WRsOutstanding)
		} else {
			fmt.Fprint(w, "; the WRs it left outstanding are not known in counters mode (no occupancy)")
		}
		fmt.Fprintf(w, "; %d posts in flight at it returned too late to be recorded\n", c.PostsInFlightUnseen)
	}
	var parts []string
	var total uint64
	for _, q := range s.QPs {
		if q.UnmatchedCQEs > 0 {
			parts = append(parts, fmt.Sprintf("QP %#x: %d", q.QPNum, q.UnmatchedCQEs))
			total += q.UnmatchedCQEs
		}
	}
	for _, c := range s.CQs {
		if c.UnmatchedExCQEs > 0 {
			parts = append(parts, fmt.Sprintf("CQ %#x (extended polls): %d", c.CQ, c.UnmatchedExCQEs))
			total += c.UnmatchedExCQEs
		}
	}
	if total == 0 && (s.Cut == nil || s.Total.CountersOnly) {
		return // said only when there are some, or to show a cut lost none
	}
	fmt.Fprintf(w, "  completions that matched no post seen: %d", total)
	if len(parts) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
}
