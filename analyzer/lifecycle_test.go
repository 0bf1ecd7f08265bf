package analyzer

import (
	"reflect"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// lifeQP is what a test expects of one QP lifetime.
type lifeQP struct {
	num                     uint32
	gen                     uint64
	wrs, outstanding, polls uint64
	destroyed               bool
}

func TestObjectLifetimes(t *testing.T) {
	const a, c = 0xa000, 0xc000 // the address every QP (and CQ) gets back
	h := func(ns uint64) trace.Header { return trace.Header{TimeNS: ns, PID: streamtest.PID} }
	create := func(ns uint64, num uint32, gen uint64) *trace.QPCreate {
		return &trace.QPCreate{Header: h(ns), QP: a, QPNum: num, Type: trace.QPTypeRC, SendCQ: c, RecvCQ: c,
			Caps: streamtest.RCCaps(8, 60, 1), Gen: gen}
	}
	post := func(ns uint64, num uint32, n int) *trace.Post {
		p := &trace.Post{Header: h(ns), QP: a, QPNum: num, Accepted: uint32(n)}
		for i := range n {
			p.WRs = append(p.WRs, trace.WR{ID: uint64(i), NumSGE: 1, Bytes: 32})
		}
		return p
	}
	counts := func(ns uint64, num uint32, gen, wrs uint64) *trace.QPCounters {
		return &trace.QPCounters{Header: h(ns), QP: a, QPNum: num, PostCalls: wrs, WRs: wrs, Doorbells: wrs, Gen: gen}
	}
	destroy := func(ns uint64, num uint32, gen uint64) *trace.QPDestroy {
		return &trace.QPDestroy{Header: h(ns), QP: a, QPNum: num, Gen: gen}
	}
	tests := []struct {
		name string
		evs  []trace.Event
		want []lifeQP
		cqs  []CQ
	}{
		{"a number created again is a new QP (no generations)", []trace.Event{
			create(100, 1, 0), post(200, 1, 5), destroy(300, 1, 0),
			create(400, 1, 0), post(500, 1, 6),
		}, []lifeQP{{num: 1, wrs: 5, outstanding: 5, destroyed: true}, {num: 1, wrs: 6, outstanding: 6}}, nil},
		{"an address created again is a new QP, its totals its own (counters mode)", []trace.Event{
			create(100, 1, 1), counts(200, 1, 1, 432), destroy(300, 1, 1),
			create(400, 2, 2), counts(500, 2, 2, 6),
			counts(600, 1, 1, 438), // counted by another thread before the destroy, handed over late
		}, []lifeQP{{num: 1, gen: 1, wrs: 438, destroyed: true}, {num: 2, gen: 2, wrs: 6}}, nil},
		{"counts that come before their create", []trace.Event{
			create(100, 1, 1), destroy(150, 1, 1), counts(200, 1, 3, 100), create(300, 1, 3),
		}, []lifeQP{{num: 1, gen: 1, destroyed: true}, {num: 1, gen: 3, wrs: 100}}, nil},
		{"a completion after its QP's destroy stays with it", []trace.Event{
			create(100, 1, 1), post(200, 1, 1), destroy(300, 1, 1),
			&trace.Poll{Header: h(400), CQ: c, Max: 4, Ret: 1, WCs: []trace.WC{{ID: 0, QPNum: 1}}},
		}, []lifeQP{{num: 1, gen: 1, wrs: 1, polls: 1, destroyed: true}}, nil},
		{"a CQ created at a replaced CQ's address has polls of its own", []trace.Event{
			&trace.CQCreate{Header: h(50), CQ: c, Gen: 1, CQE: 63},
			create(100, 1, 2),
			&trace.EmptyPolls{Header: h(200), CQ: c, Count: 410, Gen: 1},
			destroy(300, 1, 2),
			&trace.EmptyPolls{Header: h(350), CQ: c, Count: 3, Gen: 1}, // its last ones, sent with the next create
			&trace.CQCreate{Header: h(400), CQ: c, Gen: 3, CQE: 63},
			create(500, 2, 4),
			&trace.Poll{Header: h(600), CQ: c, Max: 4}, // empty, carried by a record
			&trace.EmptyPolls{Header: h(700), CQ: c, Count: 9, Gen: 3},
		}, []lifeQP{{num: 1, gen: 2, polls: 413, destroyed: true}, {num: 2, gen: 4, polls: 10}},
			[]CQ{{PID: streamtest.PID, CQ: c, Gen: 1, CQE: 63, Polls: 413, EmptyPolls: 413, Replaced: true, SpanNS: 150, PollsPerSec: perSec(413, 150),
				SendQPs: []uint32{1}, RecvQPs: []uint32{1}, RecvCQEs: new(uint64)},
				{PID: streamtest.PID, CQ: c, Gen: 3, CQE: 63, Polls: 10, EmptyPolls: 10, SpanNS: 100, PollsPerSec: perSec(10, 100),
					SendQPs: []uint32{2}, RecvQPs: []uint32{2}, RecvCQEs: new(uint64)}}},
		{"CQ counts of a generation whose create is still on its way", []trace.Event{
			&trace.CQCreate{Header: h(50), CQ: c, Gen: 1},
			&trace.CQCounters{Header: h(100), CQ: c, Polls: 7, Empty: 7, Gen: 1},
			&trace.CQCounters{Header: h(200), CQ: c, Polls: 2, Empty: 2, Gen: 3},
			&trace.CQCreate{Header: h(150), CQ: c, Gen: 3},
			create(300, 1, 4),
		}, []lifeQP{{num: 1, gen: 4, polls: 2}},
			// counted polls run from the CQ's create to their flush
			// (no receive CQEs: counters mode does not tell them apart)
			[]CQ{{PID: streamtest.PID, CQ: c, Gen: 1, Polls: 7, EmptyPolls: 7, Replaced: true, SpanNS: 50, PollsPerSec: perSec(7, 50)},
				{PID: streamtest.PID, CQ: c, Gen: 3, Polls: 2, EmptyPolls: 2, SpanNS: 50, PollsPerSec: perSec(2, 50),
					SendQPs: []uint32{1}, RecvQPs: []uint32{1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			an := New(Options{})
			an.IngestAll(tc.evs)
			s := checked(t, an)
			if len(s.QPs) != len(tc.want) {
				t.Fatalf("%d QPs, want %d: %+v", len(s.QPs), len(tc.want), s.QPs)
			}
			for i, w := range tc.want {
				q := s.QPs[i]
				got := lifeQP{num: q.QPNum, gen: q.Gen, wrs: q.WRs, outstanding: q.Outstanding, polls: q.Polls, destroyed: q.Destroyed}
				if got != w {
					t.Errorf("QP %d: %+v, want %+v", i, got, w)
				}
			}
			if tc.cqs != nil {
				if len(s.CQs) != len(tc.cqs) {
					t.Fatalf("CQs %+v, want %+v", s.CQs, tc.cqs)
				}
				for i := range tc.cqs {
					if !reflect.DeepEqual(s.CQs[i], tc.cqs[i]) {
						t.Errorf("CQ %d: %+v, want %+v", i, s.CQs[i], tc.cqs[i])
					}
				}
			}
		})
	}
}

func TestEndAndSRQs(t *testing.T) {
	an := New(Options{})
	h := trace.Header{TimeNS: 100, PID: streamtest.PID}
	an.IngestAll([]trace.Event{
		&trace.SRQCreate{Header: h, SRQ: 0x5000, Gen: 1, MaxWR: 1024},
		&trace.SRQDestroy{Header: h, SRQ: 0x5000, Gen: 1, Ret: 16}, // busy: lives on
		&trace.SRQCreate{Header: h, SRQ: 0x6000, Gen: 2, MaxWR: 64},
		&trace.SRQDestroy{Header: h, SRQ: 0x6000, Gen: 2},
		&trace.SRQCreate{Header: h, SRQ: 0x6000, Gen: 3, MaxWR: 64},
		&trace.End{Header: trace.Header{TimeNS: 1 << 40}, Reason: "interrupt signal received"},
	})
	s := checked(t, an)
	none := &SRQRecv{}
	want := []SRQ{{streamtest.PID, 0x5000, 1, 1024, false, none}, {streamtest.PID, 0x6000, 2, 64, true, none}, {streamtest.PID, 0x6000, 3, 64, false, none}}
	if len(s.SRQs) != len(want) {
		t.Fatalf("SRQs %+v, want %+v", s.SRQs, want)
	}
	for i := range want {
		if !reflect.DeepEqual(s.SRQs[i], want[i]) {
			t.Errorf("SRQ %d: %+v, want %+v", i, s.SRQs[i], want[i])
		}
	}
	// the end is said, and is no event of the target's: it moves no clock
	if s.Ended != "interrupt signal received" || s.EndedOnError || s.LastNS != 100 || s.Events != 5 {
		t.Errorf("ended %q (error %v), last %d ns, %d events", s.Ended, s.EndedOnError, s.LastNS, s.Events)
	}
}

// A QP the memory scan found while its create was returning, whose
// create record (with its generation) comes after: one QP, its create's
// caps and its posts, not a second one found in memory with nothing.
func TestMemoryFoundThenCreated(t *testing.T) {
	const qpn = 0x1c0
	s := streamtest.New()
	s.MemQP(qpn, ibv.QPSInit)
	s.Add(&trace.QPCreate{Header: s.Header(), QP: streamtest.QPAddr(qpn), QPNum: qpn, Type: trace.QPTypeRC, Gen: 7,
		SendCQ: streamtest.CQAddr(qpn), RecvCQ: streamtest.CQAddr(qpn), Caps: streamtest.RCCaps(128, 60, 1), Via: "sqsim_create_qp"})
	s.ToRTS(qpn)
	s.Send(qpn, 4, 0, 4)
	snap := run(t, s, Options{BF: DefaultBF})
	if len(snap.QPs) != 1 {
		for _, q := range snap.QPs {
			t.Logf("QP %#x found %s gen %d wrs %d", q.QPNum, q.Found, q.Gen, q.WRs)
		}
		t.Fatalf("%d QPs, want 1", len(snap.QPs))
	}
	if q := snap.QPs[0]; q.WRs != 4 || !q.CapsKnown || q.MaxSendWR != 128 {
		t.Errorf("QP %+v: want its 4 WRs and its create's caps", q)
	}
}
