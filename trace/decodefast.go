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

// uvarint reads the u at b[i:] and returns it and where the next field
// starts, -1 when it is malformed or b ends first.
func uvarint(b []byte, i int) (uint64, int) {
	if uint(i) < uint(len(b)) && b[i] < 0x80 {
		return uint64(b[i]), i + 1
	}
	return uvarintLong(b, i)
}

func uvarintLong(b []byte, i int) (uint64, int) {
	if i < 0 || i >= len(b) {
		return 0, -1
	}
	v, n := binary.Uvarint(b[i:])
	if n <= 0 {
		return 0, -1
	}
	return v, i + n
}

// fastRef reads at b[i:] a reference to an entry of a table of n entries
// whose entry referred to last is last (tableRef): it returns the entry,
// -1 for any other reference, and where the next field starts.
func fastRef(b []byte, i, last, n int) (int, int) {
	v, i := uvarint(b, i)
	return ref(v, last, n), i
}

// ref is the entry reference v refers to, -1 for none.
func ref(v uint64, last, n int) int {
	switch {
	case v == 0:
		return last
	case v <= uint64(n):
		return int(v - 1)
	}
	return -1
}

// fastValues reads the next n (at most 4) values of the block's column
// into v, and reports whether they were there: when they were not,
// nothing is read.
func (d *decoder) fastValues(v *[4]uint64, n int) bool {
	col := &d.c.col
	if col.k+n <= len(col.vals) { // the usual case: in the batch
		for j, u := range col.vals[col.k : col.k+n] {
			v[j] = u
		}
		col.k += n
		return true
	}
	from, k := col.mark()
	for j := range n {
		v[j] = col.u64()
	}
	if col.err != nil {
		col.reset(from, k)
		return false
	}
	return true
}

// fastList carves a list of shape whose first wr_id is *next plus d,
// and moves *next past its last.
func fastList[T any, P listElem[T]](s *slab[T], shape []T, next *uint64, d int64) []T {
	l := s.take(len(shape))
	var p P
	*next = p.place(l, shape, *next+uint64(d)-1) + 1
	return l
}

// fastPost decodes the body of a post record as the walk does, or returns
// nil where the walk must. Its fields are the references to its thread
// and QP, the mask of its optional fields (0: none), Accepted and the
// reference to its list's shape; its values in the column the time, the
// call's duration and, for a list, where its wr_ids start.
func (d *decoder) fastPost(body []byte) Event {
	b := d.c.blk
	var ti, qi int
	var accepted, si uint64
	if len(body) == 5 && (body[0]|body[1]|body[2]|body[3]|body[4]) < 0x80 { // each field one byte
		if body[2] != 0 {
			return nil
		}
		ti, qi = ref(uint64(body[0]), b.threads.last, len(b.threads.keys)), ref(uint64(body[1]), b.qps.last, len(b.qps.keys))
		accepted, si = uint64(body[3]), uint64(body[4])
	} else {
		var i int
		ti, i = fastRef(body, 0, b.threads.last, len(b.threads.keys))
		qi, i = fastRef(body, i, b.qps.last, len(b.qps.keys))
		if i < 0 || i >= len(body) || body[i] != 0 {
			return nil
		}
		accepted, i = uvarint(body, i+1)
		si, i = uvarint(body, i)
		if i != len(body) || accepted > math.MaxUint32 {
			return nil
		}
	}
	var v [4]uint64
	if ti < 0 || qi < 0 || si > uint64(len(b.wrShapes.list)) || !d.fastValues(&v, 2+min(int(si), 1)) {
		return nil
	}
	h := d.header(ti, unzig(v[0]))
	b.qps.last = qi
	var wrs []WR
	if si > 0 {
		wrs = fastList[WR, *WR](&d.c.wrs, b.wrShapes.list[si-1], &b.qps.state[qi].nextID, unzig(v[2]))
	}
	p := d.posts.one()
	*p = Post{Header: h, QP: b.qps.keys[qi].qp, QPNum: b.qps.keys[qi].num, Accepted: uint32(accepted),
		EntryNS: entryTime(h.TimeNS, unzig(v[1])), WRs: wrs}
	return p
}

// fastPoll decodes the body of a poll record as the walk does, or returns
// nil where the walk must. Its fields are the references to its thread
// and CQ, Max, Ret, Truncated and the reference to its list's shape; its
// values in the column the time, EmptyBefore, the call's duration and,
// for a list, where its wr_ids start.
func (d *decoder) fastPoll(body []byte) Event {
	b := d.c.blk
	var ti, ci int
	var maxWCs, ret, truncated, si uint64
	if len(body) == 6 && (body[0]|body[1]|body[2]|body[3]|body[4]|body[5]) < 0x80 { // each field one byte
		ti, ci = ref(uint64(body[0]), b.threads.last, len(b.threads.keys)), ref(uint64(body[1]), b.cqs.last, len(b.cqs.keys))
		maxWCs, ret, truncated, si = uint64(body[2]), uint64(body[3]), uint64(body[4]), uint64(body[5])
	} else {
		var i int
		ti, i = fastRef(body, 0, b.threads.last, len(b.threads.keys))
		ci, i = fastRef(body, i, b.cqs.last, len(b.cqs.keys))
		maxWCs, i = uvarint(body, i)
		ret, i = uvarint(body, i)
		truncated, i = uvarint(body, i)
		si, i = uvarint(body, i)
		if i != len(body) || maxWCs > math.MaxUint32 || ret > math.MaxUint32 || truncated > math.MaxUint32 {
			return nil
		}
	}
	var v [4]uint64
	if ti < 0 || ci < 0 || si > uint64(len(b.wcShapes.list)) || !d.fastValues(&v, 3+min(int(si), 1)) {
		return nil
	}
	h := d.header(ti, unzig(v[0]))
	b.cqs.last = ci
	var wcs []WC
	if si > 0 {
		wcs = fastList[WC, *WC](&d.c.wcs, b.wcShapes.list[si-1], &b.cqs.state[ci].nextID, unzig(v[3]))
	}
	p := d.polls.one()
	*p = Poll{Header: h, CQ: b.cqs.keys[ci], Max: unzig32(maxWCs), Ret: unzig32(ret), Truncated: uint32(truncated),
		EmptyBefore: v[1], EntryNS: entryTime(h.TimeNS, unzig(v[2])), WCs: wcs}
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
