package trace

import (
	"errors"
	"fmt"
)

// The compact record layout (version 2). A block, once decompressed, is
// u the length of its column of varying values, the column, then its
// records (encoder.appendBlock). A record is encoded against what the
// block met before it, kept in its blockState: the threads, QPs and CQs
// referred to, and the shapes of the WR and WC lists; and it leaves what
// changes from record to record (times, call durations, where a list's
// wr_ids start, a poll's empty polls) to the column, in the order the
// records walk them (recordCodec.varying). So the records of a steady
// stream repeat byte for byte, which the block's compression takes to
// almost nothing, and the column holds little more than the times'
// jitter.
//
// A reference is u 0 for the entry of its table referred to last, i+1
// for entry i, or the table's length plus one for a new entry, whose key
// follows in full and which the table then holds. A list refers to its
// shape the same way (shapedWalk); a QP's or CQ's entry keeps the wr_id it
// expects next, which a list's first wr_id is stored against. Everything
// resets at each block, so every block decodes on its own. The records
// still carry their kind and length, so a reader skips a kind it does not
// know; a kind added later must not add entries to the tables, change
// their state nor put values in the column, which a reader that skips it
// would not follow.

// maxShapes bounds each block's table of list shapes: a shape met once
// the table is full is stored in full and not kept.
const maxShapes = 1024

var errBadRef = errors.New("reference past the entries of its block")

// blockState is what a version 2 record is encoded against besides the
// previous record.
type blockState struct {
	threads  refTable[threadKey, struct{}]
	qps      refTable[qpKey, qpState]
	cqs      refTable[uint64, cqState]
	wrShapes shapeTable[WR]
	wcShapes shapeTable[WC]
}

type threadKey struct{ pid, tid uint32 }

type qpKey struct {
	qp  uint64
	num uint32
}

// qpState is what a QP's next post is encoded against: the wr_id its
// list most likely starts with, the one after its last post's last WR.
type qpState struct{ nextID uint64 }

// cqState is what a CQ's next poll is encoded against: the wr_id after
// its last poll's last completion.
type cqState struct{ nextID uint64 }

func newBlockState() *blockState {
	b := &blockState{}
	b.reset()
	return b
}

func (b *blockState) reset() {
	b.threads.reset()
	b.qps.reset()
	b.cqs.reset()
	b.wrShapes.reset()
	b.wcShapes.reset()
}

// refTable is one of a block's tables: the keys met, in order, and each
// one's state.
type refTable[K comparable, S any] struct {
	keys  []K
	state []S
	index map[K]int // encoding: where each key is
	last  int       // the entry referred to last, -1 before any
}

func (t *refTable[K, S]) reset() {
	t.keys, t.state, t.last = t.keys[:0], t.state[:0], -1
	clear(t.index)
}

// add appends key to t as its entry referred to last and returns where.
func (t *refTable[K, S]) add(c *recordCodec, key K) int {
	i := len(t.keys)
	t.keys = append(t.keys, key)
	var zero S
	t.state = append(t.state, zero)
	if !c.dec {
		if t.index == nil {
			t.index = make(map[K]int)
		}
		t.index[key] = i
	}
	t.last = i
	return i
}

// tableRef walks a reference to the entry of t whose key is key (when
// encoding). It returns the entry, or isNew for a new entry: the caller
// then walks its key and adds it. A bad reference fails the record and
// returns -1.
func tableRef[K comparable, S any](c *recordCodec, t *refTable[K, S], key K) (i int, isNew bool) {
	if c.dec {
		if r := &c.r; r.i < len(r.b) && r.b[r.i] == 0 && t.last >= 0 { // the usual case
			r.i++
			return t.last, false
		}
		v := c.r.u64()
		switch {
		case v == 0 && t.last >= 0:
			return t.last, false
		case v >= 1 && v <= uint64(len(t.keys)):
			t.last = int(v - 1)
			return t.last, false
		case v == uint64(len(t.keys))+1:
			return -1, true
		}
		c.r.fail(errBadRef)
		return -1, false
	}
	if t.last >= 0 && t.keys[t.last] == key {
		c.out = append(c.out, 0)
		return t.last, false
	}
	if i, ok := t.index[key]; ok {
		c.out = appendU(c.out, uint64(i+1))
		t.last = i
		return i, false
	}
	c.out = appendU(c.out, uint64(len(t.keys)+1))
	return -1, true
}

// thread walks a record's process and thread: version 2 refers to the
// block's threads, version 1 stores them unless they are the previous
// record's.
func (c *recordCodec) thread(h *Header, prev *codecState, flags byte) {
	if c.version < 2 {
		c.sameOr(flags&hdrSamePID != 0, &h.PID, prev.pid)
		c.sameOr(flags&hdrSameTID != 0, &h.TID, prev.tid)
		return
	}
	t := &c.blk.threads
	i, isNew := tableRef(c, t, threadKey{h.PID, h.TID})
	switch {
	case isNew:
		c.u32(&h.PID)
		c.u32(&h.TID)
		t.add(c, threadKey{h.PID, h.TID})
	case i >= 0 && c.dec:
		h.PID, h.TID = t.keys[i].pid, t.keys[i].tid
	}
}

// sameOr walks a field stored unless same, which makes it prev.
func (c *recordCodec) sameOr(same bool, p *uint32, prev uint32) {
	if !same {
		c.u32(p)
	} else if c.dec {
		*p = prev
	}
}

// qp walks the QP of a post or a receive post: its address and number,
// which version 2 refers to in the block's QPs. It returns what the
// record's list is encoded against: the wr_id that QP expects (nil in
// version 1).
func (c *recordCodec) qp(addr *uint64, num *uint32) *uint64 {
	if c.version < 2 {
		c.u64(addr)
		c.u32(num)
		return nil
	}
	t := &c.blk.qps
	i, isNew := tableRef(c, t, qpKey{*addr, *num})
	switch {
	case isNew:
		c.u64(addr)
		c.u32(num)
		i = t.add(c, qpKey{*addr, *num})
	case i >= 0 && c.dec:
		*addr, *num = t.keys[i].qp, t.keys[i].num
	}
	if i < 0 {
		return &c.scratchID
	}
	return &t.state[i].nextID
}

// cq walks the CQ of a poll, as qp does a QP.
func (c *recordCodec) cq(addr *uint64) *uint64 {
	if c.version < 2 {
		c.u64(addr)
		return nil
	}
	t := &c.blk.cqs
	i, isNew := tableRef(c, t, *addr)
	switch {
	case isNew:
		c.u64(addr)
		i = t.add(c, *addr)
	case i >= 0 && c.dec:
		*addr = t.keys[i]
	}
	if i < 0 {
		return &c.scratchID
	}
	return &t.state[i].nextID
}

// wrList walks a post's WRs; next is what its QP expects (see qp).
func (c *recordCodec) wrList(list *[]WR, next *uint64) {
	if c.version < 2 {
		listWalk(c, list, &c.wrs, (*recordCodec).wr)
		return
	}
	shapedWalk(c, list, next, &c.wrs, &c.blk.wrShapes, (*recordCodec).wr)
}

// wcList walks a poll's completions; next is what its CQ expects.
func (c *recordCodec) wcList(list *[]WC, next *uint64) {
	if c.version < 2 {
		listWalk(c, list, &c.wcs, (*recordCodec).wc)
		return
	}
	shapedWalk(c, list, next, &c.wcs, &c.blk.wcShapes, (*recordCodec).wc)
}

// listElem is a list element with a wr_id: a WR or a WC. Its methods
// take a whole list, so that a list costs one call through the type
// parameter, not one an element; the receiver is not used.
type listElem[T any] interface {
	*T
	// shift adds add to each wr_id of l and returns the first and the
	// last after.
	shift(l []T, add uint64) (first, last uint64)
	// noCuts drops what a list's shape leaves out (a WR's cuts).
	noCuts(l []T)
}

func (*WR) shift(l []WR, add uint64) (first, last uint64) {
	for i := range l {
		l[i].ID += add
	}
	return l[0].ID, l[len(l)-1].ID
}

func (*WC) shift(l []WC, add uint64) (first, last uint64) {
	for i := range l {
		l[i].ID += add
	}
	return l[0].ID, l[len(l)-1].ID
}

func (*WR) noCuts(l []WR) {
	for i := range l {
		l[i].SGEsNotSummed = 0
	}
}

func (*WC) noCuts([]WC) {}

// shapeTable holds the list shapes of a block: a list with its wr_ids
// made relative, the first one 1 (so that each element of the usual list,
// consecutive wr_ids alike but for a flag, costs no byte).
type shapeTable[T any] struct {
	index map[string]int // encoding: a shape's stored form → its entry
	n     int            // shapes held
	list  [][]T          // decoding: the shapes held
	view  []T            // encoding: scratch for a list's shape
	slab  slab[T]        // decoding: what the shapes are carved from
}

func (t *shapeTable[T]) reset() {
	clear(t.index)
	clear(t.list) // let the shapes go with their slab
	t.n, t.list = 0, t.list[:0]
}

// shapedWalk walks a list in version 2: u 0 for an empty list, i+1 for
// shape i of the block, or the table's length plus one for a shape stored
// here in full (u its length, then its elements as version 1 stores a
// list's); then, for a list that is not empty, z its first wr_id minus
// the one its QP or CQ expected (*next). The other wr_ids follow from
// the shape.
func shapedWalk[T comparable, P listElem[T]](c *recordCodec, list *[]T, next *uint64, slab *slab[T], t *shapeTable[T], elem func(c *recordCodec, e, prev *T)) {
	if c.dec {
		shapedDecode[T, P](c, list, next, slab, t, elem)
		return
	}
	l := *list
	if len(l) == 0 {
		c.out = append(c.out, 0)
		return
	}
	v := append(t.view[:0], l...)
	t.view = v
	var p P
	first, _ := p.shift(v, 0)
	_, last := p.shift(v, 1-first)
	last += first - 1
	p.noCuts(v)
	at := len(c.out)
	listWalk(c, &v, nil, elem)
	stored := c.out[at:]
	if i, ok := t.index[string(stored)]; ok {
		c.out = appendU(c.out[:at], uint64(i+1))
	} else {
		ref := appendU(nil, uint64(t.n+1))
		if t.n < maxShapes {
			if t.index == nil {
				t.index = make(map[string]int)
			}
			t.index[string(stored)] = t.n
			t.n++
		}
		c.out = append(c.out[:at], append(ref, stored...)...)
	}
	d := int64(first - *next)
	c.varying(&d)
	*next = last + 1
}

func shapedDecode[T comparable, P listElem[T]](c *recordCodec, list *[]T, next *uint64, slab *slab[T], t *shapeTable[T], elem func(c *recordCodec, e, prev *T)) {
	v := c.r.u64()
	var shape []T
	switch {
	case v == 0:
		return
	case v <= uint64(len(t.list)):
		shape = t.list[v-1]
	case v == uint64(len(t.list))+1:
		listWalk(c, &shape, &t.slab, elem)
		if len(shape) == 0 {
			c.r.fail(errors.New("empty list shape"))
			return
		}
		if len(t.list) < maxShapes {
			t.list = append(t.list, shape)
		}
	default:
		c.r.fail(fmt.Errorf("list shape %d past the block's %d", v-1, len(t.list)))
		return
	}
	var d int64
	c.varying(&d)
	first := *next + uint64(d)
	if c.r.err != nil || c.col.err != nil {
		return
	}
	l := slab.take(len(shape))
	copy(l, shape)
	var p P
	_, last := p.shift(l, first-1)
	*next = last + 1
	*list = l
}
