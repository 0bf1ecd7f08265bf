package analyzer

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// DiagKind names what a diagnosis found.
type DiagKind uint8

const (
	// SQ overflow (ENOMEM, SQ full), by root cause.
	DiagOverflowNeverSignaled DiagKind = iota
	DiagOverflowUnsignaledRun
	DiagOverflowCQNotPolled
	DiagOverflowPollsTooRare
	DiagOverflowCompletionsSlow
	// Other post failures.
	DiagInlineTooBig
	DiagInlineUnsupported
	DiagTooManySGE
	DiagEINVAL
	// Misuse that does not fail.
	DiagSigAllFlag
	// Predictions, made before the failure.
	DiagRunNearDepth
	DiagTrendingFull
	// What the trace itself shows it misses.
	DiagCallsNotTraced
	// The QP's state and its send CQ's depth (diag_state.go).
	DiagQPNotRTS
	DiagCQOverrunRisk
	DiagCQOverrun
	// Receive-queue starvation of SENDs (diag_recv.go).
	DiagRQStarved
	DiagRNRRetryExceeded
	// SQ overflow on rxe (rxe.go), by root cause.
	DiagOverflowRNR
	DiagOverflowNotCompleting
	// Of a provider with no model of its own (provider_generic.go): an
	// SQ-full ENOMEM inferred from caps, an ENOMEM nothing explains.
	DiagOverflowInferred
	DiagENOMEMUnexplained
	// An SQ-full refusal an error-site probe saw (the sentinel mode,
	// sentinel.go): the data path was not traced, so only the refusal.
	DiagOverflowAtSite
	// A QP whose completions come with no post ever traced (diagnose.go):
	// its WQEs are written directly.
	DiagPostsNotTraced

	numDiagKinds
)

// Severities.
const (
	SevError      = "error"
	SevWarning    = "warning"
	SevPrediction = "prediction"
)

// SeverityRank orders the severities, the worst highest; 0 for a name
// that is none.
func SeverityRank(sev string) int {
	switch sev {
	case SevPrediction:
		return 1
	case SevWarning:
		return 2
	case SevError:
		return 3
	}
	return 0
}

// MaxDiagnoses bounds the diagnoses kept (one per QP and kind); later ones
// are counted in Snapshot.DiagnosesDropped.
const MaxDiagnoses = 1024

// noValue marks evidence that does not apply (e.g. a CQ never polled).
const noValue = ^uint64(0)

const maxEvidence = 9

type diagInfo struct {
	name     string
	severity string
	evidence []string // names of the evidence values, in order
}

var diagInfos = [numDiagKinds]diagInfo{
	DiagOverflowNeverSignaled: {"sq_overflow_never_signaled", SevError,
		[]string{"outstanding", "max_send_wr", "wrs_posted"}},
	DiagOverflowUnsignaledRun: {"sq_overflow_unsignaled_run", SevError,
		[]string{"outstanding", "max_send_wr", "unsignaled_run", "signal_interval_typical", "signaled"}},
	DiagOverflowCQNotPolled: {"sq_overflow_cq_not_polled", SevError,
		[]string{"outstanding", "max_send_wr", "signaled_outstanding", "oldest_signaled_ns", "cq", "cq_last_poll_ns", "cq_polls"}},
	DiagOverflowPollsTooRare: {"sq_overflow_polls_too_rare", SevError,
		[]string{"outstanding", "max_send_wr", "cq", "wrs_posted", "cq_polls", "wrs_per_poll", "post_wrs_per_s", "polls_per_s"}},
	DiagOverflowCompletionsSlow: {"sq_overflow_completions_slow", SevError,
		[]string{"outstanding", "max_send_wr", "cq", "oldest_signaled_ns", "empty_polls_since", "post_wrs_per_s"}},
	DiagInlineTooBig: {"inline_too_big", SevError,
		[]string{"wr_index", "inline_bytes", "max_inline_data"}},
	DiagInlineUnsupported: {"inline_unsupported", SevError,
		[]string{"wr_index", "inline_bytes", "max_inline_data", "inline_wrs"}},
	DiagTooManySGE: {"too_many_sge", SevError,
		[]string{"wr_index", "num_sge", "max_send_sge"}},
	DiagEINVAL: {"einval", SevError,
		[]string{"wr_index", "opcode", "qp_type"}},
	DiagSigAllFlag: {"sig_all_ignores_signaled_flag", SevWarning,
		[]string{"wrs_with_flag", "wrs_without_flag"}},
	DiagRunNearDepth: {"unsignaled_run_near_depth", SevPrediction,
		[]string{"unsignaled_run", "max_send_wr", "pct_of_depth", "outstanding"}},
	DiagTrendingFull: {"occupancy_trending_full", SevPrediction,
		[]string{"occupancy_from", "occupancy", "max_send_wr", "over_ms", "growth_wrs_per_s", "full_in_ms"}},
	DiagCallsNotTraced: {"calls_not_traced", SevWarning,
		[]string{"outstanding", "max_send_wr", "unmatched_cqes", "empty_wr_batches"}},
	DiagPostsNotTraced: {"posts_not_traced", SevWarning,
		[]string{"send_cqes_polled", "unmatched_cqes", "max_send_wr"}},
	DiagQPNotRTS: {"post_qp_not_rts", SevError,
		[]string{"qp_state", "errno", "api", "wr_index", "num_sge", "max_send_sge", "posts_refused"}},
	DiagCQOverrunRisk: {"cq_overrun_risk", SevPrediction,
		[]string{"completions_pending", "cq_depth", "pct_of_depth", "cq", "cq_qps", "pending_read"}},
	DiagCQOverrun: {"cq_overrun", SevError,
		[]string{"completions_pending", "cq_depth", "cq", "cqes_returned_since", "over_since_ns", "cq_qps", "still_pending", "cq_errors_read", "completions_skipped"}},
	DiagRQStarved: {"rq_starved", SevError,
		[]string{"outstanding", "max_send_wr", "receiver_qp", "recvs_posted", "recvs_completed", "max_recv_wr", "receivers_empty", "receivers_traced"}},
	DiagRNRRetryExceeded: {"rnr_retry_exceeded", SevError,
		[]string{"rnr_retry_exc_cqes", "receiver_qp", "recvs_posted", "recvs_completed", "receivers_empty", "receivers_traced"}},
	DiagOverflowRNR: {"sq_overflow_rnr_retry", SevError,
		[]string{"outstanding", "max_send_wr", "sends_posted", "wrs_posted"}},
	DiagOverflowNotCompleting: {"sq_overflow_not_completing", SevError,
		[]string{"outstanding", "max_send_wr", "wrs_posted"}},
	DiagOverflowInferred: {"sq_overflow_inferred", SevError,
		[]string{"outstanding", "max_send_wr", "signaled_outstanding", "wrs_posted", "signaled", "unsignaled_run"}},
	DiagENOMEMUnexplained: {"enomem_cause_unknown", SevError,
		[]string{"wr_index", "outstanding", "max_send_wr", "num_sge", "max_send_sge", "inline_bytes", "max_inline_data", "caps_known"}},
	DiagOverflowAtSite: {"sq_overflow_at_error_site", SevError,
		[]string{"max_send_wr", "num_sge", "inline_bytes", "qp_state", "refusals"}},
}

// DiagKindNames are the names of every diagnosis kind (Diagnosis.Kind),
// each with its severity.
func DiagKindNames() (names, severities []string) {
	for k := range numDiagKinds {
		names = append(names, diagInfos[k].name)
		severities = append(severities, diagInfos[k].severity)
	}
	return names, severities
}

// DiagKindNamed finds the kind a diagnosis names (Diagnosis.Kind).
func DiagKindNamed(name string) (DiagKind, bool) {
	for k := range numDiagKinds {
		if diagInfos[k].name == name {
			return k, true
		}
	}
	return 0, false
}

func (k DiagKind) String() string {
	if k < numDiagKinds {
		return diagInfos[k].name
	}
	return fmt.Sprintf("diag(%d)", uint8(k))
}

// Diagnosis is one finding about one QP: what happened (or is about to),
// when, the numbers that show it, and the fix. Repeats of the same kind on
// the same QP are folded into one, with a count.
type Diagnosis struct {
	Kind     string `json:"kind"`
	Severity string `json:"severity"` // error, warning or prediction
	PID      uint32 `json:"pid"`
	QPNum    uint32 `json:"qp_num"`
	FirstNS  uint64 `json:"first_ns"` // trace time (CLOCK_MONOTONIC) of the first occurrence
	LastNS   uint64 `json:"last_ns"`
	// FirstS and LastS are the same times in seconds since the trace's
	// first event; FirstWall and LastWall the wall-clock times (RFC 3339),
	// absent when the trace has no tie to the wall clock.
	FirstS    float64 `json:"first_s"`
	LastS     float64 `json:"last_s"`
	FirstWall string  `json:"first_wall,omitempty"`
	LastWall  string  `json:"last_wall,omitempty"`
	Count     uint64  `json:"count"`
	// Evidence holds the numbers of the last occurrence.
	Evidence map[string]uint64 `json:"evidence"`
	Message  string            `json:"message"`
	Fix      string            `json:"fix"`
	// CauseBasis says what the cause rests on where it is not the
	// provider's own checks: CauseInferred (the generic model).
	CauseBasis string `json:"cause_basis,omitempty"`
}

type evidence [maxEvidence]uint64

// diagRec is a diagnosis as the analyzer keeps it: numbers only, so that a
// failure repeated in a loop costs no allocation; text is made on Snapshot.
type diagRec struct {
	kind        DiagKind
	pid, qpNum  uint32
	first, last uint64
	count       uint64
	ev          evidence
	inferred    bool // the cause inferred from caps (provider_generic.go)
}

// record folds one occurrence into the QP's diagnosis of that kind.
func (a *Analyzer) record(q *sq, kind DiagKind, now uint64, ev evidence) {
	a.recordAs(q, kind, now, ev, false)
}

// recordAs is record of a cause inferred from caps, or not.
func (a *Analyzer) recordAs(q *sq, kind DiagKind, now uint64, ev evidence, inferred bool) {
	if a.firstRecorded != nil && *a.firstRecorded == numDiagKinds {
		*a.firstRecorded = kind // kernsq.go: the diagnosis a failed post made
	}
	if i := q.diags[kind]; i >= 0 {
		r := &a.diags[i]
		r.count++
		r.last = max(r.last, now)
		r.ev = ev
		return
	}
	if len(a.diags) >= MaxDiagnoses {
		a.snap.DiagnosesDropped++
		return
	}
	a.diags = append(a.diags, diagRec{kind: kind, pid: q.key.pid, qpNum: q.key.qpNum,
		first: now, last: now, count: 1, ev: ev, inferred: inferred})
	q.diags[kind] = int32(len(a.diags) - 1)
	if a.opts.OnDiagnosis != nil {
		a.opts.OnDiagnosis(a.diags[len(a.diags)-1].export(a.clock()))
	}
}

// afterPost looks for what a post call revealed.
func (a *Analyzer) afterPost(q *sq, p *trace.Post, cause errCause, n int) {
	now := p.TimeNS
	f := n // the WR the post failed at
	if cause != causeNone {
		f = q.failWR
	}
	inferred := cause != causeNone && q.model().causeBasis() == CauseInferred
	switch cause {
	case causeSQFull:
		a.diagnoseOverflow(q, now)
	case causeInline:
		var bytes uint64
		if f < len(p.WRs) {
			bytes = uint64(p.WRs[f].Bytes)
		}
		if q.caps.MaxInlineData == 0 {
			q.inlineNever++
			q.inlineNeverNoted = q.inlineNever
			a.recordAs(q, DiagInlineUnsupported, now, evidence{uint64(f), bytes, 0, q.inlineNever}, inferred)
		} else {
			a.recordAs(q, DiagInlineTooBig, now, evidence{uint64(f), bytes, uint64(q.caps.MaxInlineData)}, inferred)
		}
	case causeSGE:
		a.recordAs(q, DiagTooManySGE, now, evidence{uint64(f), uint64(p.WRs[f].NumSGE), uint64(q.caps.MaxSendSGE)}, inferred)
	case causeNotRTS:
		a.recordNotRTS(q, p, n, inferred)
	case causeUnknownENOMEM:
		q.model().unexplained(a, q, p, f)
	case causeEINVAL:
		op := noValue
		if f < len(p.WRs) {
			op = uint64(p.WRs[f].Opcode)
		}
		a.record(q, DiagEINVAL, now, evidence{uint64(f), op, uint64(q.typ)})
	}
	if q.inlineNever != q.inlineNeverNoted {
		// inline WRs the provider took although the QP reports no inline
		// room: a provider that ignores the caps, or caps misread
		q.inlineNeverNoted = q.inlineNever
		a.record(q, DiagInlineUnsupported, now, evidence{noValue, noValue, 0, q.inlineNever})
	}
	if q.sigAll && q.sigAllFlagged > 0 && q.sigAllUnflagged > q.sigAllNoted {
		q.sigAllNoted = q.sigAllUnflagged
		a.record(q, DiagSigAllFlag, now, evidence{q.sigAllFlagged, q.sigAllUnflagged})
	}
	a.checkNotTraced(q, now)
	a.notePending(q, now)
	if q.runWarnPending && q.slotRule() == SlotFreedByCQE { // the run alone fills the SQ
		q.runWarnPending = false
		d := q.depth()
		a.record(q, DiagRunNearDepth, now, evidence{q.curRun, d, 100 * q.curRun / d, q.outstanding()})
	}
	a.checkTrend(q, now)
}

// checkNotTraced says when the QP's own numbers show calls the trace did
// not see: completions that match no WR, wr batches that rang a doorbell
// for no WR, or more WRs outstanding than the SQ holds without an SQ-full
// error (by the mlx5 rule that a slot is freed only by a completion).
func (a *Analyzer) checkNotTraced(q *sq, now uint64) {
	// not when nothing is new, which notTraced would find too: no WR
	// retired past the depth, both counts as noted
	if q.overSeen != 0 || q.notTracedNoted != [2]uint64{q.c.UnmatchedCQEs, q.c.EmptyWRBatches} {
		a.notTraced(q, now)
	}
}

func (a *Analyzer) notTraced(q *sq, now uint64) {
	over := q.overSeen > 0 && q.capsKnown && !q.sendCapsInferred && q.slotRule() == SlotFreedByCQE
	seen := q.overSeen
	q.overSeen = 0
	if !over && q.c.UnmatchedCQEs == q.notTracedNoted[0] && q.c.EmptyWRBatches == q.notTracedNoted[1] {
		return
	}
	if over && q.notTracedOver && q.c.UnmatchedCQEs == q.notTracedNoted[0] && q.c.EmptyWRBatches == q.notTracedNoted[1] {
		return // said already; a new occurrence is a new count below
	}
	q.notTracedOver = over
	q.notTracedNoted = [2]uint64{q.c.UnmatchedCQEs, q.c.EmptyWRBatches}
	if a.postsDirect(q) {
		a.record(q, DiagPostsNotTraced, now, evidence{q.c.CQEsPolled, q.c.UnmatchedCQEs, q.depth()})
		return
	}
	out := q.outstanding()
	if over {
		out = seen
	}
	a.record(q, DiagCallsNotTraced, now, evidence{out, q.depth(), q.c.UnmatchedCQEs, q.c.EmptyWRBatches})
}

// checkPeakOverCaps says, when a QP's caps arrive after WRs were posted
// to it (its create seen again in a recording without generations), that
// more WRs were outstanding than the depth it reports: calls not traced.
func (a *Analyzer) checkPeakOverCaps(q *sq, now uint64) {
	if q.c.PeakOutstanding <= q.depth() {
		return
	}
	q.notTracedOver = q.outstanding() > q.depth()
	q.notTracedNoted = [2]uint64{q.c.UnmatchedCQEs, q.c.EmptyWRBatches}
	a.record(q, DiagCallsNotTraced, now, evidence{q.c.PeakOutstanding, q.depth(), q.c.UnmatchedCQEs, q.c.EmptyWRBatches})
}

// checkTrend makes the trend prediction when a history window has closed.
func (a *Analyzer) checkTrend(q *sq, now uint64) {
	if q.hist.closed {
		a.windowClosed(q, now)
	}
}

func (a *Analyzer) windowClosed(q *sq, now uint64) {
	if q.slotRule() != SlotFreedByCQE { // the WRs outstanding are the occupancy only where a CQE frees a slot
		q.hist.closed = false
		return
	}
	q.hist.closed = false
	d := q.depth()
	due := noValue
	if o, ok := q.sigOldest(); ok {
		due = o.ns
	}
	from, to, eta, ok := q.hist.trend(d, due)
	if !ok {
		return
	}
	span := (trendWindows - 1) * q.hist.step
	a.record(q, DiagTrendingFull, now, evidence{from, to, d, span / 1e6, (to - from) * 1e9 / span, eta / 1e6})
}

// diagnoseOverflow finds why the SQ was full: a starved receiver, else
// what the QP's provider model says.
func (a *Analyzer) diagnoseOverflow(q *sq, now uint64) {
	if a.checkStarved(q, now) {
		return // the SENDs wait for receives: not a completion-side cause
	}
	if a.snap.Sentinel != nil && q.lowerBound() && q.c.WRs == 0 {
		return // no post seen taken: the window shows no history (sentinel.go)
	}
	q.model().overflow(a, q, now)
}

// opcodeName names the opcodes the model knows; others are shown as numbers.
func opcodeName(op uint64) string {
	if op <= math.MaxUint8 && modeledOp(uint8(op)) {
		return ibv.OpName(uint8(op))
	}
	return fmt.Sprint(op)
}

// half is the interval to recommend: half the depth, at least 1.
func half(d uint64) uint64 { return max(d/2, 1) }

// traceClock places event times: in the trace (from its first event) and
// on the wall clock.
type traceClock struct {
	start  uint64
	anchor trace.WallAnchor
}

func (a *Analyzer) clock() traceClock {
	return traceClock{start: a.snap.FirstNS, anchor: a.opts.Clock}
}

// seconds is how far into the trace the event time ns is.
func (c traceClock) seconds(ns uint64) float64 { return float64(ns-min(c.start, ns)) / 1e9 }

// wall is the wall-clock time of ns in RFC 3339, "" when unknown.
func (c traceClock) wall(ns uint64) string {
	t, ok := c.anchor.At(ns)
	if !ok {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// rel writes the event time ns as seconds into the trace.
func (c traceClock) rel(ns uint64) string { return RelTime(c.seconds(ns)) }

// RelTime writes seconds into the trace as "+1.234 s": milliseconds from a
// second on, microseconds from a millisecond, nanoseconds below.
func RelTime(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("+%.3f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("+%.6f s", s)
	}
	return fmt.Sprintf("+%.9f s", s)
}

// export turns the record into a Diagnosis with its text.
func (r *diagRec) export(c traceClock) Diagnosis {
	info := &diagInfos[r.kind]
	d := Diagnosis{Kind: info.name, Severity: info.severity, PID: r.pid, QPNum: r.qpNum,
		FirstNS: r.first, LastNS: r.last, FirstS: c.seconds(r.first), LastS: c.seconds(r.last),
		FirstWall: c.wall(r.first), LastWall: c.wall(r.last), Count: r.count, Evidence: map[string]uint64{}}
	for i, name := range info.evidence {
		if r.ev[i] != noValue {
			d.Evidence[name] = r.ev[i]
		}
	}
	e := &r.ev
	switch r.kind {
	case DiagOverflowNeverSignaled:
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM): %d of %d WRs outstanding and none of the %d WRs posted was signaled, so no CQE can ever retire them",
			e[0], e[1], e[2])
		d.Fix = fmt.Sprintf("Set IBV_SEND_SIGNALED on at least one WR in every %d (half of max_send_wr) and poll the send CQ, or create the QP with sq_sig_all=1.", half(e[1]))
	case DiagOverflowUnsignaledRun:
		typical := "" // not known in counters mode, which sees no run end
		if e[3] != noValue {
			typical = fmt.Sprintf(" (typical signal interval %d)", e[3])
		}
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM): %d of %d WRs outstanding, all unsignaled: the last %d WRs posted carried no IBV_SEND_SIGNALED%s, so no CQE can retire them",
			e[0], e[1], e[2], typical)
		d.Fix = fmt.Sprintf("Signal at least one WR in every %d (half of max_send_wr) so that a CQE retires the queue before it fills.", half(e[1]))
	case DiagOverflowCQNotPolled:
		cq := "the send CQ"
		if e[4] != 0 {
			cq = fmt.Sprintf("send CQ %#x", e[4])
		}
		last := "has never been polled"
		if e[5] != noValue {
			last = "has not been polled since " + c.rel(e[5])
		}
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM): %d of %d WRs outstanding; %d signaled WRs among them (the oldest posted at %s) but %s %s, so their CQEs are never consumed",
			e[0], e[1], e[2], c.rel(e[3]), cq, last)
		d.Fix = fmt.Sprintf("Poll the send CQ regularly, at least once every %d WRs posted (half of max_send_wr), so its CQEs retire the queue.", half(e[1]))
	case DiagOverflowPollsTooRare:
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM): %d of %d WRs outstanding although send CQ %#x is polled: about %d WRs posted per poll (%d WRs, %d polls; %d WR/s posted, %d polls/s), too few polls to retire them in time",
			e[0], e[1], e[2], e[5], e[3], e[4], e[6], e[7])
		d.Fix = fmt.Sprintf("Poll the send CQ at least once every %d WRs posted (half of max_send_wr), e.g. after every post call, and drain it (a larger num_entries).", half(e[1]))
	case DiagOverflowCompletionsSlow:
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM): %d of %d WRs outstanding; send CQ %#x was polled %d times since the oldest outstanding signaled WR was posted (at %s) and every poll came back empty: WRs are posted (%d WR/s) faster than they complete",
			e[0], e[1], e[2], e[4], c.rel(e[3]), e[5])
		d.Fix = "Create the QP with a larger max_send_wr (at least the post rate times the completion latency), or wait for completions before posting more."
	case DiagInlineTooBig:
		d.Message = fmt.Sprintf("ENOMEM: WR %d of the list asked to inline %d bytes, more than the QP's max_inline_data %d", e[0], e[1], e[2])
		d.Fix = fmt.Sprintf("Post payloads over %d bytes without IBV_SEND_INLINE, or create the QP with cap.max_inline_data >= %d and use the value it reports.", e[2], e[1])
	case DiagInlineUnsupported:
		if e[0] == noValue {
			d.Message = fmt.Sprintf("%d WRs were posted with IBV_SEND_INLINE on a QP that reports max_inline_data 0: it can never send inline", e[3])
		} else {
			d.Message = fmt.Sprintf("ENOMEM: WR %d of the list asked to inline %d bytes on a QP that reports max_inline_data 0: it can never send inline", e[0], e[1])
		}
		d.Fix = "Drop IBV_SEND_INLINE on this QP, or create it with cap.max_inline_data > 0 and check the value ibv_create_qp reports back."
	case DiagTooManySGE:
		d.Message = fmt.Sprintf("ENOMEM: WR %d of the list has %d SGEs, more than the QP's max_send_sge %d", e[0], e[1], e[2])
		d.Fix = fmt.Sprintf("Use at most %d SGEs per WR, or create the QP with cap.max_send_sge >= %d.", e[2], e[1])
	case DiagEINVAL:
		typ := trace.QPType(e[2]).String()
		switch {
		case e[1] == noValue:
			d.Message = fmt.Sprintf("EINVAL: WR %d of the list was refused (past the tracer's list bound, opcode not recorded)", e[0])
			d.Fix = "Check the WR's opcode and flags against the QP type."
		case !opcodeValid(trace.QPType(e[2]), uint8(e[1])):
			d.Message = fmt.Sprintf("EINVAL: WR %d of the list has opcode %s, which %s QPs do not support", e[0], opcodeName(e[1]), typ)
			d.Fix = fmt.Sprintf("Use an opcode that %s QPs support.", typ)
			if trace.QPType(e[2]) == trace.QPTypeUD {
				d.Fix = "Use SEND or SEND_WITH_IMM: UD QPs support no other opcode."
			}
		default:
			d.Message = fmt.Sprintf("EINVAL: WR %d of the list (opcode %s on a %s QP) was refused", e[0], opcodeName(e[1]), typ)
			d.Fix = "Check the WR's flags and fields against the QP type and its state."
		}
	case DiagSigAllFlag:
		d.Message = fmt.Sprintf("the QP was created with sq_sig_all=1, so the %d WRs posted without IBV_SEND_SIGNALED wrote a CQE anyway (%d WRs carried the flag): the flag means nothing here",
			e[1], e[0])
		d.Fix = "Create the QP with sq_sig_all=0 so that WRs without IBV_SEND_SIGNALED skip their CQE."
	case DiagRunNearDepth:
		d.Message = fmt.Sprintf("%d WRs posted in a row without IBV_SEND_SIGNALED, %d%% of max_send_wr %d: the SQ overflows if no signaled WR follows within %d WRs",
			e[0], e[2], e[1], e[1]-min(e[0], e[1]))
		d.Fix = fmt.Sprintf("Signal at least one WR in every %d (half of max_send_wr).", half(e[1]))
	case DiagPostsNotTraced:
		d.Message = fmt.Sprintf("posts not traced: direct verbs. %d send completions of this QP were polled (%d matching no WR) while no post call on it was traced since its create, with the post probes of its provider in place: its WQEs are built and its doorbell rung without ibv_post_send or ibv_wr_* (direct verbs, as mlx5dv under UCX's rc_mlx5 and dc_mlx5 transports and DPDK's mlx5 driver post), so its WRs, occupancy, inline and signaled shares, doorbells and PCIe figures are not seen: only its completions are",
			e[0], e[1])
		d.Fix = "sqscope cannot see WQEs written to the send queue directly: judge this QP by its completions, or run the application on a transport that posts through ibv_post_send (UCX: UCX_TLS=rc_verbs instead of rc_mlx5) while tracing it; where the provider's counters are read from memory (--mode sentinel, simulated HCA) the WRs posted and the occupancy are still read."
	case DiagCallsNotTraced:
		var what []string
		if e[0] > e[1] {
			what = append(what, fmt.Sprintf("%d WRs outstanding, more than max_send_wr %d, with no SQ-full error: completions were polled through calls the trace did not see (or the provider frees a slot before its completion, as rxe does)", e[0], e[1]))
		}
		if e[2] > 0 {
			what = append(what, fmt.Sprintf("%d completions matched no WR the trace saw posted", e[2]))
		}
		if e[3] > 0 {
			what = append(what, fmt.Sprintf("%d ibv_wr_complete calls rang a doorbell for WRs the trace did not see being built", e[3]))
		}
		d.Message = "the trace misses calls on this QP: " + strings.Join(what, "; ")
		d.Fix = "Look at the probes the report lists as NOT ATTACHED or not traced: the counts of this QP leave out the calls made through them."
	case DiagQPNotRTS, DiagCQOverrunRisk, DiagCQOverrun:
		if r.inferred && r.kind == DiagQPNotRTS {
			exportNotRTSInferred(r, &d)
			break
		}
		r.exportState(&d)
	case DiagRQStarved, DiagRNRRetryExceeded:
		r.exportRecv(&d)
	case DiagOverflowRNR, DiagOverflowNotCompleting:
		exportRxe(r, &d)
	case DiagOverflowInferred, DiagENOMEMUnexplained:
		exportGeneric(r, &d)
	case DiagOverflowAtSite:
		exportAtSite(r, &d)
	case DiagTrendingFull:
		d.Message = fmt.Sprintf("SQ occupancy (its peak in each window) grew from %d to %d of %d WRs over the last %d ms (%d WR/s): full in about %d ms at this rate",
			e[0], e[1], e[2], e[3], e[4], e[5])
		d.Fix = "Poll the send CQ more often, or signal more WRs, so completions keep up with posting."
	}
	if r.inferred {
		d.CauseBasis = CauseInferred
		d.Message += inferredNote
	}
	return d
}

// diagnoses returns the diagnoses, newest first (an empty list, not nil,
// so that JSON shows []).
func (a *Analyzer) diagnoses() []Diagnosis {
	if len(a.diags) == 0 {
		return []Diagnosis{}
	}
	// records are in order of first occurrence; later ones win ties
	idx := make([]int, len(a.diags))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool {
		ri, rj := &a.diags[idx[i]], &a.diags[idx[j]]
		if ri.last != rj.last {
			return ri.last > rj.last
		}
		return idx[i] > idx[j]
	})
	out := make([]Diagnosis, len(idx))
	c := a.clock()
	for i, k := range idx {
		out[i] = a.diags[k].export(c)
	}
	return out
}

// postsDirect says whether q's completions come with no post call ever
// traced on it, its create seen and the post probes in place without a
// failure: its WQEs are written directly (direct verbs), not through a
// call the trace misses.
func (a *Analyzer) postsDirect(q *sq) bool {
	c := &q.c
	return a.postProbed && !a.postFailed && q.found == FoundCreate && c.UnmatchedCQEs > 0 &&
		c.PostCalls == 0 && c.WRs == 0 && c.WRAPICalls == 0 && c.EmptyWRBatches == 0 && c.Aborted == 0
}
