package analyzertest

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer"
)

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

// Traffic fed past its last round plays its rounds again, later: the
// counts go on growing and the snapshot keeps its invariants.
func TestTrafficPlaysOn(t *testing.T) {
	a := analyzer.New(analyzer.Options{})
	tr := NewTraffic(2, 3, 1000)
	for range 1 + 7 { // the creates, then 7 rounds of 3 played
		tr.Feed(a)
	}
	s := Snapshot(t, a)
	if s.Total.WRs != 2*7*16 || s.Total.CQEsPolled != 2*7 || len(s.Diagnoses) != 0 {
		t.Fatalf("%d WRs, %d CQEs, diagnoses %+v; want %d, %d, none", s.Total.WRs, s.Total.CQEsPolled, s.Diagnoses, 2*7*16, 2*7)
	}
	if want := uint64(1e9) + 7*1000 + 500; s.LastNS != want {
		t.Fatalf("last event at %d, want %d", s.LastNS, want)
	}
}
