package tui

import (
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
)

// The header says the sentinel's windows and their measured cost against
// the budget, or that the cost was not measured; a sentinel QP's detail
// says what its figures are of.
func TestSentinelHeaderAndNote(t *testing.T) {
	m := &analyzer.Sampling{Windows: 3, BudgetPct: 1, Cost: &analyzer.SampleCost{SharePct: 0.42, TargetCPUSeconds: 2}}
	if got, want := sampleHeader(m), "windows 3, probes 0.42% of the targets' CPU (budget 1%)"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	m = &analyzer.Sampling{Windows: 1, NotMeasured: "BPF run-time statistics: operation not permitted"}
	if got, want := sampleHeader(m), "windows 1, cost not measured"; got != want {
		t.Errorf("header %q, want %q", got, want)
	}
	q := &analyzer.QP{Sentinel: true, OutstandingSampledNS: 5}
	if n := SentinelNote(q); !strings.Contains(n, "windows") || !strings.Contains(n, "last window measured") {
		t.Errorf("note %q: want what the counts and the occupancy are of", n)
	}
}
