package analyzer

import (
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
