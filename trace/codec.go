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
//	           u MaxInlineData, s Via
//	QPDestroy  u QP, u QPNum, z Ret
//	QPModify   u QP, u QPNum, z State, z Ret
//	Post       u QP, u QPNum, b API, ? Aborted, u Truncated, z Ret,
//	           u Accepted, z entry, u len(WRs), WRs, [cuts]
//	Poll       u CQ, z Max, z Ret, u Truncated, u EmptyBefore, z entry,
//	           u len(WCs), WCs
//	EmptyPolls u CQ, u Count
//	PostRecv   u QP, u QPNum, u NumWRs, z Ret, u Accepted
//	Lost       u Count
//	Exit       z Code, z Signal
//	Attach     s Func, s Path, u Offset, s How, s Err
//	QPCounters u QP, u QPNum, u PostCalls, u WRs, u Inline, u Signaled,
//	           u Doorbells, u Errors, u ENOMEM, u EINVAL, u InlineBytes,
//	           u PayloadBytes, u PayloadSGEs, u WRsPerCallMax, [qpcuts]
//	CQCounters u CQ, u Polls, u CQEs, u Empty
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
	"math"
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
	case *QPDestroy:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		b = appendZ(b, int64(e.Ret))
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
	case *EmptyPolls:
		b = appendU(b, e.CQ)
		b = appendU(b, e.Count)
	case *PostRecv:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		b = appendU(b, uint64(e.NumWRs))
		b = appendZ(b, int64(e.Ret))
		b = appendU(b, uint64(e.Accepted))
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
	case *QPCounters:
		b = appendU(b, e.QP)
		b = appendU(b, uint64(e.QPNum))
		for _, v := range [...]uint64{e.PostCalls, e.WRs, e.Inline, e.Signaled,
			e.Doorbells, e.Errors, e.ENOMEM, e.EINVAL, e.InlineBytes,
			e.PayloadBytes, e.PayloadSGEs, e.WRsPerCallMax} {
			b = appendU(b, v)
		}
		if e.WalkCappedPosts|e.SGECutWRs|e.SGEsNotSummed != 0 {
			b = appendU(b, e.WalkCappedPosts)
			b = appendU(b, e.SGECutWRs)
			b = appendU(b, e.SGEsNotSummed)
		}
	case *CQCounters:
		b = appendU(b, e.CQ)
		b = appendU(b, e.Polls)
		b = appendU(b, e.CQEs)
		b = appendU(b, e.Empty)
	}
	return b
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

// decoder turns records back into events. Its state resets at each chunk.
type decoder struct {
	state codecState
}

func (d *decoder) reset() { d.state = codecState{} }

// errShortRecord says a record's frame runs past the bytes available: in a
// checksummed chunk that is corruption, at the end of a truncated file it is
// the cut.
var errShortRecord = errors.New("record runs past the end of its chunk")

// nextRecord decodes the record at the start of p. It returns the event (nil
// for a kind this version does not know), the record's length in bytes, and
// an error for a record that is cut short (errShortRecord) or malformed.
func (d *decoder) nextRecord(p []byte) (Event, int, error) {
	if len(p) == 0 {
		return nil, 0, errShortRecord
	}
	kind := Kind(p[0])
	n, w := binary.Uvarint(p[1:])
	if w == 0 {
		return nil, 0, errShortRecord
	}
	if w < 0 || n > maxRecordBody {
		return nil, 0, errors.New("bad record length")
	}
	size := 1 + w + int(n)
	if size > len(p) {
		return nil, 0, errShortRecord
	}
	r := fieldReader{b: p[1+w : size]}
	var h Header
	flags := r.byte()
	if flags&^(hdrSamePID|hdrSameTID) != 0 && r.err == nil {
		r.fail(fmt.Errorf("bad header flags %#x", flags))
	}
	h.TimeNS = d.state.timeNS + uint64(r.z64())
	h.PID, h.TID = d.state.pid, d.state.tid
	if flags&hdrSamePID == 0 {
		h.PID = r.u32()
	}
	if flags&hdrSameTID == 0 {
		h.TID = r.u32()
	}
	if r.err != nil {
		return nil, 0, fmt.Errorf("%s record: %w", kind, r.err)
	}
	ev := decodeFields(&r, h, kind)
	if r.err != nil {
		return nil, 0, fmt.Errorf("%s record: %w", kind, r.err)
	}
	d.state = codecState{timeNS: h.TimeNS, pid: h.PID, tid: h.TID}
	return ev, size, nil
}

func decodeFields(r *fieldReader, h Header, kind Kind) Event {
	switch kind {
	case KindQPCreate:
		e := &QPCreate{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		e.Type = QPType(r.byte())
		e.SigAll = r.bool()
		e.SendCQ = r.u64()
		e.RecvCQ = r.u64()
		e.Caps.MaxSendWR = r.u32()
		e.Caps.MaxRecvWR = r.u32()
		e.Caps.MaxSendSGE = r.u32()
		e.Caps.MaxRecvSGE = r.u32()
		e.Caps.MaxInlineData = r.u32()
		e.Via = r.str()
		return e
	case KindQPDestroy:
		e := &QPDestroy{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		e.Ret = r.z32()
		return e
	case KindQPModify:
		e := &QPModify{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		e.State = r.z32()
		e.Ret = r.z32()
		return e
	case KindPost:
		e := &Post{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		e.API = API(r.byte())
		e.Aborted = r.bool()
		e.Truncated = r.u32()
		e.Ret = r.z32()
		e.Accepted = r.u32()
		e.EntryNS = entryTime(h.TimeNS, r.z64())
		// Every WR takes at least its mask byte, which bounds the allocation.
		if n := r.count(); n > 0 {
			e.WRs = make([]WR, n)
			var prev WR
			for i := range e.WRs {
				e.WRs[i] = r.wr(prev)
				prev = e.WRs[i]
			}
		}
		if len(r.b) > 0 {
			r.cuts(e)
		}
		return e
	case KindPoll:
		e := &Poll{Header: h}
		e.CQ = r.u64()
		e.Max = r.z32()
		e.Ret = r.z32()
		e.Truncated = r.u32()
		e.EmptyBefore = r.u64()
		e.EntryNS = entryTime(h.TimeNS, r.z64())
		if n := r.count(); n > 0 {
			e.WCs = make([]WC, n)
			var prev WC
			for i := range e.WCs {
				e.WCs[i] = r.wc(prev)
				prev = e.WCs[i]
			}
		}
		return e
	case KindEmptyPolls:
		e := &EmptyPolls{Header: h}
		e.CQ = r.u64()
		e.Count = r.u64()
		return e
	case KindPostRecv:
		e := &PostRecv{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		e.NumWRs = r.u32()
		e.Ret = r.z32()
		e.Accepted = r.u32()
		return e
	case KindLost:
		return &Lost{Header: h, Count: r.u64()}
	case KindExit:
		e := &Exit{Header: h}
		e.Code = r.z32()
		e.Signal = r.z32()
		return e
	case KindAttach:
		e := &Attach{Header: h}
		e.Func = r.str()
		e.Path = r.str()
		e.Offset = r.u64()
		e.How = r.str()
		e.Err = r.str()
		return e
	case KindQPCounters:
		e := &QPCounters{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		for _, p := range [...]*uint64{&e.PostCalls, &e.WRs, &e.Inline, &e.Signaled,
			&e.Doorbells, &e.Errors, &e.ENOMEM, &e.EINVAL, &e.InlineBytes,
			&e.PayloadBytes, &e.PayloadSGEs, &e.WRsPerCallMax} {
			*p = r.u64()
		}
		if len(r.b) > 0 {
			e.WalkCappedPosts = r.u64()
			e.SGECutWRs = r.u64()
			e.SGEsNotSummed = r.u64()
		}
		return e
	case KindCQCounters:
		e := &CQCounters{Header: h}
		e.CQ = r.u64()
		e.Polls = r.u64()
		e.CQEs = r.u64()
		e.Empty = r.u64()
		return e
	}
	return nil
}

// fieldReader reads fields from one record body. The first error sticks and
// every later read returns zero, so decoders read straight through and check
// once at the end.
type fieldReader struct {
	b   []byte
	err error
}

func (r *fieldReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *fieldReader) byte() byte {
	if len(r.b) == 0 {
		r.fail(errors.New("record body too short"))
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fieldReader) bool() bool {
	v := r.byte()
	if v > 1 {
		r.fail(fmt.Errorf("bad bool value %d", v))
	}
	return v == 1
}

func (r *fieldReader) u64() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errors.New("bad or short varint"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *fieldReader) z64() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errors.New("bad or short varint"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *fieldReader) u32() uint32 {
	v := r.u64()
	if v > math.MaxUint32 {
		r.fail(fmt.Errorf("value %d out of range for 32 bits", v))
		return 0
	}
	return uint32(v)
}

func (r *fieldReader) z32() int32 {
	v := r.z64()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(fmt.Errorf("value %d out of range for 32 bits", v))
		return 0
	}
	return int32(v)
}

func (r *fieldReader) str() string {
	n := r.u64()
	if n > uint64(len(r.b)) {
		r.fail(errors.New("string runs past the end of its record"))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a list length; each element takes at least one byte, so a
// length past the remaining bytes is malformed (and never allocated).
func (r *fieldReader) count() int {
	n := r.u64()
	if n > uint64(len(r.b)) {
		r.fail(fmt.Errorf("list of %d elements runs past the end of its record", n))
		return 0
	}
	return int(n)
}

func (r *fieldReader) mask() byte {
	m := r.byte()
	if m&^elemAllSet != 0 {
		r.fail(fmt.Errorf("bad element mask %#x", m))
	}
	return m
}

func (r *fieldReader) wr(prev WR) WR {
	wr := prev
	wr.ID = prev.ID + 1
	m := r.mask()
	if m&elemID != 0 {
		wr.ID += uint64(r.z64())
	}
	if m&wrOpcode != 0 {
		wr.Opcode = r.byte()
	}
	if m&wrFlags != 0 {
		wr.Flags = r.u32()
	}
	if m&wrNumSGE != 0 {
		wr.NumSGE = r.u32()
	}
	if m&wrBytes != 0 {
		wr.Bytes = r.u32()
	}
	return wr
}

// cuts reads a post's cuts into it (its WRs already read).
func (r *fieldReader) cuts(p *Post) {
	p.WalkCapped = r.bool()
	n := r.count()
	next := 0
	for range n {
		gap := r.u64()
		v := r.u64()
		if r.err != nil {
			return
		}
		if gap >= uint64(len(p.WRs)-next) {
			r.fail(fmt.Errorf("SGE cut past the end of a list of %d WRs", len(p.WRs)))
			return
		}
		if v > math.MaxUint8 {
			r.fail(fmt.Errorf("SGE cut %d out of range for 8 bits", v))
			return
		}
		i := next + int(gap)
		p.WRs[i].SGEsNotSummed = uint8(v)
		next = i + 1
	}
}

func (r *fieldReader) wc(prev WC) WC {
	wc := prev
	wc.ID = prev.ID + 1
	m := r.mask()
	if m&elemID != 0 {
		wc.ID += uint64(r.z64())
	}
	if m&wcStatus != 0 {
		wc.Status = r.byte()
	}
	if m&wcOpcode != 0 {
		wc.Opcode = r.byte()
	}
	if m&wcByteLen != 0 {
		wc.ByteLen = r.u32()
	}
	if m&wcQPNum != 0 {
		wc.QPNum = r.u32()
	}
	return wc
}
