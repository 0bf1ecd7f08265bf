package analyzertest

import "testing"

func TestSteady(t *testing.T) {
	s := Snapshot(t, Steady(3, 10))
	if len(s.QPs) != 3 || s.Events != 3+3*10*2 {
		t.Fatalf("%d QPs, %d events; want 3 QPs, 63 events", len(s.QPs), s.Events)
	}
	for i, q := range s.QPs {
		if q.QPNum != 0x100+uint32(i) || q.MaxSendWR != 256 || q.Type != "RC" {
			t.Errorf("QP %d: %#x %s depth %d", i, q.QPNum, q.Type, q.MaxSendWR)
		}
		if q.WRs != 160 || q.Inline != 160 || q.Signaled != 10 || q.Doorbells != 10 || q.CQEsPolled != 10 {
			t.Errorf("QP %#x counters %+v", q.QPNum, q.Counters)
		}
		if q.Outstanding != 0 || q.PeakOutstanding != 16 {
			t.Errorf("QP %#x: %d outstanding, peak %d; want 0, 16", q.QPNum, q.Outstanding, q.PeakOutstanding)
		}
	}
	if len(s.Diagnoses) != 0 {
		t.Errorf("diagnoses of a healthy load: %+v", s.Diagnoses)
	}
}
