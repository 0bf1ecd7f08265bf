package trace

import (
	"encoding/binary"
	"math"
)

// The usual records of a version 2 block decoded without the walk.
//
// Nearly every record of a recording is a post or a poll that refers to
// a thread, a QP or CQ and a list shape its block already holds, with no
// optional field and none of the groups appended to its kind later. The
// walk of schema.go decodes such a record through a call per field, each
// asking which direction and which version it walks; fastPost and
// fastPoll read it straight. They read only the first release of version
// 2's layout of the two kinds, which can never change (files written so
// must read the same), so the walk stays the one description of the
// format: anything else (an optional field, an appended group or bytes
// after the fields, a new table entry or shape, a value out of range, a
// malformed reference) makes them give way, every state left as it was,
// and the walk decodes the record. checkReader holds every recording the
// fuzzers make to both decoding the same.

// fastRecord decodes the record at the start of p, if it is one fastPost
// or fastPoll decodes (shorter than 128 bytes, as they all are): its event
// and its length; nil where nextRecord must decode it.
func (d *decoder) fastRecord(p []byte) (Event, int) {
	if len(p) < 2 || p[1] >= 0x80 || d.c.blk == nil || d.walkOnly {
		return nil, 0
	}
	size := 2 + int(p[1])
	if size > len(p) {
		return nil, 0
	}
	var ev Event
	switch Kind(p[0]) {
	case KindPost:
		ev = d.fastPost(p[2:size])
	case KindPoll:
		ev = d.fastPoll(p[2:size])
	}
	return ev, size
}

// uvarint reads the u at b[i:] and returns it and where the next field
// starts, -1 when it is malformed or b ends first.
func uvarint(b []byte, i int) (uint64, int) {
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	if i < 0 || i >= len(b) {
		return 0, -1
	}
	v, n := binary.Uvarint(b[i:])
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

// ref is the entry of a table of n entries, whose entry referred to last
// is last, that the reference v refers to (tableRef); -1 for any other.
func ref(v uint64, last, n int) int {
	switch {
	case v == 0:
		return last
	case v <= uint64(n):
		return int(v - 1)
	}
	return -1
}

// fields reads the n fields of a record's body, each a u, into f; false
// when they are not n whole ones and nothing else. Most fields take one
// byte: such a body is read in line by the callers.
func fields(body []byte, f []uint64) bool {
	i := 0
	for j := range f {
		f[j], i = uvarint(body, i)
	}
	return i == len(body)
}

// values reads the next n (at most 4) values of the block's column, and
// reports whether they were there: when they were not, nothing is read.
// The callers read those of a batch with 4 left in line.
func (col *column) values(n int) (v [4]uint64, ok bool) {
	from, k := col.mark()
	for j := range n {
		v[j] = col.u64()
	}
	if col.err != nil {
		col.reset(from, k)
		return v, false
	}
	return v, true
}

// fastPost decodes the body of a post record as the walk does, or returns
// nil where the walk must. Its fields are the references to its thread
// and QP, the mask of its optional fields (0: none), Accepted and the
// reference to its list's shape; its values in the column the time, the
// call's duration and, for a list, where its wr_ids start.
func (d *decoder) fastPost(body []byte) Event {
	var thread, qp, opts, accepted, si uint64
	if len(body) == 5 && (body[0]|body[1]|body[2]|body[3]|body[4]) < 0x80 { // each field one byte
		thread, qp, opts, accepted, si = uint64(body[0]), uint64(body[1]), uint64(body[2]), uint64(body[3]), uint64(body[4])
	} else {
		var f [5]uint64
		if !fields(body, f[:]) {
			return nil
		}
		thread, qp, opts, accepted, si = f[0], f[1], f[2], f[3], f[4]
	}
	b := d.c.blk
	ti, qi := ref(thread, b.threads.last, len(b.threads.keys)), ref(qp, b.qps.last, len(b.qps.keys))
	if ti < 0 || qi < 0 || opts != 0 || accepted > math.MaxUint32 || si > uint64(len(b.wrShapes.list)) {
		return nil
	}
	var t, entry, first uint64
	col := &d.c.col
	if k := col.k; k+3 <= len(col.vals) {
		v := col.vals[k : k+3]
		t, entry, first = v[0], v[1], v[2]
		col.k = k + 2 + min(int(si), 1)
	} else if v, ok := col.values(2 + min(int(si), 1)); ok {
		t, entry, first = v[0], v[1], v[2]
	} else {
		return nil
	}
	h := d.header(ti, unzig(t))
	b.qps.last = qi
	var wrs []WR
	if si > 0 { // its shape, its wr_ids from where the QP expects plus first
		shape, next := b.wrShapes.list[si-1], &b.qps.state[qi].nextID
		wrs = d.c.wrs.take(len(shape))
		for i := range wrs { // as copy, without a call for the usual few
			wrs[i] = shape[i]
		}
		_, last := (*WR).shift(nil, wrs, *next+uint64(unzig(first))-1)
		*next = last + 1
	}
	p := d.posts.one()
	*p = Post{Header: h, QP: b.qps.keys[qi].qp, QPNum: b.qps.keys[qi].num, Accepted: uint32(accepted),
		EntryNS: entryTime(h.TimeNS, unzig(entry)), WRs: wrs}
	return p
}

// fastPoll decodes the body of a poll record as the walk does, or returns
// nil where the walk must. Its fields are the references to its thread
// and CQ, Max, Ret, Truncated and the reference to its list's shape; its
// values in the column the time, EmptyBefore, the call's duration and,
// for a list, where its wr_ids start.
func (d *decoder) fastPoll(body []byte) Event {
	var thread, cq, maxWCs, ret, truncated, si uint64
	if len(body) == 6 && (body[0]|body[1]|body[2]|body[3]|body[4]|body[5]) < 0x80 { // each field one byte
		thread, cq, maxWCs, ret, truncated, si = uint64(body[0]), uint64(body[1]), uint64(body[2]), uint64(body[3]), uint64(body[4]), uint64(body[5])
	} else {
		var f [6]uint64
		if !fields(body, f[:]) {
			return nil
		}
		thread, cq, maxWCs, ret, truncated, si = f[0], f[1], f[2], f[3], f[4], f[5]
	}
	b := d.c.blk
	ti, ci := ref(thread, b.threads.last, len(b.threads.keys)), ref(cq, b.cqs.last, len(b.cqs.keys))
	if ti < 0 || ci < 0 || maxWCs > math.MaxUint32 || ret > math.MaxUint32 || truncated > math.MaxUint32 || si > uint64(len(b.wcShapes.list)) {
		return nil
	}
	var t, empty, entry, first uint64
	col := &d.c.col
	if k := col.k; k+4 <= len(col.vals) {
		v := col.vals[k : k+4]
		t, empty, entry, first = v[0], v[1], v[2], v[3]
		col.k = k + 3 + min(int(si), 1)
	} else if v, ok := col.values(3 + min(int(si), 1)); ok {
		t, empty, entry, first = v[0], v[1], v[2], v[3]
	} else {
		return nil
	}
	h := d.header(ti, unzig(t))
	b.cqs.last = ci
	var wcs []WC
	if si > 0 {
		shape, next := b.wcShapes.list[si-1], &b.cqs.state[ci].nextID
		wcs = d.c.wcs.take(len(shape))
		for i := range wcs {
			wcs[i] = shape[i]
		}
		_, last := (*WC).shift(nil, wcs, *next+uint64(unzig(first))-1)
		*next = last + 1
	}
	p := d.polls.one()
	*p = Poll{Header: h, CQ: b.cqs.keys[ci], Max: unzig32(maxWCs), Ret: unzig32(ret), Truncated: uint32(truncated),
		EmptyBefore: empty, EntryNS: entryTime(h.TimeNS, unzig(entry)), WCs: wcs}
	return p
}

// unzig is the value a z stores; unzig32 of a z of 32 bits or fewer.
func unzig(u uint64) int64   { return int64(u>>1) ^ -int64(u&1) }
func unzig32(u uint64) int32 { return int32(unzig(u)) }

// header is the header of a record read whole, of thread ti of the block,
// the time dt after the record before.
func (d *decoder) header(ti int, dt int64) Header {
	t := &d.c.blk.threads
	t.last = ti
	h := Header{TimeNS: d.state.timeNS + uint64(dt), PID: t.keys[ti].pid, TID: t.keys[ti].tid}
	d.state = codecState{timeNS: h.TimeNS, pid: h.PID, tid: h.TID}
	return h
}
