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
	c     recordCodec
	// Posts and polls, the bulk of a recording, and their WRs and CQEs (in
	// c) are carved from slabs: a few allocations per hundred events
	// instead of two per event. Every event is still its own, never reused.
	posts []Post
	polls []Poll
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

// Errors of fieldReader that say nothing of the value: made once, as a
// read past the end of a record without its appended groups fails quietly
// and must cost no allocation.
var (
	errBodyShort = errors.New("record body too short")
	errBadVarint = errors.New("bad or short varint")
)

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
	c := &d.c
	c.beginDecode(p[1+w : size])
	r := &c.r
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
	ev := d.newEvent(kind)
	if ev != nil {
		*ev.Hdr() = h
		c.fields(ev)
		if r.err != nil {
			return nil, 0, fmt.Errorf("%s record: %w", kind, r.err)
		}
	}
	d.state = codecState{timeNS: h.TimeNS, pid: h.PID, tid: h.TID}
	return ev, size, nil
}

// newEvent returns a new event of kind, nil for a kind this version does
// not know.
func (d *decoder) newEvent(kind Kind) Event {
	switch kind {
	case KindQPCreate:
		return new(QPCreate)
	case KindQPDestroy:
		return new(QPDestroy)
	case KindQPModify:
		return new(QPModify)
	case KindPost:
		return d.post()
	case KindPoll:
		return d.poll()
	case KindEmptyPolls:
		return new(EmptyPolls)
	case KindPostRecv:
		return new(PostRecv)
	case KindLost:
		return new(Lost)
	case KindExit:
		return new(Exit)
	case KindAttach:
		return new(Attach)
	case KindQPCounters:
		return new(QPCounters)
	case KindCQCounters:
		return new(CQCounters)
	case KindCQCreate:
		return new(CQCreate)
	case KindSRQCreate:
		return new(SRQCreate)
	case KindSRQDestroy:
		return new(SRQDestroy)
	case KindEnd:
		return new(End)
	case KindCQChange:
		return new(CQChange)
	case KindScan:
		return new(Scan)
	case KindProc:
		return new(Proc)
	case KindPostFail:
		return new(PostFail)
	}
	return nil
}

// fieldReader reads fields from one record body. The first error sticks and
// every later read returns zero, so decoders read straight through and check
// once at the end.
type fieldReader struct {
	b   []byte
	err error
	// absent: the record ended before an appended group (see
	// recordCodec.appended), so reads past the end return zero without an
	// error.
	absent bool
}

func (r *fieldReader) fail(err error) {
	if r.err == nil && !r.absent {
		r.err = err
	}
	r.b = nil
}

func (r *fieldReader) byte() byte {
	if len(r.b) == 0 {
		r.fail(errBodyShort)
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
		r.fail(errBadVarint)
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
		r.fail(errBadVarint)
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
