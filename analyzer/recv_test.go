package analyzer

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

// rqWant is what a test expects of one QP's receive queue: posted,
// consumed, outstanding and peak (-1: not known), and the reason.
type rqWant struct {
	qpn                         uint32
	calls, failed, posted, cons uint64
	errs                        uint64
	out, peak                   int64
	why                         string
}

func TestReceiveSide(t *testing.T) {
	snap := New(Options{}).snapshotOf(streamtest.RecvRecording())
	wantQPs := []rqWant{
		{0x1c0, 1, 0, 4, 3, 0, 1, 4, ""},
		{0x1c1, 2, 0, 8, 2, 0, 6, 8, ""},
		{0x1c2, 3, 0, 12, 1, 1, 11, 12, ""},
		{0x1c3, 4, 0, 16, 0, 0, 16, 16, ""},
		{0x1d0, 17, 1, 64, 10, 0, 54, 64, ""},
		{0x1e0, 0, 0, 0, 5, 0, -1, -1, whyRecvNoCreate},
		{0x1e1, 0, 0, 0, 2, 0, -1, -1, whyRecvSRQ},
	}
	if len(snap.QPs) != len(wantQPs) {
		t.Fatalf("%d QPs, want %d", len(snap.QPs), len(wantQPs))
	}
	for i, w := range wantQPs {
		q := snap.QPs[i]
		r := q.Recv
		if q.QPNum != w.qpn || r == nil {
			t.Fatalf("QP %d: %#x with receives %v, want %#x", i, q.QPNum, r, w.qpn)
		}
		got := rqWant{q.QPNum, r.PostCalls, r.FailedCalls, r.Posted, r.Consumed, r.CQEErrors, -1, -1, r.OutstandingUnknown}
		if r.Outstanding != nil {
			got.out, got.peak = int64(*r.Outstanding), int64(*r.Peak)
		}
		if got != w {
			t.Errorf("QP %#x: receives %+v, want %+v", q.QPNum, got, w)
		}
		if q.PostRecvs != w.posted {
			t.Errorf("QP %#x: post_recvs %d, want %d", q.QPNum, q.PostRecvs, w.posted)
		}
	}

	type cqWant struct {
		polls, empty, cqes, recv uint64
		send, recvQPs            []uint32
	}
	wantCQs := map[uint64]cqWant{
		streamtest.SharedSendCQ: {20, 19, 4, 0, []uint32{0x1c0, 0x1c1, 0x1c2, 0x1c3, 0x1e1}, nil},
		streamtest.SharedRecvCQ: {6, 5, 8, 8, nil, []uint32{0x1c0, 0x1c1, 0x1c2, 0x1c3, 0x1e1}},
		streamtest.ReceiverCQ:   {31, 30, 10, 10, []uint32{0x1d0}, []uint32{0x1d0}},
		streamtest.LateCQ:       {1, 0, 5, 5, nil, []uint32{0x1e0}},
	}
	if len(snap.CQs) != len(wantCQs) {
		t.Fatalf("%d CQs, want %d: %+v", len(snap.CQs), len(wantCQs), snap.CQs)
	}
	for _, c := range snap.CQs {
		w := wantCQs[c.CQ]
		if c.Polls != w.polls || c.EmptyPolls != w.empty || c.CQEs != w.cqes || c.RecvCQEs == nil || *c.RecvCQEs != w.recv ||
			!equalQPs(c.SendQPs, w.send) || !equalQPs(c.RecvQPs, w.recvQPs) {
			t.Errorf("CQ %#x: polls %d (empty %d), CQEs %d, receive %v, send QPs %x, recv QPs %x; want %+v",
				c.CQ, c.Polls, c.EmptyPolls, c.CQEs, c.RecvCQEs, c.SendQPs, c.RecvQPs, w)
		}
	}
	if len(snap.SRQs) != 1 || snap.SRQs[0].Recv == nil || *snap.SRQs[0].Recv != (SRQRecv{PostCalls: 3, Posted: 24}) {
		t.Errorf("SRQs %+v: want 24 receives in 3 calls", snap.SRQs)
	}
	if snap.SRQRecvs == nil || *snap.SRQRecvs != 24 || snap.Total.PostRecvs != 104 || snap.Total.Polls != 58 {
		t.Errorf("SRQ receives %v, total post_recvs %d, polls %d; want 24, 104, 58",
			snap.SRQRecvs, snap.Total.PostRecvs, snap.Total.Polls)
	}
}

// snapshotOf ingests evs and returns the snapshot.
func (a *Analyzer) snapshotOf(evs []trace.Event) Snapshot {
	a.IngestAll(evs)
	return a.Snapshot()
}

func equalQPs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// In counters mode the kernel counts the receives posted to each QP, not
// their completions nor SRQ receives: those are absent, the reason said
// once, and the posts on QPs created before tracing are the kernel's
// totals of those QPs. Totals recorded before receives were counted give
// none.
func TestReceiveSideCountersMode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counted bool
		why     string
	}{
		{"receives counted", true, whyRecvCounters},
		{"recorded before receives were counted", false, whyRecvOld},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			streamtest.CountedReceives(s, tc.counted)
			snap := run(t, s, Options{})
			if snap.ReceivesNotTraced != tc.why || snap.SRQRecvs != nil || snap.UnknownQPPosts != 40 {
				t.Fatalf("receives not traced %q, SRQ receives %v, posts on unknown QPs %d; want %q, nil, 40",
					snap.ReceivesNotTraced, snap.SRQRecvs, snap.UnknownQPPosts, tc.why)
			}
			for _, q := range snap.QPs {
				if q.Measured("post_recvs") != tc.counted {
					t.Errorf("QP %#x: post_recvs measured %v, want %v", q.QPNum, q.Measured("post_recvs"), tc.counted)
				}
				r := q.Recv
				switch {
				case !tc.counted && r != nil:
					t.Errorf("QP %#x: receives %+v, want none (not counted)", q.QPNum, r)
				case !tc.counted:
				case r == nil || r.Outstanding != nil || r.Peak != nil || r.OutstandingUnknown != whyRecvCounted:
					t.Errorf("QP %#x: receives %+v, want posts and no outstanding", q.QPNum, r)
				case q.QPNum == 0x1d0 && (r.Posted != 6400 || r.PostCalls != 1601 || r.FailedCalls != 1 || q.PostRecvs != 6400 ||
					r.Depth == nil || *r.Depth != 8192):
					t.Errorf("receiver: receives %+v, post_recvs %d; want 6400 in 1601 calls, 1 failed, of 8192", r, q.PostRecvs)
				}
			}
			for _, c := range snap.CQs {
				if c.RecvCQEs != nil {
					t.Errorf("CQ %#x: receive CQEs %d, want none (not told apart)", c.CQ, *c.RecvCQEs)
				}
			}
			if len(snap.SRQs) != 1 || snap.SRQs[0].Recv != nil {
				t.Errorf("SRQs %+v: want one, without receives", snap.SRQs)
			}

			var doc struct {
				SRQRecvs     *uint64          `json:"srq_recvs"`
				UnknownPosts *uint64          `json:"posts_on_unknown_qps"`
				Why          string           `json:"receives_not_traced"`
				QPs          []map[string]any `json:"qps"`
				Total        map[string]any   `json:"total"`
				CQs          []map[string]any `json:"cqs"`
			}
			if err := json.Unmarshal(jsonOf(t, snap), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.SRQRecvs != nil || doc.UnknownPosts == nil || *doc.UnknownPosts != 40 || doc.Why != tc.why {
				t.Errorf("JSON: srq_recvs %v, posts_on_unknown_qps %v, reason %q; want absent, 40, %q",
					doc.SRQRecvs, doc.UnknownPosts, doc.Why, tc.why)
			}
			for i, q := range doc.QPs {
				_, hasRecv := q["recv"]
				_, hasPosted := q["post_recvs"]
				if hasRecv != tc.counted || hasPosted != tc.counted {
					t.Errorf("qps[%d]: recv present %v, post_recvs present %v; want both %v", i, hasRecv, hasPosted, tc.counted)
				}
				if r, ok := q["recv"].(map[string]any); ok {
					for _, k := range []string{"consumed", "cqe_errors", "outstanding", "peak_outstanding"} {
						if _, ok := r[k]; ok {
							t.Errorf("qps[%d].recv.%s present, not measured", i, k)
						}
					}
				}
			}
			if _, ok := doc.Total["post_recvs"]; ok != tc.counted {
				t.Errorf("total.post_recvs present %v, want %v", ok, tc.counted)
			}
			for i, c := range doc.CQs {
				if _, ok := c["recv_cqes"]; ok {
					t.Errorf("cqs[%d].recv_cqes present, not measured", i)
				}
			}
		})
	}
}

// A receive call whose probe was not placed leaves its figures out, with
// the reason; placed in another library after all, it was traced.
func TestReceivesNotAttached(t *testing.T) {
	attach := func(s *streamtest.Stream, fn, err string) {
		s.Add(&trace.Attach{Header: s.Header(), Func: fn, Path: "libmlx5.so.1", Offset: 0x1000, Err: err})
	}
	for _, tc := range []struct {
		name       string
		attach     func(s *streamtest.Stream)
		posts, srq bool
		why        string
	}{
		{"post_recv not placed", func(s *streamtest.Stream) { attach(s, "post_recv", "permission denied") },
			false, true, "ibv_post_recv was not traced (permission denied)"},
		{"post_recv placed in another library", func(s *streamtest.Stream) {
			attach(s, "post_recv", "permission denied")
			attach(s, "post_recv", "")
		}, true, true, ""},
		{"post_srq_recv not placed", func(s *streamtest.Stream) { attach(s, "post_srq_recv", "no such function") },
			true, false, "ibv_post_srq_recv was not traced (no such function)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.attach(s)
			s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(16, 0, 1), false)
			s.PostRecvCall(streamtest.QPAddr(0x1c0), 0x1c0, 4, 0, 4, false)
			s.PollCQ(streamtest.CQAddr(0x1c0), 0, streamtest.RecvWCs(0x1c0, 2, 0)...)
			snap := run(t, s, Options{})
			r := snap.QPs[0].Recv
			if snap.ReceivesNotTraced != tc.why || (r != nil) != tc.posts || (snap.SRQRecvs != nil) != tc.srq {
				t.Fatalf("reason %q, receives %+v, SRQ receives %v; want %q, receives %v, SRQ receives %v",
					snap.ReceivesNotTraced, r, snap.SRQRecvs, tc.why, tc.posts, tc.srq)
			}
			if r != nil && (r.Posted != 4 || r.Consumed != 2 || r.Outstanding == nil || *r.Outstanding != 2) {
				t.Errorf("receives %+v: want 4 posted, 2 consumed, 2 outstanding", r)
			}
		})
	}
}

// Where no poll function is traced, the receives posted are known and
// what completions tell is not: absent, with the reason.
func TestReceivesWithoutPolls(t *testing.T) {
	s := streamtest.New()
	for _, fn := range []string{"post_send", "post_recv"} {
		s.Add(&trace.Attach{Header: s.Header(), Func: fn, Path: "libmlx5.so.1", Offset: 0x1000, How: "explicit"})
	}
	s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(16, 0, 1), false)
	s.PostRecvCall(streamtest.QPAddr(0x1c0), 0x1c0, 4, 0, 4, false)
	snap := run(t, s, Options{})
	r := snap.QPs[0].Recv
	if r == nil || r.Posted != 4 || r.Outstanding != nil || r.OutstandingUnknown != whyRecvNoPoll {
		t.Fatalf("receives %+v: want 4 posted, outstanding unknown (%q)", r, whyRecvNoPoll)
	}
	if js := jsonOf(t, snap); bytes.Contains(js, []byte(`"consumed"`)) || bytes.Contains(js, []byte(`"recv_cqes"`)) {
		t.Errorf("JSON gives receive completions, not seen:\n%s", js)
	}
}
