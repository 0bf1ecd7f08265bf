package analyzer

import (
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
)

// run feeds the stream to a new analyzer and returns its snapshot, whose
// invariants must hold.
func run(t testing.TB, s *streamtest.Stream, opts Options) Snapshot {
	t.Helper()
	a := New(opts)
	a.IngestAll(s.Events)
	return checked(t, a)
}

// checked is a's snapshot, failing t on every invariant it breaks.
func checked(t testing.TB, a *Analyzer) Snapshot {
	t.Helper()
	s := a.Snapshot()
	for _, err := range s.Check() {
		t.Errorf("invariant: %v", err)
	}
	return s
}

func diagKinds(s Snapshot) []string {
	var out []string
	for _, d := range s.Diagnoses {
		out = append(out, d.Kind)
	}
	return out
}

// checkDiagnoses runs each stream and fails t unless its diagnoses are of
// the kinds it names, newest first (the report's tests write them).
func checkDiagnoses(t *testing.T, ds []streamtest.Diag) {
	t.Helper()
	for _, d := range ds {
		t.Run(d.Name, func(t *testing.T) {
			s := streamtest.New()
			d.Build(s)
			snap := run(t, s, Options{BF: DefaultBF})
			if got := diagKinds(snap); !slices.Equal(got, d.Kinds) {
				t.Fatalf("diagnoses %q, want %q", got, d.Kinds)
			}
		})
	}
}

// checkEvidence fails t unless snap has a diagnosis of kind with count
// occurrences and exactly the evidence want.
func checkEvidence(t *testing.T, snap Snapshot, kind string, count uint64, want map[string]uint64) {
	t.Helper()
	var d *Diagnosis
	for i := range snap.Diagnoses {
		if snap.Diagnoses[i].Kind == kind {
			d = &snap.Diagnoses[i]
		}
	}
	if d == nil {
		t.Fatalf("no %s diagnosis in %q", kind, diagKinds(snap))
	}
	if d.Count != count {
		t.Errorf("count %d, want %d", d.Count, count)
	}
	for k, v := range want {
		if got, ok := d.Evidence[k]; !ok || got != v {
			t.Errorf("evidence %s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	if len(d.Evidence) != len(want) {
		t.Errorf("evidence %v, want exactly %v", d.Evidence, want)
	}
}

// jsonOf is v as JSON, as the report writes it but on one line: what a
// snapshot's JSON holds and leaves out is its types' to say.
func jsonOf(t testing.TB, v any) []byte {
	t.Helper()
	b, err := marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkWords fails t unless the analyzer's own words of the snapshot, its
// diagnoses' messages and fixes and its QPs' provider notes, hold every
// string of want and none of no.
func checkWords(t *testing.T, snap Snapshot, want, no []string) {
	t.Helper()
	var words []string
	for _, d := range snap.Diagnoses {
		words = append(words, d.Message, d.Fix)
	}
	for i := range snap.QPs {
		words = append(words, snap.QPs[i].ProviderNotes()...)
	}
	streamtest.CheckText(t, "the analyzer's words", strings.Join(words, "\n"), want, no)
}
