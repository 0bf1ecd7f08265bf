package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Decoding records; the encoding is described in codec.go.

// decoder turns records back into events of one version's layout. Its
// state resets at each chunk or block.
type decoder struct {
	state codecState
	c     recordCodec
	// Posts and polls, the bulk of a recording, and their WRs and CQEs (in
	// c) are carved from slabs: a few allocations per hundred events
	// instead of two per event. Every event is its own, unless reuse
	// (Reader.Reuse): then the slabs are carved again from their start at
	// each rewind.
	posts slab[Post]
	polls slab[Poll]
	reuse bool
	// walkOnly: every record is decoded by the walk, none by fastPost or
	// fastPoll (the tests compare the two).
	walkOnly bool
}

// newDecoder returns a decoder of the given layout version (1 or 2).
func newDecoder(version uint16) *decoder {
	d := &decoder{}
	d.c.setVersion(version)
	return d
}

func (d *decoder) reset() {
	d.state = codecState{}
	if d.c.blk != nil {
		d.c.blk.reset()
	}
}

const (
	slabEvents = 64
	slabElems  = 512 // WRs or CQEs; longer lists get their own
)

// post and poll carve a new event, zero.
func (d *decoder) post() *Post {
	p := d.posts.one()
	if d.reuse {
		*p = Post{}
	}
	return p
}

func (d *decoder) poll() *Poll {
	p := d.polls.one()
	if d.reuse {
		*p = Poll{}
	}
	return p
}

// rewind gives back the events carved so far, and their lists, to be
// carved again: when reusing, the reader's events are overwritten from
// here on.
func (d *decoder) rewind() {
	if d.reuse {
		d.posts.rewind()
		d.polls.rewind()
		d.c.wrs.rewind()
		d.c.wcs.rewind()
	}
}

// slab is what events or list elements are carved from. An index moves
// through it, so that carving writes no pointer (a write barrier while
// the collector runs).
type slab[T any] struct {
	s []T
	i int
	// kept: the slab was rewound, and is carved again from its start;
	// each new slab it needs is then twice the last, so that soon one
	// holds what is carved between two rewinds.
	kept bool
}

// size is the length of a new slab, at least n.
func (s *slab[T]) size(n int) int {
	if s.kept {
		return max(n, 2*len(s.s))
	}
	return n
}

// one carves one event.
func (s *slab[T]) one() *T {
	if s.i == len(s.s) {
		s.s, s.i = make([]T, s.size(slabEvents)), 0
	}
	e := &s.s[s.i]
	s.i++
	return e
}

// take carves n elements; the result's capacity is n, so that appending
// to it never writes into its neighbour's.
func (s *slab[T]) take(n int) []T {
	if n > slabElems/8 {
		return make([]T, n)
	}
	if len(s.s)-s.i < n {
		s.s, s.i = make([]T, s.size(slabElems)), 0
	}
	l := s.s[s.i : s.i+n : s.i+n]
	s.i += n
	return l
}

// rewind carves the slab again from its start: what was carved from it
// is overwritten.
func (s *slab[T]) rewind() { s.i, s.kept = 0, true }

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
	if ev, size := d.fastRecord(p); ev != nil {
		return ev, size, nil
	}
	if len(p) == 0 {
		return nil, 0, errShortRecord
	}
	kind := Kind(p[0])
	n, w := uint64(0), 1
	if len(p) > 1 && p[1] < 0x80 { // most records are shorter than 128 bytes
		n = uint64(p[1])
	} else {
		n, w = binary.Uvarint(p[1:])
	}
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
	var h Header
	c.header(&h, &d.state)
	if err := c.err(); err != nil {
		return nil, 0, fmt.Errorf("%s record: %w", kind, err)
	}
	ev := d.newEvent(kind)
	if ev != nil {
		*ev.Hdr() = h
		c.fields(ev)
		if err := c.err(); err != nil {
			return nil, 0, fmt.Errorf("%s record: %w", kind, err)
		}
	}
	d.state = codecState{timeNS: h.TimeNS, pid: h.PID, tid: h.TID}
	return ev, size, nil
}

// beginBlock starts decoding the records of a version 2 block, raw as it
// decompressed: u the length of its column of varying values, the column,
// then the records, which it returns.
func (d *decoder) beginBlock(raw []byte) ([]byte, error) {
	d.reset()
	n, w := binary.Uvarint(raw)
	if w <= 0 || n > uint64(len(raw)-w) {
		return nil, errors.New("bad length of the block's varying values")
	}
	d.c.col.begin(raw[w : w+int(n)])
	return raw[w+int(n):], nil
}

// endBlock checks that the records of a block read every value of its
// column.
func (d *decoder) endBlock() error {
	if n := d.c.col.left(); n > 0 {
		return fmt.Errorf("%d bytes of varying values left after the last record of the block", n)
	}
	return nil
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
	case KindWindow:
		return new(Window)
	case KindSQSample:
		return new(SQSample)
	}
	return nil
}

// fieldReader reads fields from one record body. The first error sticks and
// every later read returns zero, so decoders read straight through and check
// once at the end. It moves an index through the body rather than the
// body's slice, which would be a pointer written (and, while the collector
// runs, a write barrier) at every field.
type fieldReader struct {
	b   []byte
	i   int // where the next field starts in b
	err error
	// absent: the record ended before an appended group (see
	// recordCodec.appended), so reads past the end return zero without an
	// error.
	absent bool
}

// rest is what is left of the body.
func (r *fieldReader) rest() []byte { return r.b[r.i:] }

// left is how many bytes are left of the body.
func (r *fieldReader) left() int { return len(r.b) - r.i }

func (r *fieldReader) fail(err error) {
	if r.err == nil && !r.absent {
		r.err = err
	}
	r.i = len(r.b)
}

func (r *fieldReader) byte() byte {
	if r.i >= len(r.b) {
		r.fail(errBodyShort)
		return 0
	}
	v := r.b[r.i]
	r.i++
	return v
}

func (r *fieldReader) bool() bool {
	if r.i < len(r.b) && r.b[r.i] <= 1 {
		v := r.b[r.i]
		r.i++
		return v == 1
	}
	return r.badBool()
}

func (r *fieldReader) badBool() bool {
	if v := r.byte(); v > 1 {
		r.fail(fmt.Errorf("bad bool value %d", v))
	}
	return false
}

// u64 reads a u; most values take one byte, which it reads inline.
func (r *fieldReader) u64() uint64 {
	if r.i < len(r.b) && r.b[r.i] < 0x80 {
		v := r.b[r.i]
		r.i++
		return uint64(v)
	}
	return r.u64long()
}

// u64long reads a u that does not take one byte: times and durations
// take two, read here in place.
func (r *fieldReader) u64long() uint64 {
	if i := r.i; i+1 < len(r.b) && r.b[i+1] < 0x80 {
		r.i = i + 2
		return uint64(r.b[i]&0x7f) | uint64(r.b[i+1])<<7
	}
	v, n := binary.Uvarint(r.rest())
	if n <= 0 {
		r.fail(errBadVarint)
		return 0
	}
	r.i += n
	return v
}

// z64 reads a z, as u64 a u.
func (r *fieldReader) z64() int64 {
	if r.i < len(r.b) && r.b[r.i] < 0x80 {
		u := r.b[r.i]
		r.i++
		return int64(u>>1) ^ -int64(u&1)
	}
	return r.z64long()
}

func (r *fieldReader) z64long() int64 {
	u := r.u64long()
	return int64(u>>1) ^ -int64(u&1)
}

// u32, u16 and z32 read their one-byte values in place too; longer ones
// are range-checked.

func (r *fieldReader) u32() uint32 {
	if r.i < len(r.b) && r.b[r.i] < 0x80 {
		v := r.b[r.i]
		r.i++
		return uint32(v)
	}
	return uint32(r.bounded(r.u64long(), math.MaxUint32, 32))
}

func (r *fieldReader) u16() uint16 {
	if r.i < len(r.b) && r.b[r.i] < 0x80 {
		v := r.b[r.i]
		r.i++
		return uint16(v)
	}
	return uint16(r.bounded(r.u64long(), math.MaxUint16, 16))
}

// bounded returns v, or fails for a v past max, a field of bits bits.
func (r *fieldReader) bounded(v, max uint64, bits int) uint64 {
	if v > max {
		r.fail(fmt.Errorf("value %d out of range for %d bits", v, bits))
		return 0
	}
	return v
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
	if n > uint64(r.left()) {
		r.fail(errors.New("string runs past the end of its record"))
		return ""
	}
	s := string(r.b[r.i : r.i+int(n)])
	r.i += int(n)
	return s
}

// count reads a list length; each element takes at least one byte, so a
// length past the remaining bytes is malformed (and never allocated).
func (r *fieldReader) count() int {
	n := r.u64()
	if n > uint64(r.left()) {
		r.fail(fmt.Errorf("list of %d elements runs past the end of its record", n))
		return 0
	}
	return int(n)
}
