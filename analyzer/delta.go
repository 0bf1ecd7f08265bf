package analyzer

import (
	"reflect"
	"time"
)

// Deltas: what each interval of a periodic report added (trace -i
// --json), beside the totals of the snapshot.

// Interval is the growth of the counters between two snapshots of one
// trace: in total and per QP lifetime. The counters a QP traced in
// counters mode does not measure are left out, as in the snapshot, and so
// are the figures that are levels, not counts (peak outstanding, the
// longest unsignaled run).
type Interval struct {
	Seconds float64      `json:"seconds"` // wall-clock time since the previous report (or the start)
	Events  uint64       `json:"events"`
	Lost    uint64       `json:"lost_events"`
	Total   CounterDelta `json:"total"`
	QPs     []QPDelta    `json:"qps"`
}

// CounterDelta is the growth of counters; CountersOnly when some QP was
// traced in counters mode.
type CounterDelta struct {
	Counters
	CountersOnly bool `json:"-"`
	// notGiven: what the QP's provider model (for the total, the model of
	// no QP) does not give, left out as in the snapshot
	notGiven map[string]bool
}

// QPDelta is one QP lifetime's growth over the interval; a lifetime that
// began in it counts from 0.
type QPDelta struct {
	PID   uint32 `json:"pid"`
	QPNum uint32 `json:"qp_num"`
	Gen   uint64 `json:"gen"`
	CounterDelta
}

// levels are the Counters fields that are levels, which a delta leaves out
// (the poll record's bound is one too).
var levels = keySet("peak_outstanding", "longest_unsignaled_run", "poll_record_wcs")

// MarshalJSON leaves out the levels and, in counters mode, what was not
// measured.
func (d CounterDelta) MarshalJSON() ([]byte, error) {
	c, err := marshal(d.Counters)
	if err != nil {
		return nil, err
	}
	drop := union(levels, d.notGiven)
	if d.CountersOnly {
		drop = union(drop, unmeasuredCounters)
	}
	return dropKeys(c, drop)
}

// MarshalJSON writes the QP's identity and its counters' growth as one
// object.
func (d QPDelta) MarshalJSON() ([]byte, error) {
	c, err := d.CounterDelta.MarshalJSON()
	if err != nil {
		return nil, err
	}
	head, err := marshal(struct {
		PID   uint32 `json:"pid"`
		QPNum uint32 `json:"qp_num"`
		Gen   uint64 `json:"gen"`
	}{d.PID, d.QPNum, d.Gen})
	if err != nil {
		return nil, err
	}
	if len(c) <= 2 { // {}
		return head, nil
	}
	// one object: the identity, then the counters
	return append(append(head[:len(head)-1], ','), c[1:]...), nil
}

// Deltas keeps the previous report's snapshot.
type Deltas struct {
	prev  Snapshot
	since time.Time
}

// NewDeltas starts at an empty trace at wall-clock time start.
func NewDeltas(start time.Time) *Deltas { return &Deltas{since: start} }

// Next returns what cur added since the previous call (or since the
// trace began), at wall-clock time now.
func (d *Deltas) Next(cur Snapshot, now time.Time) *Interval {
	iv := &Interval{Events: cur.Events - min(d.prev.Events, cur.Events), Lost: cur.Lost - min(d.prev.Lost, cur.Lost),
		Seconds: now.Sub(d.since).Seconds()}
	type key struct {
		pid, qpn uint32
		gen      uint64
	}
	prev := make(map[key]*QP, len(d.prev.QPs))
	for i := range d.prev.QPs {
		q := &d.prev.QPs[i]
		prev[key{q.PID, q.QPNum, q.Gen}] = q
	}
	iv.QPs = make([]QPDelta, 0, len(cur.QPs))
	for i := range cur.QPs {
		q := &cur.QPs[i]
		qd := QPDelta{PID: q.PID, QPNum: q.QPNum, Gen: q.Gen, CounterDelta: CounterDelta{q.Counters, q.CountersOnly, q.notModeled()}}
		if p := prev[key{q.PID, q.QPNum, q.Gen}]; p != nil {
			subtract(reflect.ValueOf(&qd.Counters).Elem(), reflect.ValueOf(&p.Counters).Elem())
		}
		addCounters(&iv.Total.Counters, &qd.Counters)
		iv.Total.CountersOnly = iv.Total.CountersOnly || q.CountersOnly
		iv.QPs = append(iv.QPs, qd)
	}
	iv.Total.notGiven = cur.Total.notGiven
	// polls are the CQs', counted once each as the snapshot does
	iv.Total.Polls = cur.Total.Polls - min(d.prev.Total.Polls, cur.Total.Polls)
	iv.Total.EmptyPolls = cur.Total.EmptyPolls - min(d.prev.Total.EmptyPolls, cur.Total.EmptyPolls)
	iv.Total.CQEsPastBound = cur.Total.CQEsPastBound - min(d.prev.Total.CQEsPastBound, cur.Total.CQEsPastBound)
	iv.Total.CQEsPastBoundRecv = cur.Total.CQEsPastBoundRecv - min(d.prev.Total.CQEsPastBoundRecv, cur.Total.CQEsPastBoundRecv)
	d.prev, d.since = cur, now
	return iv
}

// subtract takes every count of b from a (structs and arrays of uint64);
// a count that fell (a number whose QP started over) is kept whole.
func subtract(a, b reflect.Value) {
	switch a.Kind() {
	case reflect.Uint64:
		if x, y := a.Uint(), b.Uint(); x >= y {
			a.SetUint(x - y)
		}
	case reflect.Struct:
		for i := range a.NumField() {
			subtract(a.Field(i), b.Field(i))
		}
	case reflect.Array:
		for i := range a.Len() {
			subtract(a.Index(i), b.Index(i))
		}
	}
}
