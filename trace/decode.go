package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Decoding records; the encoding is described in codec.go.

// decoder turns records back into events. Its state resets at each chunk.
type decoder struct {
	state codecState
	// Posts and polls, the bulk of a recording, and their WRs and CQEs are
	// carved from slabs: a few allocations per hundred events instead of
	// two per event. Every event is still its own, never reused.
	posts []Post
	polls []Poll
	wrs   []WR
	wcs   []WC
}

func (d *decoder) reset() { d.state = codecState{} }

const (
	slabEvents = 64
	slabElems  = 512 // WRs or CQEs; longer lists get their own
)

func (d *decoder) post() *Post { return one(&d.posts) }

func (d *decoder) poll() *Poll { return one(&d.polls) }

// one carves one event from slab.
func one[T any](slab *[]T) *T {
	if len(*slab) == 0 {
		*slab = make([]T, slabEvents)
	}
	e := &(*slab)[0]
	*slab = (*slab)[1:]
	return e
}

// take carves n elements from slab; the result's capacity is n, so that
// appending to it never writes into its neighbour's.
func take[T any](slab *[]T, n int) []T {
	if n > slabElems/8 {
		return make([]T, n)
	}
	if len(*slab) < n {
		*slab = make([]T, slabElems)
	}
	s := (*slab)[:n:n]
	*slab = (*slab)[n:]
	return s
}

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
	ev := d.decodeFields(&r, h, kind)
	if r.err != nil {
		return nil, 0, fmt.Errorf("%s record: %w", kind, r.err)
	}
	d.state = codecState{timeNS: h.TimeNS, pid: h.PID, tid: h.TID}
	return ev, size, nil
}

func (d *decoder) decodeFields(r *fieldReader, h Header, kind Kind) Event {
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
		e.Gen = r.gen()
		if len(r.b) > 0 {
			e.Lib = r.str()
		}
		if len(r.b) > 0 {
			e.State = r.z32()
		}
		return e
	case KindQPDestroy:
		e := &QPDestroy{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		e.Ret = r.z32()
		e.Gen = r.gen()
		return e
	case KindQPModify:
		e := &QPModify{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		e.State = r.z32()
		e.Ret = r.z32()
		return e
	case KindPost:
		e := d.post()
		e.Header = h
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
			e.WRs = take(&d.wrs, n)
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
		e := d.poll()
		e.Header = h
		e.CQ = r.u64()
		e.Max = r.z32()
		e.Ret = r.z32()
		e.Truncated = r.u32()
		e.EmptyBefore = r.u64()
		e.EntryNS = entryTime(h.TimeNS, r.z64())
		if n := r.count(); n > 0 {
			e.WCs = take(&d.wcs, n)
			var prev WC
			for i := range e.WCs {
				e.WCs[i] = r.wc(prev)
				prev = e.WCs[i]
			}
		}
		if len(r.b) > 0 {
			e.Ex = r.bool()
		}
		return e
	case KindEmptyPolls:
		e := &EmptyPolls{Header: h}
		e.CQ = r.u64()
		e.Count = r.u64()
		e.Gen = r.gen()
		return e
	case KindPostRecv:
		e := &PostRecv{Header: h}
		e.QP = r.u64()
		e.QPNum = r.u32()
		e.NumWRs = r.u32()
		e.Ret = r.z32()
		e.Accepted = r.u32()
		if len(r.b) > 0 {
			e.SRQ = r.bool()
		}
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
		if len(r.b) > 0 {
			e.DebugFile = r.str()
		}
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
		e.Gen = r.gen()
		if len(r.b) > 0 {
			e.RecvsCounted = true
			e.RecvCalls = r.u64()
			e.Recvs = r.u64()
			e.RecvFailed = r.u64()
		}
		return e
	case KindCQCounters:
		e := &CQCounters{Header: h}
		e.CQ = r.u64()
		e.Polls = r.u64()
		e.CQEs = r.u64()
		e.Empty = r.u64()
		e.Gen = r.gen()
		return e
	case KindCQCreate:
		return &CQCreate{Header: h, CQ: r.u64(), Gen: r.u64(), CQE: r.u32()}
	case KindSRQCreate:
		return &SRQCreate{Header: h, SRQ: r.u64(), Gen: r.u64(), MaxWR: r.u32()}
	case KindSRQDestroy:
		return &SRQDestroy{Header: h, SRQ: r.u64(), Gen: r.u64(), Ret: r.z32()}
	case KindEnd:
		e := &End{Header: h, Reason: r.str(), Err: r.bool()}
		if len(r.b) > 0 {
			e.CutNS = r.u64()
			e.InFlightUnseen = r.u64()
		}
		return e
	case KindCQChange:
		e := &CQChange{Header: h}
		e.Op = CQOp(r.byte())
		e.CQ = r.u64()
		e.CQE = r.z32()
		e.ModMask = r.u32()
		e.ModCount = r.u16()
		e.ModPeriodUS = r.u16()
		e.Ret = r.z32()
		e.Via = r.str()
		return e
	case KindScan:
		e := &Scan{Header: h}
		e.Bytes = r.u64()
		e.Mappings = r.u32()
		e.DurationNS = r.u64()
		e.Contexts = r.u32()
		e.QPs = r.u32()
		e.StopNS = r.u64()
		e.Cut = r.str()
		e.Err = r.str()
		if len(r.b) > 0 {
			e.KernelCheck = r.str()
		}
		return e
	case KindProc:
		return &Proc{Header: h, How: r.str(), Parent: r.u32(), Comm: r.str()}
	}
	return nil
}

// gen reads an object's generation where a record may end before it (see
// appendGen).
func (r *fieldReader) gen() uint64 {
	if len(r.b) == 0 {
		return 0
	}
	return r.u64()
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
	if len(r.b) > 0 && r.b[0] < 0x80 { // most values take one byte
		v := r.b[0]
		r.b = r.b[1:]
		return uint64(v)
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errors.New("bad or short varint"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *fieldReader) z64() int64 {
	if len(r.b) > 0 && r.b[0] < 0x80 { // most values take one byte
		u := r.b[0]
		r.b = r.b[1:]
		return int64(u>>1) ^ -int64(u&1)
	}
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

func (r *fieldReader) u16() uint16 {
	v := r.u64()
	if v > math.MaxUint16 {
		r.fail(fmt.Errorf("value %d out of range for 16 bits", v))
		return 0
	}
	return uint16(v)
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
