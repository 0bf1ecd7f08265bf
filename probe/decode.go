package probe

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

var (
	hdrSize       = int(unsafe.Sizeof(bpf.VerbsSqHdr{}))
	hdrKindOff    = int(unsafe.Offsetof(bpf.VerbsSqHdr{}.Kind))
	postWRsOff    = int(unsafe.Offsetof(bpf.VerbsSqPostRec{}.Wrs))
	pollWCsOff    = int(unsafe.Offsetof(bpf.VerbsSqPollRec{}.Wcs))
	wrSize        = int(unsafe.Sizeof(bpf.VerbsSqWr{}))
	wcSize        = int(unsafe.Sizeof(bpf.VerbsSqWc{}))
	qpRecSize     = int(unsafe.Sizeof(bpf.VerbsSqQpRec{}))
	cqRecSize     = int(unsafe.Sizeof(bpf.VerbsSqCqRec{}))
	recvRecSize   = int(unsafe.Sizeof(bpf.VerbsSqRecvRec{}))
	exitRecSize   = int(unsafe.Sizeof(bpf.VerbsSqExitRec{}))
	objRecSize    = int(unsafe.Sizeof(bpf.VerbsSqObjRec{}))
	finalRecSize  = int(unsafe.Sizeof(bpf.VerbsSqQpFinalRec{}))
	failRecSize   = int(unsafe.Sizeof(bpf.VerbsSqFailRec{}))
	sizeofOccFail = unsafe.Sizeof(bpf.VerbsSqOccFailRec{})
	maxRecordWRs  = len(bpf.VerbsSqPostRec{}.Wrs)
	maxRecordWCs  = len(bpf.VerbsSqPollRec{}.Wcs)
)

// handle decodes one ring-buffer record, acts on what it reveals (attach,
// continue a stopped process) and passes the event to fn.
func (t *Tracer) handle(raw []byte, fn func(trace.Event)) error {
	if len(raw) < hdrSize {
		return fmt.Errorf("BPF record of %d bytes is shorter than its header", len(raw))
	}
	switch kind := bpf.VerbsSqRecKind(raw[hdrKindOff]); kind {
	case bpf.VerbsSqRecKindSQ_REC_QP:
		if err := checkSize("QP", len(raw), qpRecSize); err != nil {
			return err
		}
		decodeInto(&t.qpRec, raw)
		r := &t.qpRec
		t.revealed(&r.Hdr, r.Fns[:], r.Stopped != 0)
		if ev := qpEvent(r); ev != nil {
			if c, ok := ev.(*trace.QPCreate); ok {
				t.learnMu.Lock() // the background scans learn too
				c.Lib = t.fnFile[pidAddr{r.Hdr.Pid, r.Fns[bpf.VerbsSqFnSQ_FN_POST_SEND]}]
				t.learnMu.Unlock()
			}
			fn(ev)
		}
	case bpf.VerbsSqRecKindSQ_REC_POST:
		if len(raw) < postWRsOff {
			return fmt.Errorf("post record of %d bytes is too short", len(raw))
		}
		decodeInto(&t.postRec, raw)
		r := &t.postRec
		if int(r.N) > maxRecordWRs || len(raw) < postWRsOff+int(r.N)*wrSize {
			return fmt.Errorf("post record of %d bytes claims %d WRs", len(raw), r.N)
		}
		t.countCall(1)
		fn(t.postEvent(r))
	case bpf.VerbsSqRecKindSQ_REC_POLL, bpf.VerbsSqRecKindSQ_REC_POLL_EX:
		if len(raw) < pollWCsOff {
			return fmt.Errorf("poll record of %d bytes is too short", len(raw))
		}
		decodeInto(&t.pollRec, raw)
		r := &t.pollRec
		if int(r.N) > maxRecordWCs || len(raw) < pollWCsOff+int(r.N)*wcSize {
			return fmt.Errorf("poll record of %d bytes claims %d completions", len(raw), r.N)
		}
		t.countCall(1 + r.EmptyBefore)
		p := t.pollEvent(r)
		p.Ex = kind == bpf.VerbsSqRecKindSQ_REC_POLL_EX
		if !p.Ex && r.Max >= 0 && r.Ret > r.Max && !t.oddPoll {
			t.oddPoll = true
			t.warn(fmt.Sprintf("a poll_cq probe saw %d completions returned for at most %d asked, which ibv_poll_cq never does: a --probe offset may be on the wrong function", r.Ret, r.Max))
		}
		fn(p)
	case bpf.VerbsSqRecKindSQ_REC_RECV, bpf.VerbsSqRecKindSQ_REC_SRQ_RECV:
		if err := checkSize("post_recv", len(raw), recvRecSize); err != nil {
			return err
		}
		decodeInto(&t.recvRec, raw)
		t.countCall(1)
		r := &t.recvRec
		fn(&trace.PostRecv{Header: header(&r.Hdr), QP: r.Qp, QPNum: r.QpNum, NumWRs: r.N, Ret: r.Ret, Accepted: r.Accepted,
			SRQ: kind == bpf.VerbsSqRecKindSQ_REC_SRQ_RECV})
	case bpf.VerbsSqRecKindSQ_REC_CQ:
		if err := checkSize("CQ", len(raw), cqRecSize); err != nil {
			return err
		}
		decodeInto(&t.cqRec, raw)
		r := &t.cqRec
		t.revealed(&r.Hdr, r.Fns[:], r.Stopped != 0)
		fn(cqEvent(r))
	case bpf.VerbsSqRecKindSQ_REC_EXIT:
		if err := checkSize("exit", len(raw), exitRecSize); err != nil {
			return err
		}
		decodeInto(&t.exitRec, raw)
		r := &t.exitRec
		ev := &trace.Exit{Header: header(&r.Hdr)}
		if sig := int32(r.ExitCode & 0x7f); sig != 0 {
			ev.Code, ev.Signal = -1, sig
		} else {
			ev.Code = int32(r.ExitCode>>8) & 0xff
		}
		if t.opts.PID != 0 && int(r.Hdr.Pid) == t.opts.PID {
			t.exitSeen = true
		}
		delete(t.hostSeen, int(r.Hdr.Pid)) // its pid may come back as another process
		fn(ev)
	case bpf.VerbsSqRecKindSQ_REC_PROC:
		return t.procRecord(raw, fn)
	case bpf.VerbsSqRecKindSQ_REC_OBJ:
		if err := checkSize("lifecycle", len(raw), objRecSize); err != nil {
			return err
		}
		decodeInto(&t.objRec, raw)
		t.objRecord(&t.objRec, fn)
	case bpf.VerbsSqRecKindSQ_REC_QP_FINAL:
		if err := checkSize("final QP totals", len(raw), finalRecSize); err != nil {
			return err
		}
		decodeInto(&t.finalRec, raw)
		t.qpFinal(&t.finalRec, fn)
	case bpf.VerbsSqRecKindSQ_REC_POST_FAIL:
		if err := checkSize("failure", len(raw), failRecSize); err != nil {
			return err
		}
		var r bpf.VerbsSqFailRec
		decodeInto(&r, raw)
		fn(t.failEvent(&r))
	case bpf.VerbsSqRecKindSQ_REC_OCC_FAIL:
		if err := checkSize("failed post", len(raw), occFailRecSize); err != nil {
			return err
		}
		var r bpf.VerbsSqOccFailRec
		decodeInto(&r, raw)
		fn(t.occFail(&r))
	default:
		return fmt.Errorf("BPF record of unknown kind %d", kind)
	}
	return nil
}

// revealed attaches to the functions a control-path record revealed and
// notes whether its process was stopped until they are attached.
func (t *Tracer) revealed(h *bpf.VerbsSqHdr, fns []uint64, stopped bool) {
	t.learn(h.Pid, fns)
	if stopped {
		t.markStopped(int(h.Pid), int(h.Tid), h.Ts)
	}
}

// foreign reports whether pid is not the traced process: counts another
// process left in the maps, through probes placed for every process (see
// attach), are not reported.
func (t *Tracer) foreign(pid uint32) bool {
	return t.opts.PID != 0 && pid != uint32(t.opts.PID) && !t.members[pid]
}

func header(h *bpf.VerbsSqHdr) trace.Header {
	return trace.Header{TimeNS: h.Ts, PID: h.Pid, TID: h.Tid}
}

// viaNames names the call that produced a QP record, by op and via.
var viaNames = map[[2]uint8]string{
	{uint8(bpf.VerbsSqQpOpSQ_QP_CREATE), uint8(bpf.VerbsSqViaSQ_VIA_IBV)}:         "ibv_create_qp",
	{uint8(bpf.VerbsSqQpOpSQ_QP_CREATE), uint8(bpf.VerbsSqViaSQ_VIA_SIM)}:         "sqsim_create_qp",
	{uint8(bpf.VerbsSqQpOpSQ_QP_CREATE_EX), uint8(bpf.VerbsSqViaSQ_VIA_SIM)}:      "sqsim_create_qp_ex",
	{uint8(bpf.VerbsSqQpOpSQ_QP_CREATE_EX), uint8(bpf.VerbsSqViaSQ_VIA_PROVIDER)}: "ibv_create_qp_ex",
}

func qpEvent(r *bpf.VerbsSqQpRec) trace.Event {
	h := header(&r.Hdr)
	switch bpf.VerbsSqQpOp(r.Op) {
	case bpf.VerbsSqQpOpSQ_QP_CREATE, bpf.VerbsSqQpOpSQ_QP_CREATE_EX:
		via := viaNames[[2]uint8{r.Op, r.Via}]
		if via == "" {
			via = fmt.Sprintf("create_qp(op %d via %d)", r.Op, r.Via)
		}
		return &trace.QPCreate{Header: h, QP: r.Qp, QPNum: r.QpNum, Type: trace.QPType(r.QpType),
			SigAll: r.SigAll != 0, SendCQ: r.SendCq, RecvCQ: r.RecvCq,
			Caps: trace.Caps{MaxSendWR: r.Caps.MaxSendWr, MaxRecvWR: r.Caps.MaxRecvWr,
				MaxSendSGE: r.Caps.MaxSendSge, MaxRecvSGE: r.Caps.MaxRecvSge,
				MaxInlineData: r.Caps.MaxInlineData},
			Via: via, Gen: r.Gen}
	case bpf.VerbsSqQpOpSQ_QP_MODIFY:
		return &trace.QPModify{Header: h, QP: r.Qp, QPNum: r.QpNum, State: r.State, Ret: r.Ret}
	case bpf.VerbsSqQpOpSQ_QP_DESTROY:
		return &trace.QPDestroy{Header: h, QP: r.Qp, QPNum: r.QpNum, Ret: r.Ret, Gen: r.Gen}
	}
	return nil // qp_to_qp_ex, alloc_pd: they only reveal functions
}

// cqViaNames names the call that produced a CQ record, by op and via.
var cqViaNames = map[[2]uint8]string{
	{uint8(bpf.VerbsSqCqOpSQ_CQ_CREATE), uint8(bpf.VerbsSqViaSQ_VIA_IBV)}:         "ibv_create_cq",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_CREATE), uint8(bpf.VerbsSqViaSQ_VIA_SIM)}:         "sqsim_create_cq",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_CREATE_EX), uint8(bpf.VerbsSqViaSQ_VIA_SIM)}:      "sqsim_create_cq_ex",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_CREATE_EX), uint8(bpf.VerbsSqViaSQ_VIA_PROVIDER)}: "ibv_create_cq_ex",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_MODIFY), uint8(bpf.VerbsSqViaSQ_VIA_SIM)}:         "sqsim_modify_cq",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_MODIFY), uint8(bpf.VerbsSqViaSQ_VIA_PROVIDER)}:    "ibv_modify_cq",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_RESIZE), uint8(bpf.VerbsSqViaSQ_VIA_IBV)}:         "ibv_resize_cq",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_RESIZE), uint8(bpf.VerbsSqViaSQ_VIA_SIM)}:         "sqsim_resize_cq",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_DESTROY), uint8(bpf.VerbsSqViaSQ_VIA_IBV)}:        "ibv_destroy_cq",
	{uint8(bpf.VerbsSqCqOpSQ_CQ_DESTROY), uint8(bpf.VerbsSqViaSQ_VIA_SIM)}:        "sqsim_destroy_cq",
}

func cqEvent(r *bpf.VerbsSqCqRec) *trace.CQChange {
	via := cqViaNames[[2]uint8{r.Op, r.Via}]
	if via == "" {
		via = fmt.Sprintf("cq(op %d via %d)", r.Op, r.Via)
	}
	return &trace.CQChange{Header: header(&r.Hdr), Op: trace.CQOp(r.Op), CQ: r.Cq, CQE: r.Cqe,
		ModMask: r.ModMask, ModCount: r.ModCount, ModPeriodUS: r.ModPeriod, Ret: r.Ret, Via: via}
}

// maxErrno is the largest errno Linux defines (MAX_ERRNO).
const maxErrno = 4095

func (t *Tracer) postEvent(r *bpf.VerbsSqPostRec) *trace.Post {
	p := new(trace.Post)
	if t.opts.ReuseEvents {
		p = &t.post
	}
	wrs := p.WRs[:0]
	*p = trace.Post{Header: header(&r.Hdr), QP: r.Qp, QPNum: r.QpNum, API: trace.API(r.Api),
		Truncated: r.Truncated, Ret: r.Ret, Accepted: r.Accepted, EntryNS: r.Hdr.EntryTs,
		Aborted: r.Aborted != 0, WalkCapped: r.WalkCapped != 0}
	if (r.Ret < 0 || r.Ret > maxErrno) && !t.oddPost {
		t.oddPost = true
		t.warn(fmt.Sprintf("a post_send probe saw a return value of %d, which ibv_post_send never returns (0 or an errno): a --probe offset may be on the wrong function", r.Ret))
	}
	if r.N > 0 {
		wrs = slices.Grow(wrs, int(r.N))[:r.N]
		for i := range wrs {
			w := &r.Wrs[i]
			n := w.NumSge
			if int32(n) < 0 {
				n = 0
			}
			wrs[i] = trace.WR{ID: w.WrId, Opcode: w.Opcode, Flags: w.SendFlags, NumSGE: n, Bytes: w.Bytes,
				SGEsNotSummed: w.SgeOver}
		}
		p.WRs = wrs
	}
	return p
}

func (t *Tracer) pollEvent(r *bpf.VerbsSqPollRec) *trace.Poll {
	p := new(trace.Poll)
	if t.opts.ReuseEvents {
		p = &t.poll
	}
	wcs := p.WCs[:0]
	// Each empty poll is reported once: by the polling thread's next record
	// of the CQ, or in the per-CQ totals read by flush.
	*p = trace.Poll{Header: header(&r.Hdr), CQ: r.Cq, Max: r.Max, Ret: r.Ret,
		Truncated: r.Truncated, EntryNS: r.Hdr.EntryTs, EmptyBefore: r.EmptyBefore}

	if r.N > 0 {
		wcs = slices.Grow(wcs, int(r.N))[:r.N]
		for i := range wcs {
			w := &r.Wcs[i]
			wcs[i] = trace.WC{ID: w.WrId, Status: w.Status, Opcode: w.Opcode, ByteLen: w.ByteLen, QPNum: w.QpNum}
		}
		p.WCs = wcs
	}
	return p
}

// flush reports what the kernel keeps as counters: records lost, empty
// polls per CQ not reported yet, and the counters mode's per-QP totals.
func (t *Tracer) flush(fn func(trace.Event)) {
	t.hookNewLibibverbs()
	t.rescan()
	t.deliverAttachments(fn) // what the rescan found, in order before the counts
	now := trace.MonotonicNS()
	if lost := t.Lost(); lost > t.lostSeen {
		fn(&trace.Lost{Header: trace.Header{TimeNS: now}, Count: lost - t.lostSeen})
		t.lostSeen = lost
	}

	var k bpf.VerbsSqKey
	var s bpf.VerbsSqCqStats
	it := t.objs.CqStats.Iterate()
	for it.Next(&k, &s) {
		switch {
		case t.foreign(k.Pid):
		case k.Pad != 0:
			t.cqLate(now, cqGenKey{k.Pid, k.Addr, k.Pad}, s, fn)
		default:
			t.cqReport(now, cqGenKey{k.Pid, k.Addr, s.Gen}, s, fn)
		}
	}

	if t.opts.Mode != ModeCounters {
		return
	}
	var gk bpf.VerbsSqGenKey
	var c bpf.VerbsSqQpCounters
	it = t.objs.QpCounters.Iterate()
	for it.Next(&gk, &c) {
		if t.foreign(gk.Pid) {
			continue
		}
		m, kept := t.occOf(gk.Pid, c.QpNum, gk.Gen, now)
		if t.countsSeen[gk] == c && t.occSeen[gk] == m {
			continue
		}
		t.countsSeen[gk], t.occSeen[gk] = c, m
		if f, ok := t.qpFinals[gk]; ok {
			c = addQPCounters(f, c) // counted after the QP's destroy
		}
		ev := qpCounters(now, gk, c)
		if kept {
			ev.SQ = m
		}
		fn(ev)
	}
}
