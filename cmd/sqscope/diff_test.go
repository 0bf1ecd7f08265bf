package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// sqscope diff on committed recordings, and its usage errors.
func TestDiffCommand(t *testing.T) {
	before := filepath.Join("testdata", "faults", "lazy-poll.sqscope")
	after := filepath.Join("testdata", "faults", "sig-all-with-flags.sqscope")
	stdout, stderr, code, err := sqscope("diff", before, after)
	if code != 0 || !strings.Contains(stdout, "ENOMEM                     1148 -> 0") || !strings.Contains(stdout, "diagnoses went             sq_overflow_cq_not_polled") {
		t.Fatalf("exit %d (%v), stderr %q, stdout:\n%s", code, err, stderr, stdout)
	}
	stdout, _, code, _ = sqscope("diff", "--json", "--match", "qpn", before, after)
	var doc struct {
		Match string `json:"match"`
		QPs   []struct {
			Match string `json:"match"`
		} `json:"qps"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &doc) != nil || doc.Match != "qpn" || len(doc.QPs) != 1 || doc.QPs[0].Match != "QP 0x1c0" {
		t.Fatalf("--json --match qpn: exit %d, %+v from\n%s", code, doc, stdout)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"one recording", []string{"diff", before}, 2, "give two recordings"},
		{"bad match", []string{"diff", "--match", "pid", before, after}, 2, `--match "pid"`},
		{"no such file", []string{"diff", before, filepath.Join(t.TempDir(), "none.sqscope")}, 1, "none.sqscope"},
		{"not a recording", []string{"diff", before, "diff_test.go"}, 1, "diff_test.go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, code, err := sqscope(tc.args...)
			if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("exit %d, error %v; want exit %d, one line with %q", code, err, tc.code, tc.msg)
			}
		})
	}
}
