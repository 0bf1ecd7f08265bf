package session

import (
	"slices"

	"github.com/sqscope/sqscope/trace"
)

// flightObjects are what a flight recording's window may refer to without
// holding it: the processes, probes, CQs, SRQs and QPs of the trace, each
// with the ring block (trace.RingBlock.Seq) its first event and its end
// went into. A file written on a trigger starts with the events of those
// created before its first block and not ended before it (prefix): its
// readers then know the QPs' caps, CQs and providers as the whole trace
// did. An object is forgotten once its end leaves the ring.
type flightObjects struct {
	objs     map[objKey]*flightObj
	attaches []flightEvent
	// attachesLeft: the probes beyond maxFlightAttaches are not kept
	attachesLeft int
	next         uint64 // creation order
}

// maxFlightAttaches bounds the probes kept for the prefix.
const maxFlightAttaches = 4096

type objKey struct {
	kind trace.Kind // of its create: KindQPCreate, KindCQCreate, KindSRQCreate, KindProc
	pid  uint32
	addr uint64
}

// flightObj is one object's events to re-emit: its create, then the last
// of each change that stays true (a QP's state, a CQ's depth and
// moderation).
type flightObj struct {
	order   uint64
	seq     uint64 // the block of its create
	gone    bool
	goneSeq uint64 // the block of its end
	events  []trace.Event
	// qp: the index in events of the QP's last state change (0: none)
	stateAt int
}

type flightEvent struct {
	seq uint64
	ev  trace.Event
}

func newFlightObjects() flightObjects {
	return flightObjects{objs: map[objKey]*flightObj{}}
}

// note keeps what ev, written to ring block seq, says about an object.
// Events are reused by the tracer: what is kept is a copy.
func (o *flightObjects) note(ev trace.Event, seq uint64) {
	switch e := ev.(type) {
	case *trace.QPCreate:
		c := *e
		o.create(objKey{trace.KindQPCreate, e.PID, e.QP}, seq, &c)
	case *trace.QPModify:
		if q := o.live(objKey{trace.KindQPCreate, e.PID, e.QP}); q != nil && e.Ret == 0 && e.State >= 0 {
			c := *e
			if q.stateAt == 0 {
				q.stateAt = len(q.events)
				q.events = append(q.events, &c)
			}
			q.events[q.stateAt] = &c
		}
	case *trace.QPDestroy:
		if e.Ret == 0 {
			o.end(objKey{trace.KindQPCreate, e.PID, e.QP}, seq)
		}
	case *trace.CQCreate:
		c := *e
		k := objKey{trace.KindCQCreate, e.PID, e.CQ}
		if q := o.live(k); q != nil && !hasKind(q.events, trace.KindCQCreate) {
			q.events = append(q.events, &c) // the create a CQChange told of first
			return
		}
		o.create(k, seq, &c)
	case *trace.CQChange:
		o.cqChange(e, seq)
	case *trace.SRQCreate:
		c := *e
		o.create(objKey{trace.KindSRQCreate, e.PID, e.SRQ}, seq, &c)
	case *trace.SRQDestroy:
		if e.Ret == 0 {
			o.end(objKey{trace.KindSRQCreate, e.PID, e.SRQ}, seq)
		}
	case *trace.Proc:
		c := *e
		k := objKey{trace.KindProc, e.PID, 0}
		if p := o.live(k); p != nil && e.How == trace.ProcExec {
			p.events = append(p.events[:1], &c) // how it joined, and its program now
			return
		}
		o.create(k, seq, &c)
	case *trace.Exit:
		for k, obj := range o.objs {
			if k.pid == e.PID && !obj.gone {
				obj.gone, obj.goneSeq = true, seq
			}
		}
	case *trace.Attach:
		if len(o.attaches) < maxFlightAttaches {
			c := *e
			o.attaches = append(o.attaches, flightEvent{seq, &c})
		} else {
			o.attachesLeft++
		}
	}
}

func (o *flightObjects) cqChange(e *trace.CQChange, seq uint64) {
	k := objKey{trace.KindCQCreate, e.PID, e.CQ}
	c := *e
	switch e.Op {
	case trace.CQOpCreate, trace.CQOpCreateEx:
		if q := o.live(k); q != nil && !slices.ContainsFunc(q.events, isCQChangeCreate) {
			q.events = append(q.events, &c) // the CQCreate came first
			return
		}
		o.create(k, seq, &c)
	case trace.CQOpDestroy:
		if e.Ret == 0 {
			o.end(k, seq)
		}
	case trace.CQOpModify, trace.CQOpResize:
		q := o.live(k)
		if q == nil || e.Ret != 0 {
			return
		}
		i := slices.IndexFunc(q.events, func(ev trace.Event) bool {
			ch, ok := ev.(*trace.CQChange)
			return ok && ch.Op == e.Op
		})
		if i < 0 {
			q.events = append(q.events, &c)
		} else {
			q.events[i] = &c
		}
	}
}

func isCQChangeCreate(ev trace.Event) bool {
	ch, ok := ev.(*trace.CQChange)
	return ok && (ch.Op == trace.CQOpCreate || ch.Op == trace.CQOpCreateEx)
}

func hasKind(evs []trace.Event, k trace.Kind) bool {
	return slices.ContainsFunc(evs, func(ev trace.Event) bool { return ev.Kind() == k })
}

// create starts the object at k anew (an address used again is a new
// object).
func (o *flightObjects) create(k objKey, seq uint64, ev trace.Event) {
	o.next++
	o.objs[k] = &flightObj{order: o.next, seq: seq, events: []trace.Event{ev}}
}

// live is the object at k, nil when none has not ended.
func (o *flightObjects) live(k objKey) *flightObj {
	if obj := o.objs[k]; obj != nil && !obj.gone {
		return obj
	}
	return nil
}

func (o *flightObjects) end(k objKey, seq uint64) {
	if obj := o.live(k); obj != nil {
		obj.gone, obj.goneSeq = true, seq
	}
}

// forget lets go of the objects whose end is older than the ring's
// oldest block: no window refers to them any more.
func (o *flightObjects) forget(oldest uint64) {
	for k, obj := range o.objs {
		if obj.gone && obj.goneSeq < oldest {
			delete(o.objs, k)
		}
	}
}

// prefix is what a file whose first block is block first starts with:
// the probes placed and the objects created before that block and not
// ended before it, in the order processes, probes, SRQs, CQs, QPs (each
// in creation order), at time atNS. A QP's create becomes a
// trace.QPCreate.Window one, saying its state (the last modify seen, after it
// too): its caps are known, what it held at the window's start is not.
func (o *flightObjects) prefix(first, atNS uint64) []trace.Event {
	var objs []*flightObj
	var kinds []trace.Kind
	for k, obj := range o.objs {
		if obj.seq < first && (!obj.gone || obj.goneSeq >= first) {
			objs = append(objs, obj)
			kinds = append(kinds, k.kind)
		}
	}
	rank := map[trace.Kind]int{trace.KindProc: 0, trace.KindSRQCreate: 1, trace.KindCQCreate: 2, trace.KindQPCreate: 3}
	idx := make([]int, len(objs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if d := rank[kinds[a]] - rank[kinds[b]]; d != 0 {
			return d
		}
		return int(objs[a].order) - int(objs[b].order)
	})
	at := func(ev trace.Event) trace.Event {
		ev.Hdr().TimeNS = atNS
		return ev
	}
	var probes []trace.Event
	for _, a := range o.attaches {
		if a.seq < first {
			c := *a.ev.(*trace.Attach)
			probes = append(probes, at(&c))
		}
	}
	var procs, rest []trace.Event
	for _, i := range idx {
		for _, ev := range objs[i].events {
			ev = clone(ev)
			if q, ok := ev.(*trace.QPCreate); ok {
				q.Window = true
				if st := objs[i].stateAt; st > 0 {
					q.State = objs[i].events[st].(*trace.QPModify).State
				}
			}
			if kinds[i] == trace.KindProc {
				procs = append(procs, at(ev))
			} else {
				rest = append(rest, at(ev))
			}
		}
	}
	return append(append(procs, probes...), rest...)
}

// clone copies one of the kinds flightObjects keeps.
func clone(ev trace.Event) trace.Event {
	switch e := ev.(type) {
	case *trace.QPCreate:
		c := *e
		return &c
	case *trace.QPModify:
		c := *e
		return &c
	case *trace.CQCreate:
		c := *e
		return &c
	case *trace.CQChange:
		c := *e
		return &c
	case *trace.SRQCreate:
		c := *e
		return &c
	case *trace.Proc:
		c := *e
		return &c
	}
	return ev
}
