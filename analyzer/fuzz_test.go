package analyzer

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
)

// FuzzIngest feeds arbitrary event values: the analyzer must neither panic
// nor hold more than its bounds, and its snapshot must still make JSON.
func FuzzIngest(f *testing.F) {
	for _, b := range streamtest.Seeds {
		f.Add(b)
	}
	if streamtest.Huge != wrapAt/4 {
		f.Fatalf("streamtest.Huge is %d, not a quarter of the invariants' bound %d", uint64(streamtest.Huge), uint64(wrapAt))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, huge := streamtest.FromBytes(data)
		a := New(Options{HistoryStepNS: 1000, HistoryLen: 64})
		a.IngestAll(evs)
		s := a.Snapshot()
		if !huge {
			for _, err := range s.Check() {
				t.Errorf("invariant: %v", err)
			}
		}
		if _, err := marshal(s); err != nil {
			t.Fatal(err)
		}
		for _, q := range s.QPs {
			if q.Outstanding > maxModelDepth || len(q.History) > 64 {
				t.Fatalf("QP %d: outstanding %d, history %d samples", q.QPNum, q.Outstanding, len(q.History))
			}
		}
		if len(s.Diagnoses) > 3*2*int(numDiagKinds) {
			t.Fatalf("%d diagnoses for at most 6 QPs", len(s.Diagnoses))
		}
	})
}
