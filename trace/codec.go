package trace

// Record encoding (format version 1). All integers are little-endian; "u" is
// an unsigned LEB128 varint, "z" a zigzag signed varint (encoding/binary
// Uvarint and Varint), "b" one byte, "s" a string as u length then bytes,
// "?" a bool as one byte 0 or 1.
//
//	record  = kind b, length u, body (length bytes)
//	body    = common header, then the kind's fields below
//
// Every record, of any kind (also kinds this version does not know), starts
// with the common header, so a reader that skips an unknown kind still tracks
// the time and thread state the records after it are encoded against. A
// reader ignores body bytes past the fields it knows: a later writer of the
// same version may append fields.
//
//	header  = flags b     bit0: PID as the previous record, bit1: TID as the
//	                      previous record; other bits must be 0
//	          time z      TimeNS minus the previous record's TimeNS (mod 2^64)
//	          pid u       unless bit0
//	          tid u       unless bit1
//
// "Previous" means within the same chunk; each chunk starts from time 0 and
// PID/TID 0, so every chunk decodes on its own. EntryNS fields are stored as
// z TimeNS-EntryNS (mod 2^64), a few bytes for the call's duration, and as
// 0 when the entry time was not recorded (EntryNS 0).
//
//	QPCreate   u QP, u QPNum, b Type, ? SigAll, u SendCQ, u RecvCQ,
//	           u MaxSendWR, u MaxRecvWR, u MaxSendSGE, u MaxRecvSGE,
//	           u MaxInlineData, s Via, [gen [s Lib [z State]]]
//	QPDestroy  u QP, u QPNum, z Ret, [gen]
//	QPModify   u QP, u QPNum, z State, z Ret
//	Post       u QP, u QPNum, b API, ? Aborted, u Truncated, z Ret,
//	           u Accepted, z entry, u len(WRs), WRs, [cuts]
//	Poll       u CQ, z Max, z Ret, u Truncated, u EmptyBefore, z entry,
//	           u len(WCs), WCs
//	EmptyPolls u CQ, u Count, [gen]
//	PostRecv   u QP, u QPNum, u NumWRs, z Ret, u Accepted
//	Lost       u Count
//	Exit       z Code, z Signal
//	Attach     s Func, s Path, u Offset, s How, s Err, [s DebugFile]
//	QPCounters u QP, u QPNum, u PostCalls, u WRs, u Inline, u Signaled,
//	           u Doorbells, u Errors, u ENOMEM, u EINVAL, u InlineBytes,
//	           u PayloadBytes, u PayloadSGEs, u WRsPerCallMax, [qpcuts], [gen],
//	           [qprecvs]
//	CQCounters u CQ, u Polls, u CQEs, u Empty, [gen]
//	CQCreate   u CQ, u Gen, u CQE
//	SRQCreate  u SRQ, u Gen, u MaxWR
//	SRQDestroy u SRQ, u Gen, z Ret
//	End        s Reason, ? Err, [cut]
//	CQChange   b Op, u CQ, z CQE, u ModMask, u ModCount, u ModPeriodUS,
//	           z Ret, s Via
//	Scan       u Bytes, u Mappings, u DurationNS, u Contexts, u QPs,
//	           u StopNS, s Cut, s Err, [s KernelCheck]
//
// A QPCreate's State (after its Lib), an Attach's DebugFile and a Scan's
// KernelCheck were appended later, each
// written only when not zero or empty; a QPCreate with a State writes its
// gen too, 0 or not, so that the State is where a reader looks.
//
// Poll and PostRecv gained a last field later in the same way as cuts
// below, written only when set, so records without it are stored as
// before: Poll ends with ? Ex after its WCs, PostRecv with ? SRQ.
//
// cuts, appended after the first release of version 1, is written only when
// the list walk was capped or a WR has SGEs not summed, so a post that lost
// nothing is stored as before and a reader that stops at the WRs reads the
// rest of the record unchanged:
//
//	cuts    ? WalkCapped, u count, count times (u index gap, u SGEsNotSummed)
//
// listing the WRs with SGEsNotSummed > 0 in order; the index gap is the WR's
// index minus the previous listed index plus one (the first: its index).
//
// qpcuts, appended to QPCounters later in the same way, is written only when
// one of its counts is not zero, so totals without cuts are stored as before:
//
//	qpcuts  u WalkCappedPosts, u SGECutWRs, u SGEsNotSummed
//
// cut, appended to End later in the same way, is written only when the
// trace was cut (CutNS not 0): u CutNS, u InFlightUnseen.
//
// gen, appended later still to the records of objects, is an object's
// generation (u Gen), written only when it is known (not 0), so a record
// without one is stored as before. A QPCounters record with a gen writes
// its qpcuts too, zeros or not, so that the gen is where a reader looks.
//
// qprecvs, appended to QPCounters later still, is there when the totals
// count receives (RecvsCounted), and then the qpcuts and the gen are
// written too, zeros or not:
//
//	qprecvs u RecvCalls, u Recvs, u RecvFailed
//
// A WR or WC is stored against the one before it in the same list (the first
// against zero values): a mask byte says which fields are written, the others
// repeat the previous element, and the ID, when written, is z ID-(prev ID+1).
// A run of WRs with consecutive wr_ids and the same opcode, flags and sizes
// costs one byte per WR.
//
//	WR  mask b (bit0 ID, bit1 Opcode, bit2 Flags, bit3 NumSGE, bit4 Bytes),
//	    then: z ID delta, b Opcode, u Flags, u NumSGE, u Bytes (if set)
//	WC  mask b (bit0 ID, bit1 Status, bit2 Opcode, bit3 ByteLen, bit4 QPNum),
//	    then: z ID delta, b Status, b Opcode, u ByteLen, u QPNum (if set)

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	hdrSamePID = 1 << 0
	hdrSameTID = 1 << 1

	elemID     = 1 << 0 // both WR and WC
	wrOpcode   = 1 << 1
	wrFlags    = 1 << 2
	wrNumSGE   = 1 << 3
	wrBytes    = 1 << 4
	wcStatus   = 1 << 1
	wcOpcode   = 1 << 2
	wcByteLen  = 1 << 3
	wcQPNum    = 1 << 4
	elemAllSet = 1<<5 - 1
)

// codecState is what a record is encoded against: the previous record of the
// same chunk.
type codecState struct {
	timeNS   uint64
	pid, tid uint32
}

// encoder turns events into records. Its state resets at each chunk.
type encoder struct {
	state codecState
	body  []byte // scratch for the body, so its length can precede it
}

func (e *encoder) reset() { e.state = codecState{} }

// appendRecord appends ev as one record to dst. On error dst is returned
// unchanged and the state is not advanced.
func (e *encoder) appendRecord(dst []byte, ev Event) ([]byte, error) {
	h, err := eventHeader(ev)
	if err != nil {
		return dst, err
	}
	b := e.body[:0]
	flags := byte(0)
	if h.PID == e.state.pid {
		flags |= hdrSamePID
	}
	if h.TID == e.state.tid {
		flags |= hdrSameTID
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, int64(h.TimeNS-e.state.timeNS))
	if flags&hdrSamePID == 0 {
		b = binary.AppendUvarint(b, uint64(h.PID))
	}
	if flags&hdrSameTID == 0 {
		b = binary.AppendUvarint(b, uint64(h.TID))
	}
	b = appendFields(b, ev)
	e.body = b
	if len(b) > maxRecordBody {
		return dst, fmt.Errorf("%s event too large to record (%d bytes, limit %d)", ev.Kind(), len(b), maxRecordBody)
	}
	e.state = codecState{timeNS: h.TimeNS, pid: h.PID, tid: h.TID}
	dst = append(dst, byte(ev.Kind()))
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...), nil
}

// eventHeader returns the header of one of the concrete event types, or an
// error for nil, a nil pointer or a type this format does not know.
func eventHeader(ev Event) (*Header, error) {
	var h *Header
	switch e := ev.(type) {
	case *QPCreate:
		if e != nil {
			h = &e.Header
		}
	case *QPDestroy:
		if e != nil {
			h = &e.Header
		}
	case *QPModify:
		if e != nil {
			h = &e.Header
		}
	case *Post:
		if e != nil {
			h = &e.Header
		}
	case *Poll:
		if e != nil {
			h = &e.Header
		}
	case *EmptyPolls:
		if e != nil {
			h = &e.Header
		}
	case *PostRecv:
		if e != nil {
			h = &e.Header
		}
	case *Lost:
		if e != nil {
			h = &e.Header
		}
	case *Exit:
		if e != nil {
			h = &e.Header
		}
	case *Attach:
		if e != nil {
			h = &e.Header
		}
	case *QPCounters:
		if e != nil {
			h = &e.Header
		}
	case *CQCounters:
		if e != nil {
			h = &e.Header
		}
	case *CQCreate:
		if e != nil {
			h = &e.Header
		}
	case *SRQCreate:
		if e != nil {
			h = &e.Header
		}
	case *SRQDestroy:
		if e != nil {
			h = &e.Header
		}
	case *End:
		if e != nil {
			h = &e.Header
		}
	case *CQChange:
		if e != nil {
			h = &e.Header
		}
	case *Scan:
		if e != nil {
			h = &e.Header
		}
	case *Proc:
		if e != nil {
			h = &e.Header
		}
	default:
		if ev == nil {
			return nil, errors.New("cannot record a nil event")
		}
		return nil, fmt.Errorf("cannot record event of type %T", ev)
	}
	if h == nil {
		return nil, fmt.Errorf("cannot record a nil %T", ev)
	}
	return h, nil
}

func appendU(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendZ(b []byte, v int64) []byte  { return binary.AppendVarint(b, v) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// entryDelta is how EntryNS is stored: the call's duration, modulo 2^64 so
// any pair of values round-trips, or 0 when no entry time was recorded
// (EntryNS 0). A call whose entry time equals its return time, which a
// probe cannot record, reads back as not recorded.
func entryDelta(timeNS, entryNS uint64) int64 {
	if entryNS == 0 {
		return 0
	}
	return int64(timeNS - entryNS)
}

// entryTime undoes entryDelta.
func entryTime(timeNS uint64, delta int64) uint64 {
	if delta == 0 {
		return 0
	}
	return timeNS - uint64(delta)
}

// appendFields appends the kind-specific fields; ev is known to be a non-nil
// concrete event (eventHeader checked it).
func appendFields(b []byte, ev Event) []byte {
	switch e := ev.(type) {
	case *QPCreate:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		b = append(b, byte(e.Type))
		b = appendBool(b, e.SigAll)
		b = appendU(b, e.SendCQ)
		b = appendU(b, e.RecvCQ)
		b = appendU(b, uint64(e.Caps.MaxSendWR))
		b = appendU(b, uint64(e.Caps.MaxRecvWR))
		b = appendU(b, uint64(e.Caps.MaxSendSGE))
		b = appendU(b, uint64(e.Caps.MaxRecvSGE))
		b = appendU(b, uint64(e.Caps.MaxInlineData))
		b = appendStr(b, e.Via)
		if e.Lib != "" || e.State != 0 { // appended later: gen is then written even when 0
			b = appendU(b, e.Gen)
			b = appendStr(b, e.Lib)
			if e.State != 0 {
				b = appendZ(b, int64(e.State))
			}
		} else {
			b = appendGen(b, e.Gen)
		}
	case *QPDestroy:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		b = appendZ(b, int64(e.Ret))
		b = appendGen(b, e.Gen)
	case *QPModify:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		b = appendZ(b, int64(e.State))
		b = appendZ(b, int64(e.Ret))
	case *Post:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		b = append(b, byte(e.API))
		b = appendBool(b, e.Aborted)
		b = appendU(b, uint64(e.Truncated))
		b = appendZ(b, int64(e.Ret))
		b = appendU(b, uint64(e.Accepted))
		b = appendZ(b, entryDelta(e.TimeNS, e.EntryNS))
		b = appendU(b, uint64(len(e.WRs)))
		var prev WR
		for _, wr := range e.WRs {
			b = appendWR(b, &prev, wr)
			prev = wr
		}
		b = appendCuts(b, e)
	case *Poll:
		b = appendU(b, e.CQ)
		b = appendZ(b, int64(e.Max))
		b = appendZ(b, int64(e.Ret))
		b = appendU(b, uint64(e.Truncated))
		b = appendU(b, e.EmptyBefore)
		b = appendZ(b, entryDelta(e.TimeNS, e.EntryNS))
		b = appendU(b, uint64(len(e.WCs)))
		var prev WC
		for _, wc := range e.WCs {
			b = appendWC(b, &prev, wc)
			prev = wc
		}
		if e.Ex {
			b = appendBool(b, true)
		}
	case *EmptyPolls:
		b = appendU(b, e.CQ)
		b = appendU(b, e.Count)
		b = appendGen(b, e.Gen)
	case *PostRecv:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		b = appendU(b, uint64(e.NumWRs))
		b = appendZ(b, int64(e.Ret))
		b = appendU(b, uint64(e.Accepted))
		if e.SRQ {
			b = appendBool(b, true)
		}
	case *Lost:
		b = appendU(b, e.Count)
	case *Exit:
		b = appendZ(b, int64(e.Code))
		b = appendZ(b, int64(e.Signal))
	case *Attach:
		b = appendStr(b, e.Func)
		b = appendStr(b, e.Path)
		b = appendU(b, e.Offset)
		b = appendStr(b, e.How)
		b = appendStr(b, e.Err)
		if e.DebugFile != "" {
			b = appendStr(b, e.DebugFile)
		}
	case *QPCounters:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		for _, v := range [...]uint64{e.PostCalls, e.WRs, e.Inline, e.Signaled,
			e.Doorbells, e.Errors, e.ENOMEM, e.EINVAL, e.InlineBytes,
			e.PayloadBytes, e.PayloadSGEs, e.WRsPerCallMax} {
			b = appendU(b, v)
		}
		if e.WalkCappedPosts|e.SGECutWRs|e.SGEsNotSummed|e.Gen != 0 || e.RecvsCounted {
			b = appendU(b, e.WalkCappedPosts)
			b = appendU(b, e.SGECutWRs)
			b = appendU(b, e.SGEsNotSummed)
		}
		if e.RecvsCounted {
			b = appendU(b, e.Gen)
			b = appendU(b, e.RecvCalls)
			b = appendU(b, e.Recvs)
			b = appendU(b, e.RecvFailed)
		} else {
			b = appendGen(b, e.Gen)
		}
	case *CQCounters:
		b = appendU(b, e.CQ)
		b = appendU(b, e.Polls)
		b = appendU(b, e.CQEs)
		b = appendU(b, e.Empty)
		b = appendGen(b, e.Gen)
	case *CQCreate:
		b = appendU(b, e.CQ)
		b = appendU(b, e.Gen)
		b = appendU(b, uint64(e.CQE))
	case *SRQCreate:
		b = appendU(b, e.SRQ)
		b = appendU(b, e.Gen)
		b = appendU(b, uint64(e.MaxWR))
	case *SRQDestroy:
		b = appendU(b, e.SRQ)
		b = appendU(b, e.Gen)
		b = appendZ(b, int64(e.Ret))
	case *End:
		b = appendStr(b, e.Reason)
		b = appendBool(b, e.Err)
		if e.CutNS != 0 {
			b = appendU(b, e.CutNS)
			b = appendU(b, e.InFlightUnseen)
		}
	case *CQChange:
		b = append(b, byte(e.Op))
		b = appendU(b, e.CQ)
		b = appendZ(b, int64(e.CQE))
		b = appendU(b, uint64(e.ModMask))
		b = appendU(b, uint64(e.ModCount))
		b = appendU(b, uint64(e.ModPeriodUS))
		b = appendZ(b, int64(e.Ret))
		b = appendStr(b, e.Via)
	case *Scan:
		for _, v := range [...]uint64{e.Bytes, uint64(e.Mappings), e.DurationNS,
			uint64(e.Contexts), uint64(e.QPs), e.StopNS} {
			b = appendU(b, v)
		}
		b = appendStr(b, e.Cut)
		b = appendStr(b, e.Err)
		if e.KernelCheck != "" {
			b = appendStr(b, e.KernelCheck)
		}
	case *Proc:
		b = appendStr(b, e.How)
		b = appendU(b, uint64(e.Parent))
		b = appendStr(b, e.Comm)
	}
	return b
}

// appendGen appends an object's generation, appended to its records after
// the first release of version 1: only when it is known (not 0), so a
// record without one is stored as before.
func appendGen(b []byte, gen uint64) []byte {
	if gen == 0 {
		return b
	}
	return appendU(b, gen)
}

func appendWR(b []byte, prev *WR, wr WR) []byte {
	mask := byte(0)
	if wr.ID != prev.ID+1 {
		mask |= elemID
	}
	if wr.Opcode != prev.Opcode {
		mask |= wrOpcode
	}
	if wr.Flags != prev.Flags {
		mask |= wrFlags
	}
	if wr.NumSGE != prev.NumSGE {
		mask |= wrNumSGE
	}
	if wr.Bytes != prev.Bytes {
		mask |= wrBytes
	}
	b = append(b, mask)
	if mask&elemID != 0 {
		b = appendZ(b, int64(wr.ID-(prev.ID+1)))
	}
	if mask&wrOpcode != 0 {
		b = append(b, wr.Opcode)
	}
	if mask&wrFlags != 0 {
		b = appendU(b, uint64(wr.Flags))
	}
	if mask&wrNumSGE != 0 {
		b = appendU(b, uint64(wr.NumSGE))
	}
	if mask&wrBytes != 0 {
		b = appendU(b, uint64(wr.Bytes))
	}
	return b
}

// appendCuts appends a post's cuts, if it has any.
func appendCuts(b []byte, p *Post) []byte {
	n := 0
	for i := range p.WRs {
		if p.WRs[i].SGEsNotSummed > 0 {
			n++
		}
	}
	if n == 0 && !p.WalkCapped {
		return b
	}
	b = appendBool(b, p.WalkCapped)
	b = appendU(b, uint64(n))
	next := 0 // index the next gap counts from
	for i := range p.WRs {
		if v := p.WRs[i].SGEsNotSummed; v > 0 {
			b = appendU(b, uint64(i-next))
			b = appendU(b, uint64(v))
			next = i + 1
		}
	}
	return b
}

func appendWC(b []byte, prev *WC, wc WC) []byte {
	mask := byte(0)
	if wc.ID != prev.ID+1 {
		mask |= elemID
	}
	if wc.Status != prev.Status {
		mask |= wcStatus
	}
	if wc.Opcode != prev.Opcode {
		mask |= wcOpcode
	}
	if wc.ByteLen != prev.ByteLen {
		mask |= wcByteLen
	}
	if wc.QPNum != prev.QPNum {
		mask |= wcQPNum
	}
	b = append(b, mask)
	if mask&elemID != 0 {
		b = appendZ(b, int64(wc.ID-(prev.ID+1)))
	}
	if mask&wcStatus != 0 {
		b = append(b, wc.Status)
	}
	if mask&wcOpcode != 0 {
		b = append(b, wc.Opcode)
	}
	if mask&wcByteLen != 0 {
		b = appendU(b, uint64(wc.ByteLen))
	}
	if mask&wcQPNum != 0 {
		b = appendU(b, uint64(wc.QPNum))
	}
	return b
}
