package analyzer

import "github.com/sqscope/sqscope/trace"

// MemorySQ is what the sentinel read of a QP's send-queue counters in its
// process's memory (trace.SQSample), without a trap: the occupancy the
// provider's SQ-full check sees and the WRs posted, traced or not.
type MemorySQ struct {
	Samples uint64 `json:"samples"`
	// Outstanding is posted - retired at the last sample (AtNS): with
	// Capacity, the WRs in the ring (not yet completed), else those not
	// retired by a polled completion; Peak the highest of the samples, a
	// lower bound of the queue's peak between them.
	Outstanding uint64 `json:"outstanding"`
	AtNS        uint64 `json:"at_ns"`
	Peak        uint64 `json:"peak_sampled"`
	// Posted is the QP's count of WRs posted at the last sample: all of
	// them since its create when the trace saw the create (FromCreate).
	Posted     uint64 `json:"posted"`
	FromCreate bool   `json:"posted_since_create"`
	// WRs were posted between the first sample and the last, SpanS apart:
	// WRPerS, every WR, whether a probe saw it or not (absent with one
	// sample).
	WRs    uint64  `json:"wrs_between_samples"`
	SpanS  float64 `json:"span_s"`
	WRPerS float64 `json:"wrs_per_s,omitempty"`
	// Dropped: samples whose difference was over what the queue holds
	// (the two words read while the queue moved a whole depth), left out.
	Dropped uint64 `json:"dropped,omitempty"`
	// Capacity: what the queue holds as its reads give it (rxe: its
	// ring's slots less one, more than the max_send_wr it reports);
	// absent where that is the QP's max_send_wr.
	Capacity uint32 `json:"capacity,omitempty"`
	// PostedIncludesRefused: the provider counts a WR before its SQ-full
	// check (librxe's send sequence number), so Posted and the rate
	// include the WRs a full queue refused.
	PostedIncludesRefused bool `json:"posted_includes_refused,omitempty"`
	// CQErrors: the times the QP's send CQ overran by the provider's own
	// count, where it keeps one in memory (the simulated HCA); absent
	// where it keeps none.
	CQErrors *uint64 `json:"cq_errors,omitempty"`
	// SignaledPending: the QP's signaled WRs posted less its send
	// completions polled, by the provider's own counts at the last read
	// where it keeps them (the simulated HCA): what it has pending on
	// its send CQ; absent where it keeps none.
	SignaledPending *uint64 `json:"signaled_pending,omitempty"`
	// SendCQFill is what the QP's send CQ held unpolled at the last read
	// and SendCQCapacity the most it holds, where the CQ is a ring read
	// in memory (rxe); SendCQFullReads the reads that found it full (it
	// takes no more completions: rxe drops them); absent elsewhere.
	SendCQFill      *uint32 `json:"send_cq_fill,omitempty"`
	SendCQCapacity  uint32  `json:"send_cq_capacity,omitempty"`
	SendCQFullReads uint64  `json:"send_cq_full_reads,omitempty"`
}

// MemoryPostedKey names the WRs posted as the reads of the QP's counters
// gave them (MemorySQ field Posted) for Reported: a QP has it only when
// its counters were read.
const MemoryPostedKey = "memory.posted"

// memSQ is what the samples of a QP gave so far; memory derives the
// rest.
type memSQ struct {
	MemorySQ
	firstNS, firstPosted uint64
	raw                  uint64 // the last Posted as read, to unwrap the next
	// sigCQ is the send CQ whose memPending holds sigNoted of this QP's
	// signaled pending (memSigPending)
	sigCQ    *cqState
	sigNoted uint64
}

// onSQSample takes a read of a QP's counters.
func (a *Analyzer) onSQSample(e *trace.SQSample) {
	q := a.lookupQP(qpKey{e.PID, e.QPNum})
	if q == nil || q.destroyed {
		return
	}
	mask := ^uint64(0)
	if e.Width < 8 {
		mask = 1<<(8*uint(e.Width)) - 1
	}
	out := (e.Posted - e.Retired) & mask
	m := q.mem
	if m == nil {
		m = &memSQ{firstNS: e.TimeNS, raw: e.Posted}
		m.Posted = e.Posted & mask
		m.firstPosted = m.Posted
		m.FromCreate = q.found == FoundCreate
		q.mem = m
	}
	m.Capacity, m.PostedIncludesRefused = e.Capacity, e.PostedCountsRefused
	if e.CQErrorsRead {
		a.memCQErrors(q, e)
	}
	if e.SignaledRead {
		a.memSigPending(q, e)
	}
	if e.CQRingRead {
		fill := e.CQFill
		m.SendCQFill, m.SendCQCapacity = &fill, e.CQCapacity
		if fill == e.CQCapacity {
			m.SendCQFullReads++
		}
	}
	if e.Capacity != 0 && out > uint64(e.Capacity) || e.Capacity == 0 && q.capsKnown && out > uint64(q.caps.MaxSendWR) {
		m.Dropped++
		return
	}
	m.Posted += (e.Posted - m.raw) & mask
	m.raw = e.Posted
	m.Samples++
	m.Outstanding, m.AtNS = out, e.TimeNS
	m.Peak = max(m.Peak, out)
	// between windows, the occupancy exported is the last read (in one,
	// the model's, traced as it goes); a ring's occupancy is not the WRs
	// whose completions were not polled (rxe frees a slot at completion)
	if w := a.sentinel.windows[e.PID]; e.Capacity == 0 && (w == nil || w.until != 0) {
		q.sampledOut, q.sampledNS, q.memOut = out, e.TimeNS, true
	}
}

// memory is what the samples of q gave, nil without any.
func (q *sq) memory() *MemorySQ {
	if q.mem == nil || q.mem.Samples == 0 {
		return nil
	}
	m := q.mem.MemorySQ
	m.WRs = m.Posted - q.mem.firstPosted
	if m.AtNS > q.mem.firstNS {
		m.SpanS = float64(m.AtNS-q.mem.firstNS) / 1e9
		m.WRPerS = float64(m.WRs) / m.SpanS
	}
	return &m
}

// OutstandingRead says whether Outstanding is the last read of the QP's
// counters in its process's memory (Memory), not a window's or the
// model's.
func (q *QP) OutstandingRead() bool {
	return q.OutstandingSampledNS != 0 && q.Memory != nil && q.Memory.AtNS == q.OutstandingSampledNS
}

// memCQErrors takes the provider's count of the QP's send CQ overruns: an
// overrun fails no post and the probes on the provider's error sites see
// nothing, so the read is how the sentinel knows; a count that grew is
// the cq_overrun diagnosis (the same kind events mode infers from the
// completions, which it keeps when it has them).
func (a *Analyzer) memCQErrors(q *sq, e *trace.SQSample) {
	m := q.mem
	was := uint64(0)
	if m.CQErrors != nil {
		was = *m.CQErrors
	}
	n := e.CQErrors
	m.CQErrors = &n
	if n <= was {
		return
	}
	if i := q.diags[DiagCQOverrun]; i >= 0 && a.diags[i].ev[7] == noValue {
		return // inferred from the completions: richer evidence
	}
	ev := evidence{noValue, noValue, noValue, noValue, noValue, noValue, noValue, n, noValue}
	if c := q.cq; c != nil {
		ev[2], ev[5] = c.addr, a.cqQPs(c)
		if c.cqe != 0 {
			ev[1] = uint64(c.cqe)
		}
	}
	a.record(q, DiagCQOverrun, e.TimeNS, ev)
}

// cqMemPending is, per CQ, the signaled completions its QPs have pending
// by the provider's counts read in memory (memSigPending), and whether
// the risk was said for it.
type cqMemPending struct {
	memPending  uint64
	memRiskSaid bool
}

// memSigPending takes the provider's counts of the QP's signaled WRs
// posted and its send completions polled: their difference is what the
// QP has pending on its send CQ, read without a trap between windows.
// The CQ's sum over its QPs past its depth is the cq_overrun_risk
// prediction events mode makes from the posts and polls (notePending):
// the CQ overruns unless polled before they all complete. It is said
// once per CQ until the sum falls below half the depth.
func (a *Analyzer) memSigPending(q *sq, e *trace.SQSample) {
	pend := e.Signaled - min(e.SendCQEsPolled, e.Signaled) // flushed WRs' completions may outnumber
	m := q.mem
	m.SignaledPending = &pend
	a.memSigMove(q, q.cq)
	c := q.cq
	if c == nil {
		return
	}
	moveShare(&c.memPending, &m.sigNoted, pend)
	d := uint64(c.cqe)
	if d == 0 {
		return // depth unknown: its create was not seen
	}
	if !riskDue(c.memPending, d, &c.memRiskSaid) || c.riskSaid {
		return // not due, or already said from the posts and polls of a window
	}
	a.record(q, DiagCQOverrunRisk, e.TimeNS, evidence{c.memPending, d, 100 * c.memPending / d, c.addr, a.cqQPs(c), 1})
}

// memSigMove takes q's share of pending completions off the CQ it was
// counted on, when that is not to (nil: q is gone).
func (a *Analyzer) memSigMove(q *sq, to *cqState) {
	m := q.mem
	if m == nil || m.sigCQ == to {
		return
	}
	if c := m.sigCQ; c != nil {
		c.memPending -= min(m.sigNoted, c.memPending)
	}
	m.sigCQ, m.sigNoted = to, 0
}
