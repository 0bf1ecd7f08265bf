package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sqscope/sqscope/analyzer"
)

// The text of the receive side and of the CQs: polls belong to a CQ,
// which several QPs may share, so they are written once per CQ; a QP's
// receive queue is written with its QP.

// writeRecvQP writes a QP's receive queue, when it was posted to or
// consumed from.
func writeRecvQP(w io.Writer, q *analyzer.QP) {
	r := q.Recv
	if r == nil || (r.PostCalls == 0 && r.Consumed == 0) {
		return
	}
	fmt.Fprintf(w, "  receives: %d posted in %d post_recv calls", r.Posted, r.PostCalls)
	if r.FailedCalls > 0 {
		fmt.Fprintf(w, " (%d failed)", r.FailedCalls)
	}
	bound := ""
	if r.CompletionsSeen() {
		least := ""
		if r.ConsumedLowerBound {
			bound, least = "<= ", "at least "
		}
		fmt.Fprintf(w, ", %s%d consumed by receive CQEs", least, r.Consumed)
		if r.CQEErrors > 0 {
			fmt.Fprintf(w, " (%d with errors)", r.CQEErrors)
		}
		if r.ConsumedLowerBound {
			fmt.Fprintf(w, " (its recv CQ returned %d completions past the poll record bound, not attributed to a QP)", r.CQEsPastBound)
		}
	}
	if r.Outstanding != nil {
		fmt.Fprintf(w, "; outstanding now %s%d, peak %s%d", bound, *r.Outstanding, bound, *r.Peak)
		if r.Depth != nil {
			fmt.Fprintf(w, " of max_recv_wr %d", *r.Depth)
		}
	} else {
		fmt.Fprintf(w, "; outstanding n/a: %s", r.OutstandingUnknown)
	}
	if r.RecvCQ != 0 {
		fmt.Fprintf(w, "; recv CQ %#x", r.RecvCQ)
	}
	fmt.Fprintln(w)
}

// writeRecvSide writes what the QPs do not hold of the receive side: the
// SRQs, or why receives are not in the snapshot.
func writeRecvSide(w io.Writer, s *analyzer.Snapshot) {
	if s.ReceivesNotTraced != "" {
		fmt.Fprintf(w, "receive side: %s\n", s.ReceivesNotTraced)
	}
	for _, q := range s.SRQs {
		life := ""
		if q.Gen != 0 {
			life = fmt.Sprintf(", generation %d", q.Gen)
		}
		if q.Destroyed {
			life += ", destroyed"
		}
		depth := fmt.Sprintf("max_wr %d", q.MaxWR)
		if q.Gen == 0 && q.MaxWR == 0 {
			depth = "max_wr unknown (created before tracing)"
		}
		fmt.Fprintf(w, "SRQ %#x (pid %d%s): %s", q.SRQ, q.PID, life, depth)
		if r := q.Recv; r != nil {
			fmt.Fprintf(w, "; receives %d posted in %d post_srq_recv calls", r.Posted, r.PostCalls)
			if r.FailedCalls > 0 {
				fmt.Fprintf(w, " (%d failed)", r.FailedCalls)
			}
		}
		fmt.Fprintln(w)
	}
}

// maxListedQPs bounds the QP numbers a CQ line lists.
const maxListedQPs = 8

// qpList is "N QP(s) (0x1 0x2 ...)".
func qpList(qps []uint32) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d QP", len(qps))
	if len(qps) != 1 {
		b.WriteString("s")
	}
	b.WriteString(" (")
	for i, n := range qps {
		if i == maxListedQPs {
			fmt.Fprintf(&b, " and %d more", len(qps)-i)
			break
		}
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%#x", n)
	}
	b.WriteString(")")
	return b.String()
}

// writeCQs writes every CQ lifetime that was polled, is a QP's send or
// receive CQ, or whose control-path calls were seen: its polls are its
// own, once, however many QPs share it.
func writeCQs(w io.Writer, cqs []analyzer.CQ) {
	for _, c := range cqs {
		if c.CQE == 0 && !c.Extended && c.UnmatchedExCQEs == 0 && c.Polls == 0 &&
			len(c.SendQPs) == 0 && len(c.RecvQPs) == 0 {
			continue
		}
		life := ""
		if c.Gen != 0 {
			life = fmt.Sprintf(", generation %d", c.Gen)
		}
		fmt.Fprintf(w, "CQ %#x (pid %d%s): ", c.CQ, c.PID, life)
		if c.CQE != 0 {
			fmt.Fprintf(w, "depth %d", c.CQE)
		} else {
			fmt.Fprint(w, "depth unknown (its create was not traced)")
		}
		if c.Extended {
			fmt.Fprint(w, ", extended (ibv_start_poll..ibv_end_poll: completions matched to their QP by wr_id)")
		}
		if c.ModCount != 0 || c.ModPeriodUS != 0 {
			fmt.Fprintf(w, ", moderation %d completions / %d us", c.ModCount, c.ModPeriodUS)
		}
		if c.Resizes > 0 {
			fmt.Fprintf(w, ", resized %d times", c.Resizes)
		}
		if c.Destroyed {
			fmt.Fprint(w, ", destroyed")
		} else if c.Replaced {
			fmt.Fprint(w, ", replaced by a CQ at its address")
		}
		switch {
		case len(c.SendQPs) > 0 && slices.Equal(c.SendQPs, c.RecvQPs):
			fmt.Fprintf(w, "; send and recv CQ of %s", qpList(c.SendQPs))
		default:
			if len(c.SendQPs) > 0 {
				fmt.Fprintf(w, "; send CQ of %s", qpList(c.SendQPs))
			}
			if len(c.RecvQPs) > 0 {
				fmt.Fprintf(w, "; recv CQ of %s", qpList(c.RecvQPs))
			}
		}
		fmt.Fprintf(w, "; polls %d (empty %d), CQEs %d", c.Polls, c.EmptyPolls, c.CQEs)
		if c.RecvCQEs != nil {
			fmt.Fprintf(w, " (receive %s%d)", map[bool]string{true: ">= "}[c.CQEsPastBound > c.CQEsPastBoundRecv], *c.RecvCQEs)
		}
		fmt.Fprintln(w)
		if s := PollCuts(analyzer.Cuts{CQEsPastBound: c.CQEsPastBound, CQEsPastBoundRecv: c.CQEsPastBoundRecv, PollRecordWCs: c.PollRecordWCs}); s != "" {
			if c.CQEsPastBoundRecv < c.CQEsPastBound {
				s += " (in its CQEs, not told send from receive)"
			}
			fmt.Fprintf(w, "  %s\n", s)
		}
		if c.UnmatchedExCQEs > 0 {
			fmt.Fprintf(w, "  %d extended-poll completions matched no WR outstanding on this CQ's QPs (receive completions, or WRs not traced)\n", c.UnmatchedExCQEs)
		}
	}
}
