// Package report writes what the analyzer made of a trace for a person to
// read, and as one JSON document: the summaries of sqscope trace, report
// and top, and the one the live view saves. It renders a snapshot; every
// figure, diagnosis and provider note in it is the analyzer's.
package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/sqscope/sqscope/analyzer"
)

// WriteText writes a per-QP summary a person reads: the queue, its
// traffic, what the HCA did by the provider's model, what was saved, and
// what went wrong. It returns the first write error.
func WriteText(w io.Writer, s analyzer.Snapshot) error {
	return Text{Verbose: true}.Write(w, s)
}

// Text is how much the text of a snapshot says: Verbose lists every probe,
// where it was placed and how it was found (-v); else their number, and
// each that failed.
type Text struct {
	Verbose bool
}

// Write writes the snapshot as text.
func (t Text) Write(w io.Writer, s analyzer.Snapshot) error {
	ew := &errWriter{w: w}
	writeText(ew, s, t.Verbose)
	return ew.err
}

// errWriter keeps the first write error and writes nothing after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func writeText(w io.Writer, s analyzer.Snapshot, verbose bool) {
	writeTrace(w, &s, verbose)
	if len(s.QPs) == 0 {
		fmt.Fprintln(w, "  no send queue activity seen")
		return
	}
	for i := range s.QPs {
		writeQP(w, &s.QPs[i])
	}
	writeCQs(w, s.CQs)
	writeRecvSide(w, &s)
	if s.UnknownQPPosts > 0 {
		fmt.Fprintf(w, "note: %d post calls were on QPs created before the tracer attached\n", s.UnknownQPPosts)
	}
	WriteDiagnoses(w, s)
	for i := range s.QPs {
		if q := &s.QPs[i]; !q.CountersOnly && q.Model != "" && !sendIdle(q) { // the counters mode prints no byte figures, nor a QP without sends
			fmt.Fprintf(w, "PCIe bytes are estimates: %d B of TLP header per transaction.\n", analyzer.TLPHeader)
			break
		}
	}
}

// writeQP writes one QP: who it is and its caps, its sends as its mode
// measured them, its receive queue, what went wrong, what the tracer cut.
func writeQP(w io.Writer, q *analyzer.QP) {
	caps := "caps from QP creation"
	switch {
	case q.CapsInferred:
		caps = "caps INFERRED (attached after QP creation): max_send_wr from the first SQ-full ENOMEM"
	case !q.CapsKnown:
		caps = "caps UNKNOWN (attached after QP creation)"
	}
	life := ""
	if q.Gen != 0 {
		life = fmt.Sprintf(", generation %d", q.Gen)
	}
	if q.Destroyed {
		life += ", destroyed"
	}
	who := fmt.Sprint(q.PID)
	if q.Comm != "" {
		who += " " + q.Comm
	}
	// the QP number in hex, and in decimal as qpn (Prometheus's label and
	// rdma res show)
	fmt.Fprintf(w, "QP %#x (qpn %d, pid %s, %s%s, %s): %s, %s, %s%s; %s\n",
		q.QPNum, q.QPNum, who, typeText(q.Type), life, foundText(q), capText("max_send_wr", q.MaxSendWR, q.CapsKnown || q.CapsInferred),
		capText("max_inline_data", q.MaxInline, q.CapsKnown), capText("max_send_sge", q.MaxSendSGE, q.CapsKnown),
		map[bool]string{true: ", sq_sig_all"}[q.SigAll], caps)
	switch {
	case sendIdle(q) && q.Memory != nil:
		fmt.Fprintln(w, "  sends: no call traced")
		writeMemory(w, q)
	case sendIdle(q):
		fmt.Fprintln(w, "  sends: none traced (no post_send, no send completion)")
	case q.PostsNotTraced:
		// its send figures are not seen: none is printed as if 0
		fmt.Fprintf(w, "  sends: no post traced, its WQEs written directly (direct verbs); %d send completions polled, %d polls of its send CQ\n", q.CQEsPolled, q.Polls)
		writeMemory(w, q)
	case q.CountersOnly:
		fmt.Fprintln(w, "  "+q.CountersNote())
		writeCountersQP(w, q)
	default:
		writeEventsQP(w, q)
	}
	writeRecvQP(w, q)
	writeErrors(w, q)
	writeCuts(w, q.Cuts)
}

// writeErrors writes what failed on a QP and what the trace could not
// account for; nothing when all went well.
func writeErrors(w io.Writer, q *analyzer.QP) {
	var errs []string
	for _, e := range []struct {
		n    uint64
		what string
	}{
		{q.ENOMEMSQFull, "ENOMEM SQ full %d"},
		{q.ENOMEMInline, "ENOMEM inline too big %d"},
		{q.ENOMEMSGE, "ENOMEM too many SGEs %d"},
		{q.NotRTS, "refused, QP not in RTS %d"},
		{q.ENOMEMUnknown, "ENOMEM cause unknown %d"},
		{map[bool]uint64{true: q.ENOMEM}[q.CountersOnly && !q.KernelSQ], "ENOMEM %d"}, // the cause needs events
		{q.EINVAL, "EINVAL %d"},
		{q.OtherErrors, "other errors %d"},
		{q.CQEErrors, "error CQEs %d"},
		{q.BeyondModel, "%d WRs reported accepted beyond the list or any SQ depth (inconsistent trace, not modeled)"},
		{q.Truncated, "%d WRs past the tracer's list bound (counted, not decoded)"},
		{q.UnmatchedCQEs, "%d CQEs matched no WR the trace saw posted"},
		{q.RetiredUnseen, "%d WRs retired without their completion seen (the SQ holds max_send_wr at most)"},
		{q.EmptyWRBatches, "%d wr batches rang a doorbell for WRs the trace did not see built"},
	} {
		if e.n > 0 {
			errs = append(errs, fmt.Sprintf(e.what, e.n))
		}
	}
	if q.CauseBasis != "" && q.ENOMEMSQFull+q.ENOMEMInline+q.ENOMEMSGE+q.NotRTS > 0 {
		errs = append(errs, "causes "+strings.ToUpper(q.CauseBasis))
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "  errors: %s\n", strings.Join(errs, ", "))
	}
}

// sendIdle reports whether the trace saw no send activity on a QP: a
// receiver, whose send figures would all be zeros.
func sendIdle(q *analyzer.QP) bool {
	if q.PostCalls != 0 || q.WRs != 0 {
		return false
	}
	return q.CountersOnly || (q.CQEsPolled == 0 && q.WRAPICalls == 0 && q.Aborted == 0 && q.EmptyWRBatches == 0)
}

// typeText writes a QP's type, saying what "unknown" is of.
func typeText(t string) string {
	if t == "unknown" {
		return "type unknown"
	}
	return t
}

// capText writes a cap of the QP, "unknown" rather than 0 when the trace
// did not see it.
func capText(name string, v uint32, known bool) string {
	if !known {
		return name + " unknown"
	}
	return fmt.Sprintf("%s %d", name, v)
}

// foundText says how a QP became known.
func foundText(q *analyzer.QP) string {
	switch q.Found {
	case analyzer.FoundCreate:
		return "found by its create"
	case analyzer.FoundMemory:
		return "found in memory, state " + q.StateFound
	case "":
		return "how found unknown"
	}
	return "found by its " + q.Found
}

func pct(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// perDoorbell is the QP's WRs per doorbell, 0 before its first.
func perDoorbell(q *analyzer.QP) float64 {
	if q.Doorbells == 0 {
		return 0
	}
	return float64(q.WRs) / float64(q.Doorbells)
}

func writeEventsQP(w io.Writer, q *analyzer.QP) {
	fmt.Fprintf(w, "  WRs %d in %d post calls (%.1f WRs/doorbell), inline %d (%.1f%%), signaled %d (%.1f%%), longest unsignaled run %d\n",
		q.WRs, q.PostCalls, perDoorbell(q), q.Inline, pct(q.Inline, q.WRs), q.Signaled, pct(q.Signaled, q.WRs), q.LongestUnsignaledRun)
	// the polls are the send CQ's, written on its own line (recv.go)
	if q.CompletionsNotTraced {
		fmt.Fprintf(w, "  CQEs polled %d; outstanding and occupancy UNKNOWN: no poll function is traced, so no completion is seen (give --probe poll_cq=LIB:0xOFFSET too)\n",
			q.CQEsPolled)
	} else if q.OutstandingUpperBound && q.OutstandingLowerBound {
		fmt.Fprintf(w, "  CQEs polled >= %d, outstanding now %d, peak %d (not bounds either way: the WRs posted before the attach are not counted, and WRs whose completions were past the poll record bound may still be)\n",
			q.CQEsPolled, q.Outstanding, q.PeakOutstanding)
	} else if q.OutstandingUpperBound {
		fmt.Fprintf(w, "  CQEs polled >= %d, outstanding now <= %d, peak <= %d (upper bounds: WRs whose completions were past the poll record bound are counted until a later completion of the QP retires them)\n",
			q.CQEsPolled, q.Outstanding, q.PeakOutstanding)
	} else if q.OutstandingRead() {
		fmt.Fprintf(w, "  CQEs polled %d, outstanding %d at the last read of its counters, peak seen in windows %d\n",
			q.CQEsPolled, q.Outstanding, q.PeakOutstanding)
	} else if q.OutstandingSampledNS != 0 {
		fmt.Fprintf(w, "  CQEs polled %d, outstanding %d when the last sample window closed (not traced since), peak seen in windows %d\n",
			q.CQEsPolled, q.Outstanding, q.PeakOutstanding)
	} else if q.OutstandingLowerBound && q.WRIDsRepeat {
		fmt.Fprintf(w, "  CQEs polled %d (%d of WRs posted before the attach), outstanding now >= %d, peak >= %d (lower bounds: its WRs share wr_ids, so no completion tells a WR posted before the attach from one posted since)\n",
			q.CQEsPolled, q.PreAttachCQEs, q.Outstanding, q.PeakOutstanding)
	} else if q.OutstandingLowerBound {
		fmt.Fprintf(w, "  CQEs polled %d, outstanding now >= %d, peak >= %d (lower bounds: the WRs posted before the attach are unknown until a completion of a WR posted since retires them)\n",
			q.CQEsPolled, q.Outstanding, q.PeakOutstanding)
	} else {
		fmt.Fprintf(w, "  CQEs polled %d, outstanding now %d, peak %d\n", q.CQEsPolled, q.Outstanding, q.PeakOutstanding)
	}
	fmt.Fprintf(w, "  opcodes (WRs): %s", q.Opcodes)
	if q.Truncated > 0 {
		fmt.Fprintf(w, "; %d more past the list bound, opcode not recorded", q.Truncated)
	}
	fmt.Fprintln(w)
	if q.ExactSinceNS != 0 {
		fmt.Fprintf(w, "  occupancy exact from %s: a completion of a WR posted after the attach retired every WR posted before it (%d completions of those seen); figures before then are lower bounds\n",
			analyzer.RelTime(q.ExactSinceS), q.PreAttachCQEs)
	}
	writeMemory(w, q)
	if !q.CompletionsNotTraced {
		writeOccupancy(w, q)
	}
	writeRates(w, q)
	writeProviderNotes(w, q)
}

// writeProviderNotes writes what the QP's provider model says of it
// (analyzer.QP.ProviderNotes).
func writeProviderNotes(w io.Writer, q *analyzer.QP) {
	for _, n := range q.ProviderNotes() {
		fmt.Fprintf(w, "  %s\n", n)
	}
}

// writeCountersQP writes what counters mode measures, and only that (the
// line before says once what it cannot see).
func writeCountersQP(w io.Writer, q *analyzer.QP) {
	fmt.Fprintf(w, "  WRs %d in %d post calls (%.1f WRs/doorbell), inline %d (%.1f%%), signaled %d (%.1f%%)\n",
		q.WRs, q.PostCalls, perDoorbell(q), q.Inline, pct(q.Inline, q.WRs), q.Signaled, pct(q.Signaled, q.WRs))
	r := &q.Rates
	fmt.Fprintf(w, "  rates over %.6f s: %.0f WR/s in %.0f post calls/s", float64(r.SpanNS)/1e9, r.WRsPerSec, r.PostsPerSec)
	if q.SendCQ != 0 {
		fmt.Fprintf(w, "; send CQ %#x: %.0f polls/s, %.2f polls per CQE", q.SendCQ, r.PollsPerSec, r.PollsPerCQE)
	}
	fmt.Fprintln(w)
	if q.KernelSQ {
		writeKernelSQ(w, q)
	}
	writeProviderNotes(w, q)
}

// writeKernelSQ writes a counters-mode QP's send queue as the kernel kept
// it: no histogram, which needs each call.
func writeKernelSQ(w io.Writer, q *analyzer.QP) {
	bound := map[bool]string{true: ">= "}[q.OutstandingLowerBound]
	of := ""
	if d := q.Occupancy.Depth; d > 0 {
		of = fmt.Sprintf(" of %d", d)
	}
	fmt.Fprintf(w, "  send queue (kept in the kernel): outstanding %s%d%s, peak %s%d%s, longest unsignaled run %d, send CQEs %d\n",
		bound, q.Outstanding, of, bound, q.PeakOutstanding, of, q.LongestUnsignaledRun, q.CQEsPolled)
}

func writeOccupancy(w io.Writer, q *analyzer.QP) {
	o := &q.Occupancy
	peak := fmt.Sprintf("%d (depth unknown)", o.Peak)
	if q.Model == "" && q.MaxSendWR > 0 {
		peak = fmt.Sprintf("%d WRs not yet polled (not bounded by max_send_wr on this provider)", o.Peak)
	}
	if o.Depth > 0 {
		peak = fmt.Sprintf("%d (%.0f%%) of %d", o.Peak, pct(o.Peak, o.Depth), o.Depth)
	}
	switch {
	case q.OutstandingLowerBound && q.OutstandingUpperBound:
		peak = "~" + peak
	case q.OutstandingLowerBound:
		peak = ">= " + peak
	case q.OutstandingUpperBound:
		peak = "<= " + peak
	}
	fmt.Fprintf(w, "  occupancy: peak %s", peak)
	if len(o.Histogram) == 0 {
		fmt.Fprintln(w)
		return
	}
	le := map[bool]string{true: "<= "}[o.PercentilesBound]
	fmt.Fprintf(w, "; after each post call: mean %.1f, p50 %s%d, p99 %s%d; histogram", o.Mean, le, o.P50, le, o.P99)
	for _, b := range o.Histogram {
		if b.Lo == b.Hi {
			fmt.Fprintf(w, " %d:%d", b.Lo, b.Count)
		} else {
			fmt.Fprintf(w, " %d-%d:%d", b.Lo, b.Hi, b.Count)
		}
	}
	fmt.Fprintln(w)
}

func writeRates(w io.Writer, q *analyzer.QP) {
	r := &q.Rates
	fmt.Fprintf(w, "  rates over %.6f s%s: %.0f WR/s in %.0f post calls/s, %.0f CQEs/s", float64(r.SpanNS)/1e9, whileTraced(r), r.WRsPerSec, r.PostsPerSec, r.CQEsPerSec)
	if q.SendCQ != 0 {
		fmt.Fprintf(w, "; send CQ %#x: %.0f polls/s, %.2f polls per CQE", q.SendCQ, r.PollsPerSec, r.PollsPerCQE)
	}
	fmt.Fprintln(w)
	switch {
	case q.Signaled == 0 && q.WRs > 0:
		fmt.Fprintf(w, "  signal interval: no WR signaled, longest unsignaled run %d\n", q.LongestUnsignaledRun)
	case q.Signaled > 0:
		fmt.Fprintf(w, "  signal interval: typically every %d WRs, longest %d; longest unsignaled run %d\n",
			q.SignalInterval, q.SignalIntervalLongest, q.LongestUnsignaledRun)
	}
}

// whileTraced qualifies rates measured only in the sentinel mode's
// windows.
func whileTraced(r *analyzer.Rates) string {
	if r.WhileTraced {
		return " traced in windows (which the probes slow)"
	}
	return ""
}

// Cuts says what the tracer's bounds cut on a QP, its send CQ's
// completions past the poll record bound included; "" when nothing was.
func Cuts(c analyzer.Cuts) string {
	var parts []string
	if c.SGECutWRs > 0 {
		parts = append(parts, fmt.Sprintf("%d WRs with SGEs past the SGE bound (%d SGEs not summed: byte counts are lower bounds)",
			c.SGECutWRs, c.SGEsNotSummed))
	}
	if c.WalkCappedPosts > 0 {
		parts = append(parts, fmt.Sprintf("%d post calls with lists past the walk bound (WRs past it not seen: WR counts are lower bounds)",
			c.WalkCappedPosts))
	}
	if c.CQEsPastBound > 0 {
		parts = append(parts, "its send CQ's "+PollCuts(c))
	}
	if c.SignaledUnkept > 0 {
		parts = append(parts, fmt.Sprintf("%d signaled WRs the kernel's send-queue model had no room for (their completions retired late: occupancy read high until a later one's)",
			c.SignaledUnkept))
	}
	if len(parts) == 0 { // the bound alone is no cut (an interval's counters)
		return ""
	}
	return "cut by the tracer's bounds: " + strings.Join(parts, ", ")
}

// PollCuts says how many completions polls returned past what a poll
// record holds; "" when none.
func PollCuts(c analyzer.Cuts) string {
	if c.CQEsPastBound == 0 {
		return ""
	}
	if c.CQEsPastBoundRecv == c.CQEsPastBound {
		return fmt.Sprintf("%d completions past the %d a poll record holds: all receives of the only QP receiving on their CQ (no QP sends to it), counted as such", c.CQEsPastBound, c.PollRecordWCs)
	}
	s := fmt.Sprintf("%d completions past the %d a poll record holds: ", c.CQEsPastBound, c.PollRecordWCs)
	if c.CQEsPastBoundRecv > 0 {
		s += fmt.Sprintf("%d of them receives of the only QP receiving on their CQ, counted as such; the rest ", c.CQEsPastBoundRecv)
	}
	return s + "not attributed to a QP"
}

// writeCuts writes the line saying what the tracer's bounds cut on a QP;
// nothing when nothing was cut.
func writeCuts(w io.Writer, c analyzer.Cuts) {
	if s := Cuts(c); s != "" {
		fmt.Fprintf(w, "  %s\n", s)
	}
}

// writeMemory writes what the reads of a QP's counters in its process's
// memory gave (the sentinel's); nothing without any.
func writeMemory(w io.Writer, q *analyzer.QP) {
	m := q.Memory
	if m == nil {
		return
	}
	fmt.Fprintf(w, "  read from its memory (no trap; %d reads): by the last, %d WRs posted", m.Samples, m.Posted)
	if m.FromCreate {
		fmt.Fprint(w, " since its create")
	}
	if m.Capacity != 0 {
		fmt.Fprintf(w, ", %d in its ring (not yet completed) at the last read, highest read %d of the %d it holds", m.Outstanding, m.Peak, m.Capacity)
	} else {
		fmt.Fprintf(w, ", outstanding %d at the last read, highest read %d", m.Outstanding, m.Peak)
	}
	if m.PostedIncludesRefused {
		fmt.Fprint(w, " (the provider counts a WR before its full-ring check: the WRs posted include those refused)")
	}
	if m.WRPerS > 0 {
		fmt.Fprintf(w, "; %.0f WR/s over %.1f s, every WR traced or not", m.WRPerS, m.SpanS)
	}
	if m.Dropped > 0 {
		fmt.Fprintf(w, "; %d reads over the depth left out (the queue moved between the two words)", m.Dropped)
	}
	if m.SignaledPending != nil {
		fmt.Fprintf(w, "; %d signaled completions pending on its send CQ (posted, not yet polled) at the last read", *m.SignaledPending)
	}
	if m.CQErrors != nil && *m.CQErrors > 0 {
		fmt.Fprintf(w, "; its send CQ overran %d time(s), by the provider's count", *m.CQErrors)
	}
	if m.SendCQFill != nil {
		fmt.Fprintf(w, "; its send CQ's ring held %d unpolled completions of the %d it holds at the last read", *m.SendCQFill, m.SendCQCapacity)
		if m.SendCQFullReads > 0 {
			fmt.Fprintf(w, ", read full %d time(s) (a full CQ takes no more: rxe drops the completions due on it)", m.SendCQFullReads)
		}
	}
	fmt.Fprintln(w)
}
