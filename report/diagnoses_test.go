package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/streamtest"
)

// One golden file per diagnosis (testdata/diag_NAME.golden): the text and
// the JSON of the snapshot's diagnoses, newest first.
func TestDiagnosesText(t *testing.T) {
	all := append(append(append([]streamtest.Diag(nil), streamtest.Diagnoses...), streamtest.StateDiagnoses...),
		streamtest.RecvDiagnoses...)
	for _, d := range append(all, streamtest.CallsNotTraced) {
		if d.Golden == "" {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			golden(t, "diag_"+d.Golden+".golden", diagGolden(t, snapshotOf(t, withBF, d.Build)))
		})
	}
}

// diagGolden is the text and the JSON of the diagnoses.
func diagGolden(t *testing.T, s analyzer.Snapshot) []byte {
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

// A diagnosis says when it was first and last seen, as seconds into the
// trace (never the raw monotonic clock), and how often; and the
// diagnoses not kept.
func TestDiagnosesWhen(t *testing.T) {
	d := analyzer.Diagnosis{Kind: "too_many_sge", Severity: analyzer.SevError, PID: 7, QPNum: 1,
		FirstNS: 1_500_001_200, LastNS: 1_750_001_300, FirstS: 1.5000001, LastS: 1.7500002, Count: 2,
		Message: "the message", Fix: "the fix"}
	once := d
	once.Count, once.LastNS, once.LastS = 1, once.FirstNS, once.FirstS
	var b bytes.Buffer
	WriteDiagnoses(&b, analyzer.Snapshot{Diagnoses: []analyzer.Diagnosis{d, once}, DiagnosesDropped: 3})
	want := "diagnoses (2, newest first):\n" +
		"  ERROR too_many_sge: QP 0x1 (pid 7) first at +1.500 s, last at +1.750 s, 2 times\n    the message\n    fix: the fix\n" +
		"  ERROR too_many_sge: QP 0x1 (pid 7) at +1.500 s\n    the message\n    fix: the fix\n" +
		fmt.Sprintf("  3 more diagnoses not kept (limit %d)\n", analyzer.MaxDiagnoses)
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if m := regexp.MustCompile(`\d{4,} ns`).FindString(b.String()); m != "" {
		t.Errorf("text gives a raw clock reading %q:\n%s", m, b.String())
	}
	b.Reset()
	WriteDiagnoses(&b, analyzer.Snapshot{})
	if b.String() != "diagnoses: none\n" {
		t.Errorf("no diagnoses: got %q", b.String())
	}
}
