// Package analyzertest builds analyzers loaded with synthetic traffic, for
// the tests and benchmarks of the views that read them.
package analyzertest

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Steady returns an analyzer that has seen qps RC QPs of pid 1 (QP numbers
// from 0x100, depth 256), each posting rounds lists of 16 inline 64-byte
// SENDs, 1 µs apart, whose last WR is signaled and whose CQE is polled right
// after the post: a healthy load that leaves every SQ empty.
func Steady(qps, rounds int) *analyzer.Analyzer { return SteadyEvery(qps, rounds, 1000) }

// SteadyEvery is Steady with the rounds gapNS apart: a gap of a history
// step or more fills every QP's occupancy history. The events are fed a
// round at a time, so many rounds of many QPs fit in memory.
func SteadyEvery(qps, rounds int, gapNS uint64) *analyzer.Analyzer {
	a := analyzer.New(analyzer.Options{})
	SteadyEvents(qps, rounds, gapNS, a.IngestAll)
	return a
}

// SteadyEvents makes the events of SteadyEvery and hands them to fn, the
// creates first, then a round at a time (fn may not keep the slice).
func SteadyEvents(qps, rounds int, gapNS uint64, fn func([]trace.Event)) {
	var evs []trace.Event
	now := uint64(1e9)
	for q := uint32(0); q < uint32(qps); q++ {
		evs = append(evs, &trace.QPCreate{Header: trace.Header{TimeNS: now, PID: 1}, QP: uint64(q + 1), QPNum: 0x100 + q,
			Type: trace.QPTypeRC, SendCQ: uint64(0x1000 + q), Caps: trace.Caps{MaxSendWR: 256, MaxInlineData: 124, MaxSendSGE: 1}})
	}
	fn(evs)
	for i := range rounds {
		evs = evs[:0]
		now += gapNS
		for q := uint32(0); q < uint32(qps); q++ {
			wrs := make([]trace.WR, 16)
			for j := range wrs {
				wrs[j] = trace.WR{ID: uint64(i*16 + j), Opcode: ibv.WRSend, Flags: ibv.SendInline, NumSGE: 1, Bytes: 64}
			}
			wrs[15].Flags |= ibv.SendSignaled
			evs = append(evs, &trace.Post{Header: trace.Header{TimeNS: now, PID: 1}, QP: uint64(q + 1), QPNum: 0x100 + q, WRs: wrs, Accepted: 16},
				&trace.Poll{Header: trace.Header{TimeNS: now + 500, PID: 1}, CQ: uint64(0x1000 + q), Max: 16, Ret: 1,
					WCs: []trace.WC{{ID: uint64(i*16 + 15), QPNum: 0x100 + q}}})
		}
		fn(evs)
	}
}

// Check fails t with every invariant the snapshot breaks
// (analyzer.Snapshot.Check): every test that makes a report runs it.
func Check(t testing.TB, s analyzer.Snapshot) {
	t.Helper()
	for _, err := range s.Check() {
		t.Errorf("report invariant: %v", err)
	}
}

// Snapshot is a's snapshot, checked.
func Snapshot(t testing.TB, a *analyzer.Analyzer) analyzer.Snapshot {
	t.Helper()
	s := a.Snapshot()
	Check(t, s)
	return s
}

// Run feeds evs to a new analyzer of opts and returns its snapshot,
// checked.
func Run(t testing.TB, opts analyzer.Options, evs []trace.Event) analyzer.Snapshot {
	t.Helper()
	a := analyzer.New(opts)
	a.IngestAll(evs)
	return Snapshot(t, a)
}

// CheckModes fails t with every field a counters-mode snapshot and an
// events-mode snapshot of the same deterministic run disagree on
// (analyzer.CheckModes).
func CheckModes(t testing.TB, events, counters analyzer.Snapshot) {
	t.Helper()
	for _, err := range analyzer.CheckModes(events, counters) {
		t.Errorf("events and counters mode: %v", err)
	}
}

// Traffic hands the events of SteadyEvents to analyzers one slice at a
// time: the creates, then a round per call; past the last round it plays
// the rounds again, later by the time they span, for as long as asked.
type Traffic struct {
	slices [][]trace.Event
	next   int
	shift  uint64
}

// NewTraffic is the traffic of SteadyEvents(qps, rounds, gapNS).
func NewTraffic(qps, rounds int, gapNS uint64) *Traffic {
	t := &Traffic{}
	SteadyEvents(qps, rounds, gapNS, func(evs []trace.Event) {
		t.slices = append(t.slices, append([]trace.Event(nil), evs...))
	})
	return t
}

// Feed ingests the next slice into a.
func (t *Traffic) Feed(a *analyzer.Analyzer) {
	if t.next == len(t.slices) {
		first, last := t.slices[1][0].Hdr().TimeNS, t.slices[len(t.slices)-1][0].Hdr().TimeNS
		span := last - first + (t.slices[2][0].Hdr().TimeNS - first) // to one gap past the last
		for _, evs := range t.slices[1:] {
			for _, ev := range evs {
				ev.Hdr().TimeNS += span
			}
		}
		t.next = 1
	}
	a.IngestAll(t.slices[t.next])
	t.next++
}
