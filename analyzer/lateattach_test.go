package analyzer

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The WRs a QP had outstanding before the attach are unknown: outstanding
// is a lower bound until the completion of a signaled WR posted since
// retires them, exact from then; completions of older WRs are counted, not
// matched. A known depth bounds what is outstanding whatever the trace
// missed.
func TestLateAttachOccupancy(t *testing.T) {
	const qpn = 0x1c0
	type want struct {
		found                 string
		state                 string
		lowerBound            bool
		outstanding, peak     uint64
		preCQEs, unmatched    uint64
		retiredUnseen, p99    uint64
		exactSince, capsKnown bool
	}
	cases := []struct {
		name  string
		build func(s *streamtest.Stream)
		want  want
	}{
		{"found in memory, not yet synced", func(s *streamtest.Stream) {
			s.MemQP(qpn, ibv.QPSRTS)
			s.IDs[qpn] = 1000 // ids go on from before the attach
			s.Send(qpn, 4, 0, 4)
			s.Poll(qpn, 995, 999) // completions of WRs posted before the attach
			s.Send(qpn, 4, 0, 4)
		}, want{found: FoundMemory, state: "RTS", lowerBound: true, outstanding: 8, peak: 8, preCQEs: 2}},
		{"synced by a completion of a WR posted since", func(s *streamtest.Stream) {
			s.MemQP(qpn, ibv.QPSRTS)
			s.IDs[qpn] = 1000
			s.Send(qpn, 4, 0, 4) // ids 1000..1003, 1003 signaled
			s.Poll(qpn, 999)
			s.Send(qpn, 4, 0, 4) // 1004..1007, 1007 signaled
			s.Poll(qpn, 1003)
		}, want{found: FoundMemory, state: "RTS", outstanding: 4, peak: 8, preCQEs: 1, exactSince: true}},
		{"synced by a later WR when the first completions were missed", func(s *streamtest.Stream) {
			s.MemQP(qpn, ibv.QPSRTS)
			s.IDs[qpn] = 1000
			s.Send(qpn, 4, 0, 4) // 1003 signaled: its completion polled before the poll probe
			s.Send(qpn, 4, 0, 4) // 1007 signaled
			s.Send(qpn, 4, 0, 4)
			s.Poll(qpn, 1007) // retires 1007 and everything older
		}, want{found: FoundMemory, state: "RTS", outstanding: 4, peak: 12, exactSince: true}},
		{"wr_ids repeat: synced by a guess, a lower bound still", func(s *streamtest.Stream) {
			s.MemQP(qpn, ibv.QPSRTS)
			for range 3 { // every WR wr_id 0, as perftest's
				s.IDs[qpn] = 0
				s.Send(qpn, 1, 0, 1)
			}
			s.Poll(qpn, 0, 0, 0, 0, 0) // two of WRs posted before the attach, then the three
		}, want{found: FoundMemory, state: "RTS", lowerBound: true, outstanding: 0, peak: 3, preCQEs: 2}},
		{"re-created by a flight window, not yet synced", func(s *streamtest.Stream) {
			s.Add(&trace.QPCreate{Header: s.Header(), QP: streamtest.QPAddr(qpn), QPNum: qpn, Type: trace.QPTypeRC,
				SendCQ: streamtest.CQAddr(qpn), RecvCQ: streamtest.CQAddr(qpn), Caps: streamtest.RCCaps(16, 60, 1),
				Via: "sqsim_create_qp", State: ibv.QPSRTS, Window: true})
			s.IDs[qpn] = 1000
			s.Send(qpn, 4, 0, 4)
			s.Poll(qpn, 995) // a WR posted before the window
		}, want{found: FoundFlight, state: "RTS", lowerBound: true, outstanding: 4, peak: 4, preCQEs: 1, capsKnown: true}},
		{"re-created by a flight window, synced", func(s *streamtest.Stream) {
			s.Add(&trace.QPCreate{Header: s.Header(), QP: streamtest.QPAddr(qpn), QPNum: qpn, Type: trace.QPTypeRC,
				SendCQ: streamtest.CQAddr(qpn), RecvCQ: streamtest.CQAddr(qpn), Caps: streamtest.RCCaps(16, 60, 1),
				Via: "sqsim_create_qp", State: ibv.QPSRTS, Window: true})
			s.IDs[qpn] = 1000
			s.Send(qpn, 4, 0, 4)
			s.Send(qpn, 4, 0, 4)
			s.Poll(qpn, 1003)
		}, want{found: FoundFlight, state: "RTS", outstanding: 4, peak: 8, exactSince: true, capsKnown: true}},
		{"learned from its first post", func(s *streamtest.Stream) {
			s.IDs[qpn] = 10
			s.Send(qpn, 2, 0, 2)
			s.Poll(qpn, 9)
		}, want{found: FoundPost, lowerBound: true, outstanding: 2, peak: 2, preCQEs: 1}},
		{"created while tracing: exact from the start", func(s *streamtest.Stream) {
			s.Create(qpn, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
			s.Send(qpn, 4, 0, 4)
			s.Poll(qpn, 77, 78) // no such WRs: RC in order, the oldest signaled, then none
		}, want{found: FoundCreate, outstanding: 0, peak: 4, unmatched: 1, capsKnown: true}},
		{"depth bounds what the trace missed", func(s *streamtest.Stream) {
			s.Create(qpn, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
			for range 10 { // 40 WRs posted, no completion seen
				s.Send(qpn, 4, 0, 4)
			}
		}, want{found: FoundCreate, outstanding: 16, peak: 16, retiredUnseen: 24, p99: 16, capsKnown: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := streamtest.New()
			c.build(s)
			snap := run(t, s, Options{BF: DefaultBF})
			if len(snap.QPs) != 1 {
				t.Fatalf("%d QPs, want 1", len(snap.QPs))
			}
			q := snap.QPs[0]
			got := want{found: q.Found, state: q.StateFound, lowerBound: q.OutstandingLowerBound,
				outstanding: q.Outstanding, peak: q.PeakOutstanding, preCQEs: q.PreAttachCQEs,
				unmatched: q.UnmatchedCQEs, retiredUnseen: q.RetiredUnseen, exactSince: q.ExactSinceNS != 0,
				capsKnown: q.CapsKnown}
			if c.want.p99 != 0 {
				got.p99 = q.Occupancy.P99
			}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if d := q.MaxSendWR; d > 0 && (q.Outstanding > uint64(d) || q.PeakOutstanding > uint64(d) || q.Occupancy.P99 > uint64(d)) {
				t.Errorf("outstanding %d, peak %d, p99 %d over the depth %d", q.Outstanding, q.PeakOutstanding, q.Occupancy.P99, d)
			}
		})
	}
}

// With posts probed and no poll function, nothing retires a WR: the
// occupancy is not a bound of any kind, and the snapshot says it is not
// known.
func TestCompletionsNotTraced(t *testing.T) {
	for _, polled := range []string{"", "poll_cq", "start_poll"} {
		t.Run("poll probe "+polled, func(t *testing.T) {
			s := streamtest.New()
			s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: "/lib/libmlx5.so.1", How: "explicit"})
			if polled != "" {
				s.Add(&trace.Attach{Header: s.Header(), Func: polled, Path: "/lib/libmlx5.so.1", How: "explicit"})
			}
			s.IDs[0x1c0] = 100
			for range 50 {
				s.Send(0x1c0, 4, 0, 4)
			}
			snap := run(t, s, Options{BF: DefaultBF})
			q := snap.QPs[0]
			if want := polled == ""; q.CompletionsNotTraced != want || q.OutstandingLowerBound == want {
				t.Errorf("completions_not_traced %v, lower bound %v; want %v, %v", q.CompletionsNotTraced, q.OutstandingLowerBound, want, !want)
			}
		})
	}
}

// A late QP whose WRs share wr_ids (perftest's lists) is synced by a guess
// even when, at the completion, only one WR of that id is outstanding: a
// completion that then finds nothing is a pre-attach WR's, not an
// unmatched one.
func TestLateAttachRepeatedIDsInList(t *testing.T) {
	const qpn = 0x1c0
	s := streamtest.New()
	s.MemQP(qpn, ibv.QPSRTS)
	post := func() {
		wrs := s.WRs(qpn, 2, ibv.WRSend, 0, 1, 16, 2) // the second signaled
		for i := range wrs {
			wrs[i].ID = 0
		}
		s.Post(qpn, wrs, 0, 2)
	}
	post()
	s.Poll(qpn, 0) // retires the list: synced, by a guess
	s.Poll(qpn, 0) // a pre-attach WR's
	post()
	snap := run(t, s, Options{BF: DefaultBF})
	q := snap.QPs[0]
	if !q.WRIDsRepeat || !q.OutstandingLowerBound || q.UnmatchedCQEs != 0 || q.PreAttachCQEs != 1 {
		t.Errorf("wr_ids repeat %v, lower bound %v, unmatched %d, pre-attach %d: want a guessed sync, the second completion a pre-attach WR's",
			q.WRIDsRepeat, q.OutstandingLowerBound, q.UnmatchedCQEs, q.PreAttachCQEs)
	}
}
