package analyzer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// qpOf is the QP of number n in snap; it fails t when there is none.
func qpOf(t *testing.T, snap Snapshot, n uint32) *QP {
	t.Helper()
	for i := range snap.QPs {
		if snap.QPs[i].QPNum == n {
			return &snap.QPs[i]
		}
	}
	t.Fatalf("no QP %#x in the snapshot", n)
	return nil
}

// cqOf is the CQ at addr in snap; it fails t when there is none.
func cqOf(t *testing.T, snap Snapshot, addr uint64) *CQ {
	t.Helper()
	for i := range snap.CQs {
		if snap.CQs[i].CQ == addr {
			return &snap.CQs[i]
		}
	}
	t.Fatalf("no CQ %#x in the snapshot", addr)
	return nil
}

// Completions a poll returned past what its record holds are counted from
// the poll's return value, per CQ and in total; the figures they would
// have changed say they are bounds: the receive side's consumed a lower
// bound (the run: 447 posted, 383 consumed, 192 of them
// recorded), the sender's occupancy an upper bound.
func TestPollRecordBound(t *testing.T) {
	snap := New(Options{}).snapshotOf(streamtest.LazyPolls())
	for _, err := range snap.Check() {
		t.Errorf("invariant: %v", err)
	}
	sendCQ, recvCQ := cqOf(t, snap, streamtest.CQAddr(streamtest.LazySender)), cqOf(t, snap, streamtest.CQAddr(streamtest.LazyReceiver))
	if sendCQ.CQEs != 128 || sendCQ.CQEsPastBound != streamtest.LazySendCut || sendCQ.PollRecordWCs != streamtest.RecordWCs {
		t.Errorf("sender's CQ: %d CQEs, %d past the bound of %d; want 128, %d, %d",
			sendCQ.CQEs, sendCQ.CQEsPastBound, sendCQ.PollRecordWCs, streamtest.LazySendCut, streamtest.RecordWCs)
	}
	if recvCQ.CQEs != 383 || recvCQ.CQEsPastBound != streamtest.LazyRecvCut || recvCQ.RecvCQEs == nil || *recvCQ.RecvCQEs != 192 {
		t.Errorf("receiver's CQ: %d CQEs (receive %v), %d past the bound; want 383 (192 told receives), %d",
			recvCQ.CQEs, recvCQ.RecvCQEs, recvCQ.CQEsPastBound, streamtest.LazyRecvCut)
	}
	if idle := cqOf(t, snap, streamtest.CQAddr(streamtest.LazyIdle)); idle.CQEsPastBound != 0 || idle.PollRecordWCs != 0 {
		t.Errorf("a CQ whose polls stayed within the bound: %d past a bound of %d, want none", idle.CQEsPastBound, idle.PollRecordWCs)
	}
	wantTotal := Cuts{CQEsPastBound: streamtest.LazySendCut + streamtest.LazyRecvCut, PollRecordWCs: streamtest.RecordWCs}
	if snap.Total.Cuts != wantTotal {
		t.Errorf("total cuts %+v, want %+v", snap.Total.Cuts, wantTotal)
	}

	r := qpOf(t, snap, streamtest.LazyReceiver).Recv
	if r == nil || r.Posted != 447 || r.Consumed != 192 || !r.ConsumedLowerBound || r.CQEsPastBound != streamtest.LazyRecvCut ||
		r.Outstanding == nil || *r.Outstanding != 447-192 {
		t.Fatalf("receiver's queue %+v: want 447 posted, 192 consumed as a lower bound with %d past the bound, 255 outstanding at most",
			r, streamtest.LazyRecvCut)
	}
	sender := qpOf(t, snap, streamtest.LazySender)
	if !sender.OutstandingUpperBound || sender.CQEsPastBound != streamtest.LazySendCut || sender.CQEsPolled != 64 {
		t.Errorf("sender: upper bound %v, %d past the bound, %d CQEs polled; want an upper bound, %d, 64 (of 128)",
			sender.OutstandingUpperBound, sender.CQEsPastBound, sender.CQEsPolled, streamtest.LazySendCut)
	}
	idle := qpOf(t, snap, streamtest.LazyIdle)
	if idle.OutstandingUpperBound || idle.Cuts != (Cuts{}) || idle.Recv != nil && idle.Recv.ConsumedLowerBound {
		t.Errorf("a QP whose CQ cut nothing: upper bound %v, cuts %+v", idle.OutstandingUpperBound, idle.Cuts)
	}

	var doc struct {
		QPs []struct {
			QPNum uint32         `json:"qp_num"`
			Recv  map[string]any `json:"recv"`
		} `json:"qps"`
		Total map[string]any   `json:"total"`
		CQs   []map[string]any `json:"cqs"`
	}
	b := jsonOf(t, snap)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Total["cqes_past_bound"] != float64(wantTotal.CQEsPastBound) || doc.Total["poll_record_wcs"] != float64(streamtest.RecordWCs) {
		t.Errorf("total JSON: cqes_past_bound %v, poll_record_wcs %v", doc.Total["cqes_past_bound"], doc.Total["poll_record_wcs"])
	}
	for _, c := range doc.CQs {
		want, cut := map[uint64]float64{streamtest.CQAddr(streamtest.LazySender): streamtest.LazySendCut,
			streamtest.CQAddr(streamtest.LazyReceiver): streamtest.LazyRecvCut}[uint64(c["cq"].(float64))]
		if v, ok := c["cqes_past_bound"]; ok != cut || cut && v != want {
			t.Errorf("CQ %v JSON: cqes_past_bound %v (present %v), want %v (present %v)", c["cq"], v, ok, want, cut)
		}
	}
	for _, q := range doc.QPs {
		if q.QPNum != streamtest.LazyReceiver {
			continue
		}
		if q.Recv["consumed_lower_bound"] != true || q.Recv["recv_cq_cqes_past_bound"] != float64(streamtest.LazyRecvCut) {
			t.Errorf("receiver's JSON: consumed_lower_bound %v, recv_cq_cqes_past_bound %v", q.Recv["consumed_lower_bound"], q.Recv["recv_cq_cqes_past_bound"])
		}
	}
}

// While the completions past the bound have retired WRs no later
// completion has, the sender's outstanding count is above the truth and
// says it is an upper bound: 96 posted, 96 completed, 32 recorded.
func TestPollCutOutstanding(t *testing.T) {
	s := streamtest.New()
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 0, 1), false)
	s.Post(1, s.WRs(1, 96, opSend, 0, 1, 64, 1), 0, 96)
	ids := make([]uint64, streamtest.RecordWCs)
	for i := range ids {
		ids[i] = uint64(i)
	}
	s.PollCut(streamtest.CQAddr(1), 96, streamtest.SendWCs(1, ids...)...)
	snap := run(t, s, Options{BF: DefaultBF})
	q := snap.QPs[0]
	if q.Outstanding != 64 || !q.OutstandingUpperBound || q.OutstandingLowerBound {
		t.Errorf("outstanding %d (upper bound %v, lower bound %v), want 64 as an upper bound", q.Outstanding, q.OutstandingUpperBound, q.OutstandingLowerBound)
	}
	if q.Rates.PollsPerCQE != 1.0/96 {
		t.Errorf("%.4f polls per CQE, want 1/96: the poll's return value counts", q.Rates.PollsPerCQE)
	}
}

// An extended poll session that went past the bound is counted the same
// way: its return value is the completions it stepped through.
func TestExPollCut(t *testing.T) {
	s := streamtest.New()
	cq := streamtest.CQAddr(1)
	wcs := make([]trace.WC, streamtest.RecordWCs)
	s.Add(&trace.Poll{Header: s.Header(), CQ: cq, Ret: 40, Ex: true, WCs: wcs, Truncated: 8})
	snap := run(t, s, Options{})
	if c := cqOf(t, snap, cq); c.CQEs != 40 || c.CQEsPastBound != 8 || c.PollRecordWCs != streamtest.RecordWCs {
		t.Errorf("CQ: %d CQEs, %d past a bound of %d; want 40, 8, %d", c.CQEs, c.CQEsPastBound, c.PollRecordWCs, streamtest.RecordWCs)
	}
}

// What an interval added holds the completions its polls returned past
// the bound, in total (a level, the bound itself, is left out).
func TestIntervalPollCut(t *testing.T) {
	a := New(Options{})
	t0 := time.Unix(1000, 0)
	d := NewDeltas(t0)
	evs := streamtest.LazyPolls()
	half := len(evs) / 2
	a.IngestAll(evs[:half])
	first := d.Next(a.Snapshot(), t0.Add(time.Second))
	a.IngestAll(evs[half:])
	second := d.Next(a.Snapshot(), t0.Add(2*time.Second))
	if got := first.Total.CQEsPastBound + second.Total.CQEsPastBound; got != streamtest.LazySendCut+streamtest.LazyRecvCut {
		t.Errorf("intervals add %d + %d completions past the bound, want %d in all",
			first.Total.CQEsPastBound, second.Total.CQEsPastBound, streamtest.LazySendCut+streamtest.LazyRecvCut)
	}
	var doc map[string]any
	if err := json.Unmarshal(jsonOf(t, second.Total), &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["poll_record_wcs"]; ok {
		t.Errorf("an interval's JSON holds the poll record's bound, a level: %v", doc)
	}
}

// Completions past the poll record bound are counted as receives where
// they can only be: their CQ is the receive CQ of one QP alone, no QP
// sending to it posted, and the post probes are in place. The receive
// queue is then exact; on a CQ a sender posts to, they stay unattributed
// and the figures bounds, an upper bound never above the queue's depth.
func TestPollRecordBoundReceivesOnly(t *testing.T) {
	const rcv = 0x1c1
	build := func(sender bool) Snapshot {
		s := streamtest.New()
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: "/usr/lib/libmlx5.so.1", How: "ops-table"},
			&trace.Attach{Header: s.Header(), Func: "poll_cq", Path: "/usr/lib/libmlx5.so.1", How: "ops-table"})
		s.Create(rcv, trace.QPTypeRC, trace.Caps{MaxSendWR: 16, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}, false)
		s.PostRecvCall(streamtest.QPAddr(rcv), rcv, 64, 0, 64, false)
		if sender { // a QP whose send CQ is the receiver's CQ posts
			s.Add(&trace.QPCreate{Header: s.Header(), QP: streamtest.QPAddr(0x1c2), QPNum: 0x1c2, Type: trace.QPTypeRC,
				SendCQ: streamtest.CQAddr(rcv), RecvCQ: streamtest.CQAddr(0x1c2), Caps: streamtest.RCCaps(16, 60, 1), Via: "ibv_create_qp"})
			s.Post(0x1c2, s.WRs(0x1c2, 1, ibv.WRSend, 0, 1, 64, 0), 0, 1)
		}
		s.PollCut(streamtest.CQAddr(rcv), 60, streamtest.RecvWCs(rcv, streamtest.RecordWCs, 0)...)
		s.PostRecvCall(streamtest.QPAddr(rcv), rcv, 60, 0, 60, false)
		s.PollCut(streamtest.CQAddr(rcv), 40, streamtest.RecvWCs(rcv, streamtest.RecordWCs, 0)...)
		return New(Options{}).snapshotOf(s.Events)
	}
	snap := build(false)
	for _, err := range snap.Check() {
		t.Errorf("invariant: %v", err)
	}
	r := qpOf(t, snap, rcv).Recv
	past := uint64(60 + 40 - 2*streamtest.RecordWCs)
	if r == nil || r.Consumed != 100 || r.ConsumedLowerBound || r.CQEsPastBound != 0 || r.Outstanding == nil || *r.Outstanding != 24 || *r.Peak != 64 {
		t.Errorf("receiver %+v: want 124 posted, 100 consumed exact, 24 outstanding, peak 64", r)
	}
	c := cqOf(t, snap, streamtest.CQAddr(rcv))
	if c.CQEsPastBound != past || c.CQEsPastBoundRecv != past || c.RecvCQEs == nil || *c.RecvCQEs != 100 {
		t.Errorf("CQ %+v: want %d past the bound, all receives, 100 receive CQEs", c, past)
	}
	if snap.Total.CQEsPastBound != past || snap.Total.CQEsPastBoundRecv != past || qpOf(t, snap, rcv).Cuts.CQEsPastBound != 0 {
		t.Errorf("total cuts %+v, the QP's %+v: want %d past the bound, all receives, none left on the QP", snap.Total.Cuts, qpOf(t, snap, rcv).Cuts, past)
	}

	snap = build(true)
	for _, err := range snap.Check() {
		t.Errorf("invariant: %v", err)
	}
	r = qpOf(t, snap, rcv).Recv
	if r == nil || r.Consumed != 2*streamtest.RecordWCs || !r.ConsumedLowerBound || r.CQEsPastBound != past || *r.Outstanding != 60 || *r.Peak != 64 {
		t.Errorf("receiver beside a sender %+v: want %d consumed as a lower bound, %d past the bound, 60 outstanding at most, the peak (92 by the counts) capped at its depth 64", r, 2*streamtest.RecordWCs, past)
	}
	if c := cqOf(t, snap, streamtest.CQAddr(rcv)); c.CQEsPastBoundRecv != 0 {
		t.Errorf("CQ %+v: receives told among a sender's completions", c)
	}
}
