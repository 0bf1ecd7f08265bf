package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
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

// snapshotOf is the checked snapshot of the stream build makes.
func snapshotOf(t *testing.T, opts analyzer.Options, build func(s *streamtest.Stream)) analyzer.Snapshot {
	t.Helper()
	s := streamtest.New()
	build(s)
	return analyzertest.Run(t, opts, s.Events)
}

// withBF are the options of most tests: the mlx5 model's BlueFlame
// defaults.
var withBF = analyzer.Options{BF: analyzer.DefaultBF}

// text is the text report of snap.
func text(t *testing.T, snap analyzer.Snapshot) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, snap); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkText fails t unless the text report holds every string of want
// and none of no.
func checkText(t *testing.T, text string, want, no []string) {
	t.Helper()
	streamtest.CheckText(t, "the text report", text, want, no)
}
