package analyzer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The sentinel mode (probe.ModeSentinel): while a process is healthy
// nothing of its data path is traced; an error site of its provider's
// post_send or wr_complete that runs is a trace.PostFail, the refused WR
// and the QP's state read there. Its cause comes from the QP's provider
// model (ProviderModel.refused): the WR against the caps and the state,
// the site's own checks, never the occupancy (the posts were not seen).
// A failure opens an escalation window: the data path is traced in full
// for a while, which the analyzer takes as a late attach of each QP of
// the process (its occupancy a lower bound until a completion
// re-synchronises it, lateattach.go), and again when the window closes.

// FoundErrorSite is how a QP first seen at an error site became known.
const FoundErrorSite = "error site"

// Sentinel is what the sentinel mode's probes saw (Snapshot field
// Sentinel; nil when it placed none).
type Sentinel struct {
	// SitesProbed counts the error-site probes placed, FunctionsWithout
	// the data-path functions in which no site was found (their failures
	// are not seen).
	SitesProbed      int `json:"sites_probed"`
	FunctionsWithout int `json:"functions_without_sites"`
	// Hits counts the error sites that ran (each a failing call),
	// Escalations the escalation windows opened.
	Hits        uint64 `json:"error_site_hits"`
	Escalations uint64 `json:"escalations"`
	// FirstEscalationNS is when the first escalation window's probes were
	// in place: the failing process's calls are all traced from then for
	// the window (a flight recording's detail is complete from there).
	FirstEscalationNS uint64 `json:"first_escalation_ns,omitempty"`
	// Sampling is what the sample windows saw and cost (sample.go); nil
	// without sample windows.
	Sampling *Sampling `json:"sampling,omitempty"`
}

// sentinelState is the analyzer's side of the sentinel mode.
type sentinelState struct {
	// windows: each process's last escalation window, from when its
	// probes were in place to when they were removed (0 while open): the
	// calls in it are the window's records' to count
	windows map[uint32]*escWindow
	// traced: per process, the ns its data path was traced in windows
	// that closed
	traced map[uint32]uint64
	post   trace.Post // the refused call, as the models take it (reused)
	// shares: the sample windows' WRs, for the estimates (estimate.go)
	shares shareSums
}

// escWindow is a window of full probes on one process: an escalation,
// or a sample window (until a failure in it escalates it).
type escWindow struct {
	from, until uint64
	sample      bool
	closing     bool // its probes are being removed
	// base: a sample window's QPs' WRs, inline and signaled at its
	// opening
	base map[*sq][3]uint64
}

// between reports whether pid's last window has begun to close: from
// then to the next window's opening its posts are the window's edge
// (sq.edge).
func (s *sentinelState) between(pid uint32) bool {
	w := s.windows[pid]
	return w != nil && (w.closing || w.until != 0)
}

// inWindow reports whether a call at ns of pid falls in its escalation
// window, whose records count it.
func (s *sentinelState) inWindow(pid uint32, ns uint64) bool {
	w := s.windows[pid]
	return w != nil && ns >= w.from && (w.until == 0 || ns < w.until)
}

func (a *Analyzer) sentinelOn() *Sentinel {
	if a.snap.Sentinel == nil {
		a.snap.Sentinel = &Sentinel{}
		a.sentinel.windows = map[uint32]*escWindow{}
		a.sentinel.traced = map[uint32]uint64{}
	}
	return a.snap.Sentinel
}

// sentinelAttach follows the sentinel's probes: the error sites placed,
// and each escalation window's opening and end, which re-synchronise the
// process's QPs as a late attach does.
func (a *Analyzer) sentinelAttach(e *trace.Attach) {
	switch e.How {
	case trace.HowErrorSite:
		s := a.sentinelOn()
		if e.Err == "" {
			s.SitesProbed++
		} else if strings.HasPrefix(e.Err, "no error site") {
			s.FunctionsWithout++
		}
	case trace.HowEscalation, trace.HowSample:
		if e.Func != "post_send" && e.Func != "wr_complete" {
			return
		}
		a.windowAttach(e) // sample.go
	}
}

// unsync makes the QP's occupancy a lower bound again: the WRs it
// counted may have completed unseen, and those posted unseen are not
// counted.
func (q *sq) unsync() {
	q.tail = q.head
	q.sigHead = q.sigTail
	q.curRun = 0
	q.late, q.syncedNS, q.syncGuessed = true, 0, false
}

// onPostFail applies a failure seen at an error site. A call an
// escalation window's probe saw enter (Traced) is its own record's
// (trace.Post) to count; a wr_complete's inside a window too (its
// batch's probes do not say they saw it).
func (a *Analyzer) onPostFail(e *trace.PostFail) {
	if e.Counted { // a failed post of the counters mode, at its return
		a.onCountedFail(e) // kernsq.go
		return
	}
	a.sentinelOn().Hits++
	if e.Traced || (e.Func == "wr_complete" && a.sentinel.inWindow(e.PID, e.TimeNS)) || (e.QP == 0 && e.QPNum == 0) {
		return
	}
	q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
	q.noteFound(FoundErrorSite)
	a.resolveProvider(q)
	q.failWR = 0
	cause := q.model().refused(q, e)
	q.countCause(e.Errno, cause)
	q.lastNS = max(q.lastNS, e.TimeNS)
	p := &a.sentinel.post
	wrs := p.WRs[:0]
	*p = trace.Post{Header: e.Header, QP: e.QP, QPNum: e.QPNum, Ret: e.Errno}
	if e.Func == "wr_complete" {
		p.API = trace.APIWR
	}
	if e.HasWR {
		wrs = append(wrs, e.WR)
	}
	p.WRs = wrs
	if cause == causeSQFull && q.capsKnown {
		// the queue held what it can when the call returned: the WRs
		// before the refused one went in
		d := q.depth()
		q.sampledOut, q.sampledNS, q.memOut = d, e.TimeNS, false
		q.c.PeakOutstanding = max(q.c.PeakOutstanding, d)
	}
	if cause == causeSQFull {
		num, inl, state := noValue, noValue, noValue
		if e.HasWR {
			num, inl = uint64(e.WR.NumSGE), 0
			if e.WR.Flags&ibv.SendInline != 0 {
				inl = uint64(e.WR.Bytes)
			}
		}
		if e.State >= 0 {
			state = uint64(e.State)
		}
		if q.model().siteOverflow(a, q, e) {
			return // the provider's own cause
		}
		depth := noValue
		if q.capsKnown {
			depth = q.depth()
		}
		a.recordAs(q, DiagOverflowAtSite, e.TimeNS, evidence{depth, num, inl, state, q.c.ENOMEMSQFull},
			q.model().causeBasis() == CauseInferred)
		return
	}
	a.afterPost(q, p, cause, 0)
}

// siteCauses are the checks the site's guards compare (errsite.Cause
// names).
func siteCauses(e *trace.PostFail) []string {
	if e.SiteCauses == "" {
		return nil
	}
	return strings.Split(e.SiteCauses, ",")
}

// siteAllows reports whether the site may be the failure of a check: its
// guards name it, or name nothing the analysis read.
func siteAllows(cs []string, c string) bool {
	return len(cs) == 0 || slices.Contains(cs, c) || slices.Contains(cs, "unknown")
}

// refusedNotRTS reports whether the QP's send queue is not open: by the
// state read at the site, else by the modifies the trace saw.
func (q *sq) refusedNotRTS(e *trace.PostFail) bool {
	switch e.State {
	case ibv.QPSReset, ibv.QPSInit, ibv.QPSRTR:
		return true
	case -1:
		return q.sqOpenKnown && !q.sqOpen
	}
	return false
}

// refusedByChecks is the cause of a refusal seen at an error site by the
// checks mlx5 makes (and the generic model infers): a QP not in RTS, a
// WR over the QP's caps, else, with the WR within them, a full queue.
// The queue's room is checked first by the provider, so a WR over a cap
// on a full queue is blamed on the WR: the occupancy is not known here.
func refusedByChecks(q *sq, e *trace.PostFail) errCause {
	cs := siteCauses(e)
	notRTS := q.refusedNotRTS(e)
	switch {
	case e.Errno == ibv.EINVAL:
		if notRTS && (e.Func == "wr_complete" || len(cs) == 1 && cs[0] == "qp_state") {
			return causeNotRTS
		}
		return causeEINVAL
	case e.Errno != ibv.ENOMEM:
		return causeOther
	case notRTS && e.Func == "post_send":
		return causeNotRTS
	case len(cs) == 1 && cs[0] == "queue_full":
		return causeSQFull
	case len(cs) == 1 && cs[0] == "inline":
		return causeInline
	case len(cs) == 1 && cs[0] == "too_many_sge":
		return causeSGE
	case !e.HasWR || !q.capsKnown:
		return causeUnknownENOMEM
	case e.WR.Flags&ibv.SendInline != 0 && e.WR.Bytes > q.caps.MaxInlineData && siteAllows(cs, "inline"):
		return causeInline
	case e.WR.NumSGE > q.caps.MaxSendSGE && siteAllows(cs, "too_many_sge"):
		return causeSGE
	case siteAllows(cs, "queue_full"):
		return causeSQFull
	}
	return causeUnknownENOMEM
}

// exportAtSite writes the message and fix of an SQ-full refusal seen at
// an error site.
func exportAtSite(r *diagRec, d *Diagnosis) {
	e := &r.ev
	depth := "its max_send_wr"
	if e[0] != noValue {
		depth = fmt.Sprintf("max_send_wr %d", e[0])
	}
	d.Message = fmt.Sprintf("SQ overflow (ENOMEM), seen at the provider's error site: the WR refused was within the QP's caps and the QP in RTS, so the send queue held %s WRs (%d such refusals); the posts and polls before it were not traced (sentinel mode), so why the WRs were not retired is told by the escalation window that follows, if the overflow lasts into it",
		depth, e[4])
	d.Fix = "Read the diagnoses of this QP from the escalation window; in general, signal at least one WR in every half of max_send_wr and poll the send CQ so completions keep up with posting."
}
