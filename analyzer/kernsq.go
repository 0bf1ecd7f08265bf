package analyzer

import (
	"github.com/sqscope/sqscope/trace"
)

// The counters mode's send queue kept in the kernel (trace.SQModel, from
// bpf/occupancy.bpf.h): the WRs posted and retired, the peak, the
// unsignaled runs and the signaled WRs outstanding come with each QP's
// totals (trace.QPCounters field SQ), and each failed post with the queue
// after it (trace.PostFail field Counted). The analyzer takes them as the
// QP's occupancy, and a failed post's cause and diagnosis from the same
// provider model as events mode's, against the queue the call found.
//
// What needs per-call history stays with events mode: the occupancy
// histogram and its trend, the typical signal interval, the opcodes (rxe's
// RNR diagnosis), BlueFlame and WQE sizes. The CQ polls since the oldest
// signaled WR outstanding are those of the CQ's totals at their flushes
// (to the flush interval: a poll less than one interval before the WR was
// posted may count as after it).

// SQModelCuts are the kernel send-queue model's bounds over the whole
// trace: CQEsUnread, completions of polls past trace.SigWCs it did not
// look at (a later completion of the same QP retired their WRs);
// QPsNotKept, QPs its map had no room for (their occupancy not measured).
type SQModelCuts struct {
	CQEsUnread uint64 `json:"cqes_unread,omitempty"`
	QPsNotKept uint64 `json:"qps_not_kept,omitempty"`
}

// kernSQ is a counters-mode QP's last kernel model.
type kernSQ struct {
	m trace.SQModel
	// failed posts counted from the model's repeats, and the cause of the
	// last one classified, which the repeats share
	repeats   uint64
	lastErrno int32
	lastCause errCause
	haveLast  bool
	lastDiag  DiagKind // the diagnosis of the last one (numDiagKinds: none)
	runSaid   bool     // a run near the depth was said
}

// cqSample is a CQ's totals at one flush (counters mode).
type cqSample struct{ ns, polls, empty uint64 }

// cqSamples is how many flushes of a CQ are kept: the oldest signaled WR
// of an overflowing queue was posted within the last of them, or the CQ's
// earliest is taken.
const cqSamples = 16

// noteSample keeps the CQ's totals at a flush. Of a run of flushes that
// found them unchanged the first and the last are kept.
func (c *cqState) noteSample(ns uint64) {
	if n := len(c.samples); n > 0 && ns <= c.samples[n-1].ns {
		return
	}
	if n := len(c.samples); n > 1 && c.samples[n-1].polls == c.polls && c.samples[n-1].empty == c.empty &&
		c.samples[n-2].polls == c.polls && c.samples[n-2].empty == c.empty {
		c.samples[n-1].ns = ns
		return
	}
	if len(c.samples) == cqSamples {
		copy(c.samples, c.samples[1:])
		c.samples = c.samples[:cqSamples-1]
	}
	c.samples = append(c.samples, cqSample{ns, c.polls, c.empty})
}

// at is the CQ's totals as of ns: those of the last flush at or before
// it; ok when there was one, and one after it (the CQ's totals since ns
// are then known, to the flush interval).
func (c *cqState) at(ns uint64) (polls, empty uint64, ok bool) {
	n := len(c.samples)
	if n == 0 || c.samples[n-1].ns <= ns {
		return 0, 0, false
	}
	for i := n - 1; i >= 0; i-- {
		if c.samples[i].ns <= ns {
			return c.samples[i].polls, c.samples[i].empty, true
		}
	}
	if c.createdNS == 0 || c.createdNS > ns {
		return 0, 0, false
	}
	return 0, 0, true // created in the trace, not polled before its first flush
}

// kernUsable reports whether q's occupancy is the kernel's model.
func (q *sq) kernUsable() bool { return q.kern != nil && q.kern.m.Kept && q.kernWhy() == "" }

// kernWhy says why the kernel's model of q is not its occupancy ("": it
// is). Asked each time: what its send CQ is may be learnt after the model.
func (q *sq) kernWhy() string {
	if q.kern == nil {
		return ""
	}
	m := &q.kern.m
	switch {
	case m.WRAPI:
		return "posts through the ibv_wr_* API, which the kernel's send-queue model does not follow"
	case q.cq != nil && (q.cq.ex || q.cq.exCQEs > 0):
		return "its send CQ is polled with ibv_start_poll (an extended CQ), whose completions the kernel's send-queue model does not see"
	case m.Err:
		return "an error completion matched no signaled WR the kernel kept: the WRs it flushed are not known"
	}
	return ""
}

// kernApply takes the kernel's model of q, read at now; flushed when it
// came with the QP's totals, after its CQs' (whose totals are then those
// as of now: a flush reports a CQ's only when they changed).
func (a *Analyzer) kernApply(q *sq, m *trace.SQModel, now uint64, flushed bool) {
	if !m.Kept {
		return
	}
	k := q.kern
	if k == nil {
		k = &kernSQ{}
		q.kern = k
	}
	if m.SendCQ != 0 && q.cq == nil {
		q.sendCQ, q.cq = m.SendCQ, a.cq(q.key.pid, m.SendCQ)
	}
	if flushed && q.cq != nil {
		q.cq.noteSample(now)
	}
	k.m = *m
	if d := m.FailRepeats - min(k.repeats, m.FailRepeats); d > 0 && k.haveLast {
		q.countCauses(k.lastErrno, k.lastCause, d)
		if k.lastDiag < numDiagKinds && q.diags[k.lastDiag] >= 0 { // the same diagnosis, d times more
			r := &a.diags[q.diags[k.lastDiag]]
			r.count += d
			r.last = max(r.last, now)
		}
	}
	k.repeats = max(k.repeats, m.FailRepeats)
	if q.kernWhy() != "" {
		return
	}
	if q.firstPost == 0 {
		q.firstPost = max(q.createdNS, a.snap.FirstNS)
	}
	q.head, q.tail = m.Posted, m.Posted-m.Outstanding()
	q.c.PeakOutstanding = max(q.c.PeakOutstanding, m.Peak)
	q.c.LongestUnsignaledRun = max(q.c.LongestUnsignaledRun, m.LongestRun)
	q.curRun = m.CurRun
	q.c.CQEsPolled, q.c.CQEErrors = m.SendCQEs, m.CQEErrors
	q.c.Cuts.SignaledUnkept = m.Unkept
	if m.WCsPast+m.Full > 0 {
		c := a.snap.SQModelCuts
		if c == nil {
			c = &SQModelCuts{}
			a.snap.SQModelCuts = c
		}
		c.CQEsUnread, c.QPsNotKept = max(c.CQEsUnread, m.WCsPast), max(c.QPsNotKept, m.Full)
	}
	a.notePending(q, now)
	a.kernRunCheck(q, now)
}

// kernRunCheck says, once, an unsignaled run that alone comes near the
// depth (as events mode does at the post that makes it).
func (a *Analyzer) kernRunCheck(q *sq, now uint64) {
	k := q.kern
	if k.runSaid || q.slotRule() != SlotFreedByCQE || !q.capsKnown {
		return
	}
	// Events mode says it when a run grows past every run ended before it
	// and 3/4 of the depth, or, before any WR was signaled, 7/8: the
	// longest run grew past all before it, so it did if it reached 3/4
	// after the first signaled WR, or 7/8 as the first run.
	d, run := q.depth(), k.m.LongestRun
	at := nearFullAt(d)
	if run <= k.m.FirstRun {
		at = firstRunWarnAt(d)
	}
	if at >= d || run < at {
		return
	}
	k.runSaid = true
	a.record(q, DiagRunNearDepth, now, evidence{run, d, 100 * run / d, q.outstanding()})
}

// signaledNow is the signaled WRs posted: the kernel's model counts them
// at each post, the totals at their flushes.
func (q *sq) signaledNow() uint64 {
	if q.kernUsable() && !q.sigAll {
		return max(q.c.Signaled, q.kern.m.Signaled)
	}
	return q.c.Signaled
}

// typicalEvidence is the typical signal interval as evidence: not known
// from the kernel's model, which keeps no runs but the longest.
func (q *sq) typicalEvidence() uint64 {
	if q.kernUsable() {
		return noValue
	}
	return q.typicalInterval()
}

// kernSigOutstanding counts the signaled WRs outstanding by the kernel's
// model: every WR of an sq_sig_all QP.
func (q *sq) kernSigOutstanding() uint64 {
	if q.sigAll || q.kern.m.SigAll {
		return q.outstanding()
	}
	return q.kern.m.SigOutstanding + min(q.kern.m.Unkept, q.outstanding())
}

// kernSigOldest is the oldest signaled WR outstanding by the kernel's
// model, with its send CQ's totals as of its post.
func (q *sq) kernSigOldest() (sigEntry, bool) {
	m := &q.kern.m
	if m.OldestSigNS == 0 || q.kernSigOutstanding() == 0 {
		return sigEntry{}, false
	}
	e := sigEntry{seq: q.tail, ns: m.OldestSigNS, pollsUnknown: true}
	if q.cq != nil {
		var ok bool
		e.polls, e.empty, ok = q.cq.at(m.OldestSigNS)
		e.pollsUnknown = !ok
	}
	return e, true
}

// onCountedFail applies a failed post of the counters mode: the queue
// after it, then the call's cause from the provider model against the
// queue it found (its accepted WRs not yet in), as events mode does at
// the post's return.
func (a *Analyzer) onCountedFail(e *trace.PostFail) {
	q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
	q.noteFound(FoundCounters)
	q.countersOnly = true
	a.resolveProvider(q)
	a.kernApply(q, &e.SQ, e.TimeNS, false)
	q.lastNS = max(q.lastNS, e.TimeNS)
	p := &a.sentinel.post
	wrs := p.WRs[:0]
	n := int(min(e.Accepted, maxModelDepth))
	*p = trace.Post{Header: e.Header, QP: e.QP, QPNum: e.QPNum, Ret: e.Errno, Accepted: uint32(n), WalkCapped: e.WalkCapped}
	for range n {
		wrs = append(wrs, trace.WR{ID: ^uint64(0)}) // taken: their shape is in the totals
	}
	if e.HasWR {
		wrs = append(wrs, e.WR)
	}
	p.WRs = wrs
	q.failWR = n
	var cause errCause
	if q.kernUsable() {
		q.head -= min(uint64(n), q.outstanding())
		cause = q.cause(p, n)
		q.head = e.SQ.Posted
	} else {
		cause = q.model().refused(q, e) // the WR against the caps and the state
	}
	q.countCauses(e.Errno, cause, 1)
	k := q.kern
	if k == nil {
		k = &kernSQ{}
		q.kern = k
	}
	k.lastErrno, k.lastCause, k.haveLast, k.lastDiag = e.Errno, cause, true, numDiagKinds
	if cause == causeSQFull && !q.kernUsable() {
		return // no occupancy to tell why it was full
	}
	a.firstRecorded = &k.lastDiag
	a.afterPost(q, p, cause, n)
	a.firstRecorded = nil
}

// countCauses counts the causes of n failed calls of one errno and
// cause; their errnos are in the kernel's totals already (onQPCounters).
func (q *sq) countCauses(ret int32, cause errCause, n uint64) {
	before := q.c
	q.countCause(ret, cause)
	m := n - 1
	add := func(after, was *uint64) { *after += (*after - *was) * m }
	add(&q.c.ENOMEMSQFull, &before.ENOMEMSQFull)
	add(&q.c.ENOMEMInline, &before.ENOMEMInline)
	add(&q.c.ENOMEMSGE, &before.ENOMEMSGE)
	add(&q.c.ENOMEMUnknown, &before.ENOMEMUnknown)
	add(&q.c.NotRTS, &before.NotRTS)
	q.c.ENOMEM, q.c.EINVAL, q.c.OtherErrors = before.ENOMEM, before.EINVAL, before.OtherErrors
}
