package analyzer

import (
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
