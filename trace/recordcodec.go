package trace

import (
	"encoding/binary"
	"fmt"
	"math"
)

// recordCodec walks the fields of one record body in one direction, so
// that a single description of a kind's fields (recordCodec.fields in
// schema.go) both encodes and decodes it. Each method takes a pointer to a
// field: encoding appends the field's value to out, decoding reads the
// field from r into it. Decoding errors stick in r and later reads return
// zero, so a walk reads straight through and is checked once at the end.
type recordCodec struct {
	dec bool
	// version is the record layout walked: below 2 version 1's, else
	// version 2's, which refers to the tables of its block (blk).
	version uint16
	out     []byte      // encoding: the body so far
	r       fieldReader // decoding: the rest of the body
	blk     *blockState // version 2: what the block's records met so far
	// Version 2: the block's values that change from record to record
	// (see varying), apart from the records.
	vals []byte // encoding: the block's so far
	col  column // decoding: the block's

	// Appended groups (see appended).
	tail bool // the walk is past the record's first appended group
	set  bool // encoding: the current group is set
	keep int  // encoding: the length of out through the last set group

	// The list element being walked (see elemStart).
	mask   byte
	bit    uint // the next field's bit in mask
	maskAt int  // encoding: where the mask byte is in out

	// Decoding: the slabs lists are carved from.
	wrs slab[WR]
	wcs slab[WC]

	// Version 2: where a QP or CQ expects a wr_id when the reference to
	// it failed (see qp).
	scratchID uint64
}

// setVersion makes the codec walk the given layout version (1 or 2).
func (c *recordCodec) setVersion(version uint16) {
	c.version = version
	if version >= 2 {
		c.blk = newBlockState()
	}
}

func (c *recordCodec) beginEncode(out []byte) {
	c.dec, c.out, c.tail, c.set = false, out, false, false
}

func (c *recordCodec) beginDecode(body []byte) {
	c.dec, c.tail = true, false
	c.r.b, c.r.i, c.r.absent = body, 0, false
	if c.r.err != nil {
		c.r.err = nil
	}
}

// err is the first error of a decoding walk, in the record or in the
// block's varying values.
func (c *recordCodec) err() error {
	if c.r.err != nil {
		return c.r.err
	}
	if c.col.err != nil {
		return fmt.Errorf("varying values: %w", c.col.err)
	}
	return nil
}

// appended starts a group of fields appended to a kind after its first
// release; set says whether the event has anything in the group (it
// matters to encoding only). A record stores its groups up to the last one
// that is set, so a record with none stored reads as it did before the
// groups existed; a reader reads the groups there are, and the fields of
// those that are not there stay zero. It says whether to walk the group:
// always when encoding, when decoding if the record has it.
func (c *recordCodec) appended(set bool) bool {
	if c.dec {
		if c.r.left() == 0 {
			c.r.absent = true
		}
		return !c.r.absent
	}
	if !c.tail || c.set {
		c.keep = len(c.out)
	}
	c.tail, c.set = true, set
	return true
}

// appendedFlag starts an appended group whose presence is the value of *p:
// a bool stored as the group being there.
func (c *recordCodec) appendedFlag(p *bool) bool {
	walk := c.appended(*p)
	if c.dec && walk {
		*p = true
	}
	return walk
}

// end finishes a walk: encoding drops the appended groups after the last
// one that is set.
func (c *recordCodec) end() {
	if c.dec || !c.tail {
		return
	}
	if c.set {
		c.keep = len(c.out)
	}
	c.out = c.out[:c.keep]
}

// header walks a record's common header against prev, the previous record
// of its chunk or block.
func (c *recordCodec) header(h *Header, prev *codecState) {
	if c.version >= 2 {
		c.thread(h, prev, 0)
		c.delta(&h.TimeNS, prev.timeNS)
		return
	}
	var flags byte
	if !c.dec {
		if h.PID == prev.pid {
			flags |= hdrSamePID
		}
		if h.TID == prev.tid {
			flags |= hdrSameTID
		}
	}
	c.u8(&flags)
	if flags&^(hdrSamePID|hdrSameTID) != 0 {
		c.r.fail(fmt.Errorf("bad header flags %#x", flags))
	}
	c.delta(&h.TimeNS, prev.timeNS)
	c.thread(h, prev, flags)
}

// delta walks a field stored as z its difference from base (mod 2^64),
// a varying value.
func (c *recordCodec) delta(p *uint64, base uint64) {
	d := int64(*p - base)
	c.varying(&d)
	if c.dec {
		*p = base + uint64(d)
	}
}

// varying walks a z value that changes from record to record, a time or
// a wr_id where a list starts: version 2 keeps these apart from the
// records, in the block's column of varying values, so that the records
// of a steady stream repeat byte for byte and compress to little, and the
// column to what the values' entropy is. Only the header and the kinds of
// version 2's first release put values there: a reader that skips a kind
// does not know what it put, and fields appended to a kind later are
// dropped with their group, which the column would not follow.
func (c *recordCodec) varying(p *int64) {
	switch {
	case c.version < 2:
		c.z64(p)
	case c.dec:
		*p = c.col.z64()
	default:
		c.vals = binary.AppendVarint(c.vals, *p)
	}
}

// varyingU walks an unsigned value that changes from record to record (a
// count), as varying does a signed one.
func (c *recordCodec) varyingU(p *uint64) {
	switch {
	case c.version < 2:
		c.u64(p)
	case c.dec:
		*p = c.col.u64()
	default:
		c.vals = binary.AppendUvarint(c.vals, *p)
	}
}

// The walk of each field is small enough to be inlined into the walk of
// a kind: decoding reads the usual one-byte value in place, encoding calls
// out.

func (c *recordCodec) u64(p *uint64) {
	if c.dec {
		*p = c.r.u64()
		return
	}
	c.putU(*p)
}

func (c *recordCodec) z64(p *int64) {
	if c.dec {
		*p = c.r.z64()
		return
	}
	c.putZ(*p)
}

func (c *recordCodec) u32(p *uint32) {
	if c.dec {
		*p = c.r.u32()
		return
	}
	c.putU(uint64(*p))
}

func (c *recordCodec) u16(p *uint16) {
	if c.dec {
		*p = c.r.u16()
		return
	}
	c.putU(uint64(*p))
}

func (c *recordCodec) z32(p *int32) {
	if c.dec {
		*p = c.r.z32()
		return
	}
	c.putZ(int64(*p))
}

func (c *recordCodec) putU(v uint64) { c.out = binary.AppendUvarint(c.out, v) }
func (c *recordCodec) putZ(v int64)  { c.out = binary.AppendVarint(c.out, v) }

func (c *recordCodec) u8(p *uint8) {
	if c.dec {
		*p = c.r.byte()
		return
	}
	c.out = append(c.out, *p)
}

func (c *recordCodec) bool(p *bool) {
	if c.dec {
		*p = c.r.bool()
		return
	}
	c.putBool(*p)
}

func (c *recordCodec) putBool(v bool) { c.out = appendBool(c.out, v) }

func (c *recordCodec) str(p *string) {
	if c.dec {
		*p = c.r.str()
		return
	}
	c.out = appendStr(c.out, *p)
}

// entry walks an EntryNS field of an event returned at timeNS (see
// entryDelta).
func (c *recordCodec) entry(p *uint64, timeNS uint64) {
	d := entryDelta(timeNS, *p)
	c.varying(&d)
	if c.dec {
		*p = entryTime(timeNS, d)
	}
}

// count walks a list's length, n when encoding.
func (c *recordCodec) count(n int) int {
	if c.dec {
		return c.r.count()
	}
	c.out = binary.AppendUvarint(c.out, uint64(n))
	return n
}

// listWalk walks a list: its length, then each element given the one
// before it (nil for the first). Decoding carves the list from slab; an
// empty list decodes as nil.
func listWalk[T any](c *recordCodec, list *[]T, slab *slab[T], elem func(c *recordCodec, e, prev *T)) {
	n := c.count(len(*list))
	if n == 0 {
		return
	}
	if c.dec {
		// Every element takes at least its mask byte, which bounds n.
		*list = slab.take(n)
	}
	l := *list
	elem(c, &l[0], nil)
	for i := 1; i < len(l); i++ {
		elem(c, &l[i], &l[i-1])
	}
}

// elemDefaultIn returns where an element e's default is made: e itself
// when decoding (the fields stored then overwrite it), scratch when
// encoding.
func elemDefaultIn[T any](c *recordCodec, e, scratch *T) *T {
	if c.dec {
		return e
	}
	return scratch
}

// elemDefault starts a list element e whose default, what it is when none
// of its fields is stored, is *def. An element is a mask byte, then the
// fields that differ from the default, each field's bit in the mask in the
// order they are walked (elemDelta, elemU8, elemU32), then elemEnd; the
// fields not stored are the default's. An element equal to its default is
// its mask 0 alone: elemDefault reports it, and it is walked whole.
func elemDefault[T comparable](c *recordCodec, e, def *T) bool {
	if c.dec {
		if r := &c.r; r.i < len(r.b) && r.b[r.i] == 0 {
			r.i++
			return true
		}
	} else if *e == *def {
		c.out = append(c.out, 0)
		return true
	}
	c.elemStart()
	return false
}

// elemStart starts the mask of an element that is not its default.
func (c *recordCodec) elemStart() {
	c.bit = 1
	if c.dec {
		c.mask = c.r.byte()
		return
	}
	c.mask = 0
	c.maskAt = len(c.out)
	c.out = append(c.out, 0)
}

// elemEnd finishes a list element: encoding stores its mask, decoding
// checks it has no bits past the element's fields.
func (c *recordCodec) elemEnd() {
	if c.dec {
		if uint(c.mask) >= c.bit {
			c.r.fail(fmt.Errorf("bad element mask %#x", c.mask))
		}
		return
	}
	c.out[c.maskAt] = c.mask
}

// elemField takes the next bit of an element's mask and says whether the
// field it stands for is stored: when decoding, its bit is set; when
// encoding, it differs from its default.
func (c *recordCodec) elemField(differs bool) (byte, bool) {
	bit := c.bit
	c.bit <<= 1
	if c.dec {
		return byte(bit), uint(c.mask)&bit != 0
	}
	return byte(bit), differs
}

// elemDelta walks an element field stored as z its difference from its
// default (an ID, whose default follows the ID before).
func (c *recordCodec) elemDelta(p *uint64, def uint64) {
	if bit, stored := c.elemField(*p != def); stored {
		if c.dec {
			*p = def + uint64(c.r.z64())
			return
		}
		c.mask |= bit
		c.out = binary.AppendVarint(c.out, int64(*p-def))
	}
}

func (c *recordCodec) elemU8(p *uint8, def uint8) {
	if bit, stored := c.elemField(*p != def); stored {
		c.mask |= bit
		c.u8(p)
	}
}

func (c *recordCodec) elemU32(p *uint32, def uint32) {
	if bit, stored := c.elemField(*p != def); stored {
		c.mask |= bit
		c.u32(p)
	}
}

// Optional fields of a record: version 2 stores them as a list element's
// fields are stored (elemStart), behind a mask byte, each only where it is
// not zero; version 1 stores each one. opts starts them and says whether
// to walk them: not when decoding a mask of none (the fields of a new
// event are zero).

func (c *recordCodec) opts() bool {
	if c.version < 2 {
		return true
	}
	if c.dec {
		if r := &c.r; r.i < len(r.b) && r.b[r.i] == 0 {
			r.i++
			return false
		}
	}
	c.elemStart()
	return true
}

func (c *recordCodec) optEnd() {
	if c.version >= 2 {
		c.elemEnd()
	}
}

// opt says whether an optional field, not zero when encoding, is stored;
// decoding, one that is not is zero.
func opt[T comparable](c *recordCodec, p *T) bool {
	if c.version < 2 {
		return true
	}
	var zero T
	bit, stored := c.elemField(*p != zero)
	if stored {
		c.mask |= bit
	} else if c.dec {
		*p = zero
	}
	return stored
}

func (c *recordCodec) optU8(p *uint8) {
	if opt(c, p) {
		c.u8(p)
	}
}

func (c *recordCodec) optU32(p *uint32) {
	if opt(c, p) {
		c.u32(p)
	}
}

func (c *recordCodec) optZ32(p *int32) {
	if opt(c, p) {
		c.z32(p)
	}
}

func (c *recordCodec) optBool(p *bool) {
	if opt(c, p) {
		c.bool(p)
	}
}

// cutsSet says whether a post's list has cuts to store (encoding only).
func (c *recordCodec) cutsSet(wrs []WR) bool {
	if c.dec {
		return false
	}
	for i := range wrs {
		if wrs[i].SGEsNotSummed > 0 {
			return true
		}
	}
	return false
}

// cuts walks the SGE cuts of a post's list (its WRs already walked): u
// count, then for each WR with SGEsNotSummed > 0, in order, u the index gap
// (its index minus the previous listed index plus one; the first: its
// index) and u SGEsNotSummed.
func (c *recordCodec) cuts(wrs []WR) {
	if !c.dec {
		if !c.set { // the group is dropped at the end: nothing to count
			return
		}
		n := 0
		for i := range wrs {
			if wrs[i].SGEsNotSummed > 0 {
				n++
			}
		}
		c.out = binary.AppendUvarint(c.out, uint64(n))
		next := 0 // index the next gap counts from
		for i := range wrs {
			if v := wrs[i].SGEsNotSummed; v > 0 {
				c.out = binary.AppendUvarint(c.out, uint64(i-next))
				c.out = binary.AppendUvarint(c.out, uint64(v))
				next = i + 1
			}
		}
		return
	}
	r := &c.r
	n := r.count()
	next := 0
	for range n {
		gap := r.u64()
		v := r.u64()
		if r.err != nil {
			return
		}
		if gap >= uint64(len(wrs)-next) {
			r.fail(fmt.Errorf("SGE cut past the end of a list of %d WRs", len(wrs)))
			return
		}
		if v > math.MaxUint8 {
			r.fail(fmt.Errorf("SGE cut %d out of range for 8 bits", v))
			return
		}
		i := next + int(gap)
		wrs[i].SGEsNotSummed = uint8(v)
		next = i + 1
	}
}
