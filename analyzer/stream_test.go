package analyzer

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

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
// the kinds it names, newest first; with a golden name, their text and
// JSON must match testdata/diag_NAME.golden.
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
			if d.Golden != "" {
				golden(t, "diag_"+d.Golden+".golden", diagGolden(t, snap))
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

// diagGolden is the text and the JSON of the diagnoses.
func diagGolden(t *testing.T, s Snapshot) []byte {
	t.Helper()
	var b bytes.Buffer
	WriteDiagnoses(&b, s)
	b.WriteString("\n")
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s.Diagnoses); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// wantOf is what a test expects of the stream named name, failing t when
// it expects nothing of it.
func wantOf[W any](t *testing.T, wants map[string]W, name string) W {
	t.Helper()
	w, ok := wants[name]
	if !ok {
		t.Fatalf("no expectation of the stream %q", name)
	}
	return w
}
