package probe

import (
	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// The counters mode's send-queue model (bpf/occupancy.bpf.h): each QP's
// model is read with its totals at every flush and comes with them in
// trace.QPCounters field SQ; a failed post comes at once, with the model
// after it, as a trace.PostFail whose Counted is set.

var occFailRecSize = int(sizeofOccFail)

// occModel is the trace's form of a kernel model; oldestNS is when its
// oldest signaled WR outstanding was posted (0: none).
func (t *Tracer) occModel(o *bpf.VerbsSqOcc, oldestNS uint64) trace.SQModel {
	m := trace.SQModel{Kept: true, Posted: o.Posted, Retired: o.Retired, Peak: o.Peak,
		LongestRun: o.LongestRun, CurRun: o.CurRun, FirstRun: o.FirstRun, Signaled: o.Signaled,
		SigOutstanding: uint64(o.Tail - o.Head), OldestSigNS: oldestNS,
		SendCQEs: o.SendCqes, CQEErrors: o.CqeErrors, Unmatched: o.Unmatched, Unkept: o.Unkept,
		FailRepeats: o.FailRepeats, SendCQ: o.SendCq,
		Synced: o.Flags&occSynced != 0, SigAll: o.Flags&occSigAll != 0, Err: o.Flags&occErr != 0,
		IDsRepeat: o.Flags&occIDsRepeat != 0, WRAPI: o.Flags&occWRAPI != 0}
	m.WCsPast, m.Full = t.occBounds()
	return m
}

// The flags of bpf/events.h's sq_occ (pinned by TestOccFlags).
const (
	occSynced    = 1
	occSigAll    = 2
	occErr       = 4
	occIDsRepeat = 8
	occWRAPI     = 16
	sigTSShift   = 20
)

// occBounds reads what the kernel's model counted past its bounds: the
// completions of polls it did not look at, the QPs it had no room for.
func (t *Tracer) occBounds() (wcsPast, full uint64) {
	if t.objs.OccWcsPast == nil {
		return 0, 0
	}
	_ = t.objs.OccWcsPast.Get(&wcsPast)
	_ = t.objs.OccFull.Get(&full)
	return wcsPast, full
}

// occOf reads the model of the QP numbered qpn of process pid, of
// generation gen; false when the kernel keeps none of it.
func (t *Tracer) occOf(pid, qpn, gen uint32, now uint64) (trace.SQModel, bool) {
	var o bpf.VerbsSqQpOcc
	if t.objs.QpOcc.Lookup(bpf.VerbsSqQpnKey{Pid: pid, Qpn: qpn}, &o) != nil || o.S.Gen != gen {
		return trace.SQModel{}, false
	}
	var oldest uint64
	if o.S.Head != o.S.Tail {
		oldest = sigTime(o.Ring[o.S.Head%trace.SigRing].Ts, now)
	}
	return t.occModel(&o.S, oldest), true
}

// sigTime is the time a signaled WR kept in the ring was posted: its
// stamp holds bits 20..51 of the clock; now gives the bits above.
func sigTime(ts uint32, now uint64) uint64 {
	const span = 1 << (32 + sigTSShift)
	t := now&^(span-1) | uint64(ts)<<sigTSShift
	if t > now && t >= span {
		t -= span
	}
	return t
}

// occFail decodes a failed post of the counters mode.
func (t *Tracer) occFail(r *bpf.VerbsSqOccFailRec) *trace.PostFail {
	e := &trace.PostFail{Header: header(&r.Hdr), QP: r.Qp, QPNum: r.QpNum, Func: "post_send",
		Errno: r.Err, State: r.State, Counted: true, Accepted: r.Accepted, WalkCapped: r.WalkCapped != 0,
		SQ: t.occModel(&r.O, r.OldestNs)}
	if r.HasWr != 0 {
		e.HasWR = true
		e.WR = trace.WR{ID: r.WrId, Opcode: r.Opcode, Flags: r.SendFlags, NumSGE: r.NumSge, Bytes: r.Bytes, SGEsNotSummed: r.SgeOver}
	}
	return e
}
