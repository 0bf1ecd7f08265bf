package probe

import (
	"fmt"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// Object lifetimes (bpf/objects.bpf.h, bpf/lifecycle.bpf.h). Every QP, CQ
// and SRQ created while tracing has a generation; the kernel keeps the
// counters mode's per-QP totals by QP generation and each per-CQ count
// with its CQ's generation, and user space reports each under it: what a
// destroyed QP or a replaced CQ counted never runs into the next object
// at its address.

// cqGenKey is one CQ lifetime: a process, an address, a generation.
type cqGenKey struct {
	pid  uint32
	addr uint64
	gen  uint32
}

// objRecord acts on a CQ or SRQ lifecycle record.
func (t *Tracer) objRecord(r *bpf.VerbsSqObjRec, fn func(trace.Event)) {
	h := header(&r.Hdr)
	switch {
	case bpf.VerbsSqObjType(r.Type) == bpf.VerbsSqObjTypeSQ_OBJ_CQ && bpf.VerbsSqObjOp(r.Op) == bpf.VerbsSqObjOpSQ_OBJ_CREATE:
		// the CQ that held the address before: what it had not reported
		old := cqGenKey{r.Hdr.Pid, r.Addr, r.Prev.Gen}
		if p := r.Prev; p != (bpf.VerbsSqCqStats{}) {
			t.cqReport(h.TimeNS, old, p, fn)
		}
		t.cqForget(old)
		if old.gen != 0 {
			t.cqFinals[old] = r.Prev // what later counts of it add to
		}
		fn(&trace.CQCreate{Header: h, CQ: r.Addr, Gen: uint64(r.Gen), CQE: r.Size})
	case bpf.VerbsSqObjType(r.Type) == bpf.VerbsSqObjTypeSQ_OBJ_SRQ && bpf.VerbsSqObjOp(r.Op) == bpf.VerbsSqObjOpSQ_OBJ_CREATE:
		fn(&trace.SRQCreate{Header: h, SRQ: r.Addr, Gen: uint64(r.Gen), MaxWR: r.Size})
	case bpf.VerbsSqObjType(r.Type) == bpf.VerbsSqObjTypeSQ_OBJ_SRQ && bpf.VerbsSqObjOp(r.Op) == bpf.VerbsSqObjOpSQ_OBJ_DESTROY:
		fn(&trace.SRQDestroy{Header: h, SRQ: r.Addr, Gen: uint64(r.Gen), Ret: r.Ret})
	}
}

// cqReport reports one CQ lifetime's counts not reported yet: the empty
// polls (events mode) or the totals (counters mode).
func (t *Tracer) cqReport(now uint64, k cqGenKey, s bpf.VerbsSqCqStats, fn func(trace.Event)) {
	h := trace.Header{TimeNS: now, PID: k.pid}
	if t.opts.Mode == ModeCounters {
		// the totals say it all; no separate empty-poll events
		if t.cqSeen[k] != s {
			t.cqSeen[k] = s
			fn(&trace.CQCounters{Header: h, CQ: k.addr, Polls: s.Polls, CQEs: s.Cqes, Empty: s.Empty, Gen: uint64(k.gen), ExCQEs: s.ExCqes})
		}
		return
	}
	if seen := t.emptySeen[k]; s.Empty > seen {
		fn(&trace.EmptyPolls{Header: h, CQ: k.addr, Count: s.Empty - seen, Gen: uint64(k.gen)})
		t.emptySeen[k] = s.Empty
	}
}

// cqLate reports counts of an ended CQ lifetime that threads kept pending
// and handed over after the next CQ was born at its address (an entry of
// cq_stats whose key names the generation): they add to the totals it
// ended with. Those are known once its end was read from the ring; until
// then the entry waits for the next flush.
func (t *Tracer) cqLate(now uint64, k cqGenKey, late bpf.VerbsSqCqStats, fn func(trace.Event)) {
	f, ok := t.cqFinals[k]
	if !ok {
		return
	}
	if _, ok := t.emptySeen[k]; !ok {
		t.emptySeen[k] = f.Empty // reported with its end
	}
	t.cqReport(now, k, bpf.VerbsSqCqStats{Empty: f.Empty + late.Empty, Polls: f.Polls + late.Polls,
		Cqes: f.Cqes + late.Cqes, Gen: k.gen, ExCqes: f.ExCqes + late.ExCqes}, fn)
}

// cqForget drops what was reported of a CQ lifetime that has ended.
func (t *Tracer) cqForget(k cqGenKey) {
	delete(t.cqSeen, k)
	delete(t.emptySeen, k)
}

// qpFinal takes a destroyed QP's last totals (counters mode): the kernel
// has deleted them. Counts another thread kept pending come later in a
// new entry of the same generation, and are added to these.
func (t *Tracer) qpFinal(r *bpf.VerbsSqQpFinalRec, fn func(trace.Event)) {
	k := r.Key
	total := addQPCounters(t.qpFinals[k], r.C)
	t.qpFinals[k] = total
	delete(t.countsSeen, k)
	m := t.occSeen[k] // counts handed over after the destroy keep its last model
	delete(t.occSeen, k)
	if r.HasOcc != 0 {
		m = t.occModel(&r.O, r.OldestNs)
	}
	ev := qpCounters(r.Hdr.Ts, k, total)
	ev.SQ = m
	fn(ev)
}

// qpCounters is the event of one QP lifetime's totals.
func qpCounters(now uint64, k bpf.VerbsSqGenKey, c bpf.VerbsSqQpCounters) *trace.QPCounters {
	return &trace.QPCounters{Header: trace.Header{TimeNS: now, PID: k.Pid}, QP: k.Addr, QPNum: c.QpNum,
		PostCalls: c.PostCalls, WRs: c.Wrs, Inline: c.InlineWrs, Signaled: c.Signaled,
		Doorbells: c.Doorbells, Errors: c.Errors, ENOMEM: c.Enomem, EINVAL: c.Einval,
		InlineBytes: c.InlineBytes, PayloadBytes: c.PayloadBytes, PayloadSGEs: c.PayloadSges,
		WRsPerCallMax: c.MaxWrsPerCall, WalkCappedPosts: c.WalkCapped, SGECutWRs: c.SgeCutWrs,
		SGEsNotSummed: c.SgesNotSummed, Gen: uint64(k.Gen),
		RecvsCounted: true, RecvCalls: c.RecvCalls, Recvs: c.Recvs, RecvFailed: c.RecvFailed}
}

// addQPCounters is a + b; the peak is the larger one, the number a's
// (or b's when a has none).
func addQPCounters(a, b bpf.VerbsSqQpCounters) bpf.VerbsSqQpCounters {
	s := a
	if s.QpNum == 0 {
		s.QpNum = b.QpNum
	}
	s.PostCalls += b.PostCalls
	s.Wrs += b.Wrs
	s.InlineWrs += b.InlineWrs
	s.Signaled += b.Signaled
	s.Doorbells += b.Doorbells
	s.Errors += b.Errors
	s.Enomem += b.Enomem
	s.Einval += b.Einval
	s.InlineBytes += b.InlineBytes
	s.PayloadBytes += b.PayloadBytes
	s.PayloadSges += b.PayloadSges
	s.MaxWrsPerCall = max(s.MaxWrsPerCall, b.MaxWrsPerCall)
	s.WalkCapped += b.WalkCapped
	s.SgeCutWrs += b.SgeCutWrs
	s.SgesNotSummed += b.SgesNotSummed
	s.RecvCalls += b.RecvCalls
	s.Recvs += b.Recvs
	s.RecvFailed += b.RecvFailed
	return s
}

// checkSize checks the size of a fixed-size record.
func checkSize(what string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s record of %d bytes, want %d", what, got, want)
	}
	return nil
}
