package analyzer

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/trace"
)

// Reads of a QP's counters: the occupancy is posted - retired at the
// provider's width (a 32-bit counter wraps), the WRs posted between reads
// are unwrapped, a read over the depth is left out and counted, and the
// last read is the QP's outstanding between windows.
func TestSQSampleReads(t *testing.T) {
	const pid, qpn, qp = 7, 0x1c0, 0x7f00_0000_1000
	a := New(Options{})
	a.Ingest(&trace.QPCreate{Header: trace.Header{TimeNS: 1e9, PID: pid}, QP: qp, QPNum: qpn,
		Caps: trace.Caps{MaxSendWR: 64}, Via: "ibv_create_qp"})
	read := func(ns, posted, retired uint64) {
		a.Ingest(&trace.SQSample{Header: trace.Header{TimeNS: ns, PID: pid}, QP: qp, QPNum: qpn,
			Posted: posted, Retired: retired, Width: 4})
	}
	read(2e9, 0xffff_fff0, 0xffff_ffe0) // 16 outstanding
	read(3e9, 0x0000_0010, 0x0000_0000) // wrapped: 32 more posted, 16 outstanding
	read(4e9, 0x0000_0200, 0x0000_0100) // 256 outstanding, over the depth: left out
	read(5e9, 0x0000_0050, 0x0000_0010) // 64 outstanding, 0x40 more posted
	s := a.Snapshot()
	if len(s.QPs) != 1 || s.QPs[0].Memory == nil {
		t.Fatalf("QPs %+v: want one with its reads", s.QPs)
	}
	q := s.QPs[0]
	m := q.Memory
	if m.Samples != 3 || m.Dropped != 1 || m.Outstanding != 64 || m.Peak != 64 || m.AtNS != 5e9 {
		t.Errorf("memory %+v: want 3 reads kept, 1 dropped, 64 outstanding at the last, 64 the highest", m)
	}
	if m.WRs != 0x60 || m.Posted != 0xffff_fff0+0x60&0xffff_ffff || m.SpanS != 3 || m.WRPerS != 0x60/3.0 {
		t.Errorf("memory %+v: want %d WRs over 3 s", m, 0x60)
	}
	if q.Outstanding != 64 || q.OutstandingSampledNS != 5e9 {
		t.Errorf("outstanding %d at %d: want the last read's 64 at 5 s", q.Outstanding, q.OutstandingSampledNS)
	}
}

// A CQ overrun fails no post: the provider's count of them, read with the
// counters, is the cq_overrun diagnosis once it grows (not while it
// stays 0, nor again while it stays), on the QP read, with its CQ.
func TestSQSampleCQErrors(t *testing.T) {
	const pid, qpn, qp, cq = 7, 0x1c0, 0x7f00_0000_1000, 0x7f00_0000_2000
	a := New(Options{})
	a.Ingest(&trace.CQCreate{Header: trace.Header{TimeNS: 1e9, PID: pid}, CQ: cq, CQE: 63})
	a.Ingest(&trace.QPCreate{Header: trace.Header{TimeNS: 1e9, PID: pid}, QP: qp, QPNum: qpn, SendCQ: cq, RecvCQ: cq,
		Caps: trace.Caps{MaxSendWR: 128}, Via: "ibv_create_qp"})
	read := func(ns, posted, retired, errs uint64) {
		a.Ingest(&trace.SQSample{Header: trace.Header{TimeNS: ns, PID: pid}, QP: qp, QPNum: qpn,
			Posted: posted, Retired: retired, Width: 8, CQErrors: errs, CQErrorsRead: true})
	}
	read(2e9, 64, 0, 0)
	if s := a.Snapshot(); len(s.Diagnoses) != 0 || s.QPs[0].Memory.CQErrors == nil || *s.QPs[0].Memory.CQErrors != 0 {
		t.Fatalf("no overrun read: diagnoses %+v, CQ errors %v; want none, and a read 0", s.Diagnoses, s.QPs[0].Memory.CQErrors)
	}
	read(3e9, 191, 63, 1)
	read(4e9, 191, 63, 1)
	s := a.Snapshot()
	if len(s.Diagnoses) != 1 {
		t.Fatalf("diagnoses %+v: want one cq_overrun", s.Diagnoses)
	}
	d := s.Diagnoses[0]
	if d.Kind != "cq_overrun" || d.QPNum != qpn || d.Count != 1 || d.FirstNS != 3e9 ||
		d.Evidence["cq_errors_read"] != 1 || d.Evidence["cq"] != cq || d.Evidence["cq_depth"] != 63 {
		t.Errorf("diagnosis %+v", d)
	}
	if _, ok := d.Evidence["completions_pending"]; ok {
		t.Errorf("evidence %v: completions pending given, which the reads do not count", d.Evidence)
	}
	if !strings.Contains(d.Message, "the provider's own count, read from the process's memory, says its send CQ 0x7f0000002000 (63 entries; QPs reporting to it: 1) overran (1 time(s))") {
		t.Errorf("message %q", d.Message)
	}
	read(5e9, 191, 63, 2)
	if d := a.Snapshot().Diagnoses[0]; d.Count != 2 || d.Evidence["cq_errors_read"] != 2 {
		t.Errorf("a second overrun: %+v", d)
	}
	// a provider that keeps no count: no figure, no diagnosis
	b := New(Options{})
	b.Ingest(&trace.QPCreate{Header: trace.Header{TimeNS: 1e9, PID: pid}, QP: qp, QPNum: qpn, Caps: trace.Caps{MaxSendWR: 128}, Via: "ibv_create_qp"})
	b.Ingest(&trace.SQSample{Header: trace.Header{TimeNS: 2e9, PID: pid}, QP: qp, QPNum: qpn, Posted: 9, Width: 8})
	if s := b.Snapshot(); s.QPs[0].Memory.CQErrors != nil || len(s.Diagnoses) != 0 {
		t.Errorf("no count kept: CQ errors %v, diagnoses %+v", s.QPs[0].Memory.CQErrors, s.Diagnoses)
	}
}

// The provider's counts of a QP's signaled WRs posted and its send
// completions polled, read in memory, give what it has pending on its
// send CQ: summed over the CQ's QPs, past the CQ's depth, the
// cq_overrun_risk prediction events mode makes from the calls, said once,
// from the reads; within the depth nothing; a destroyed QP's share leaves
// the sum.
func TestSQSampleSignaledPending(t *testing.T) {
	const pid, cq, depth = 7, 0x7f00_0000_2000, 32
	a := New(Options{})
	a.Ingest(&trace.CQCreate{Header: trace.Header{TimeNS: 1e9, PID: pid}, CQ: cq, CQE: depth})
	qps := []struct {
		num uint32
		qp  uint64
	}{{0x1c0, 0x7f00_0000_1000}, {0x1c1, 0x7f00_0000_3000}}
	for _, q := range qps {
		a.Ingest(&trace.QPCreate{Header: trace.Header{TimeNS: 1e9, PID: pid}, QP: q.qp, QPNum: q.num, SendCQ: cq, RecvCQ: cq,
			Caps: trace.Caps{MaxSendWR: 128}, Via: "ibv_create_qp"})
	}
	read := func(i int, ns, signaled, polled uint64) {
		a.Ingest(&trace.SQSample{Header: trace.Header{TimeNS: ns, PID: pid}, QP: qps[i].qp, QPNum: qps[i].num,
			Posted: signaled, Retired: polled, Width: 8, SignaledRead: true, Signaled: signaled, SendCQEsPolled: polled})
	}
	read(0, 2e9, 40, 20) // 20 pending
	read(1, 2e9, 30, 18) // 12: 32 on the CQ, its depth
	if s := a.Snapshot(); len(s.Diagnoses) != 0 || s.QPs[0].Memory.SignaledPending == nil || *s.QPs[0].Memory.SignaledPending != 20 {
		t.Fatalf("32 pending on a CQ of 32: diagnoses %+v, pending %v; want none, and 20 read on the first QP", s.Diagnoses, s.QPs[0].Memory.SignaledPending)
	}
	read(1, 3e9, 31, 18) // 13: 33
	read(0, 4e9, 41, 20) // 34: said once
	s := a.Snapshot()
	if len(s.Diagnoses) != 1 {
		t.Fatalf("diagnoses %+v: want one cq_overrun_risk", s.Diagnoses)
	}
	d := s.Diagnoses[0]
	if d.Kind != "cq_overrun_risk" || d.QPNum != qps[1].num || d.Count != 1 || d.FirstNS != 3e9 ||
		d.Evidence["completions_pending"] != 33 || d.Evidence["cq_depth"] != depth || d.Evidence["cq_qps"] != 2 || d.Evidence["pending_read"] != 1 {
		t.Errorf("diagnosis %+v", d)
	}
	if !strings.Contains(d.Message, "33 signaled completions pending (posted, not yet polled, by the provider's own counts read in the process's memory), more than its 32 entries") {
		t.Errorf("message %q", d.Message)
	}
	// the second QP destroyed, the first's 21 alone fall under half the
	// depth only at 15: no second diagnosis until then and past the depth
	a.Ingest(&trace.QPDestroy{Header: trace.Header{TimeNS: 5e9, PID: pid}, QP: qps[1].qp, QPNum: qps[1].num})
	read(0, 6e9, 41, 30) // 11: below half
	read(0, 7e9, 70, 30) // 40: said again
	var again []string
	for _, d := range a.Snapshot().Diagnoses {
		again = append(again, fmt.Sprintf("%s QP %#x at %d s: %d pending", d.Kind, d.QPNum, d.LastNS/1e9, d.Evidence["completions_pending"]))
	}
	if want := []string{"cq_overrun_risk QP 0x1c0 at 7 s: 40 pending", "cq_overrun_risk QP 0x1c1 at 3 s: 33 pending"}; !slices.Equal(again, want) {
		t.Errorf("after the pending fell below half the depth and rose past it again: %q, want %q", again, want)
	}
	// a flushed QP's completions may outnumber its signaled WRs: no
	// pending, no wrap
	read(0, 8e9, 70, 100)
	if p := a.Snapshot().QPs[0].Memory.SignaledPending; p == nil || *p != 0 {
		t.Errorf("pending %v with more completions polled than signaled WRs: want 0", p)
	}
}
