package main

import (
	"encoding/json"
	"os"
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

// diff --html: the page is written (a new file 0600, an existing one
// replaced in full keeping its mode, or standard output when it is not a
// terminal), and the output rules hold: never over an input or a
// recording, nothing left by a diff that failed.
func TestDiffHTML(t *testing.T) {
	before := filepath.Join("testdata", "faults", "lazy-poll.sqscope")
	after := filepath.Join("testdata", "faults", "sig-all-with-flags.sqscope")
	dir := t.TempDir()
	out := filepath.Join(dir, "change.html")
	_, stderr, code, err := sqscope("diff", "--html", "-o", out, before, after)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Errorf("new page has mode %v, want 0600", st.Mode().Perm())
	}
	for _, want := range []string{"<!DOCTYPE html>", `id="sqscope-data"`, "sq_overflow_cq_not_polled", "sqscope workload"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(stderr, "wrote "+out+": 1 QPs matched") {
		t.Errorf("stderr %q does not say what was written", stderr)
	}

	stdout, _, code, _ := sqscope("diff", before, after, "--html")
	if code != 0 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") {
		t.Errorf("-o - to a pipe: exit %d, %q...", code, stdout[:min(len(stdout), 40)])
	}

	old := filepath.Join(dir, "old.html")
	if err := os.WriteFile(old, []byte("an older page"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, code, err := sqscope("diff", "--html", "-o", old, before, after); code != 0 {
		t.Fatalf("over an older page: exit %d, %v", code, err)
	}
	if b, _ := os.ReadFile(old); !strings.HasPrefix(string(b), "<!DOCTYPE html>") {
		t.Errorf("the older page holds %.40q", b)
	}
	if st, _ := os.Stat(old); st.Mode().Perm() != 0o644 {
		t.Errorf("the replaced page has mode %v, want its own 0644", st.Mode().Perm())
	}

	recCopy := filepath.Join(dir, "copy.sqscope")
	orig, _ := os.ReadFile(before)
	if err := os.WriteFile(recCopy, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(old)
	none := filepath.Join(dir, "none.sqscope")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"over a recording", []string{"diff", "--html", "-o", recCopy, before, after}, 1, "existing recording"},
		{"over its input", []string{"diff", "--html", "-o", after, before, after}, 1, "also an input"},
		{"html and json", []string{"diff", "--html", "--json", before, after}, 2, "without --json"},
		{"-o without --html", []string{"diff", "-o", out, before, after}, 2, "-o and --html go together"},
		{"empty -o", []string{"diff", "--html", "-o", "", before, after}, 2, "-o needs a file name"},
		{"no such recording", []string{"diff", "--html", "-o", filepath.Join(dir, "x.html"), before, none}, 1, "none.sqscope"},
		{"no such recording over a page", []string{"diff", "--html", "-o", old, before, none}, 1, "none.sqscope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, code, err := sqscope(tc.args...)
			if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("exit %d, error %v; want exit %d, one line with %q", code, err, tc.code, tc.msg)
			}
		})
	}
	if b, _ := os.ReadFile(recCopy); string(b) != string(orig) {
		t.Error("the recording -o named was changed")
	}
	if b, _ := os.ReadFile(old); string(b) != string(page) {
		t.Error("a failed diff changed the page -o named")
	}
	if _, err := os.Stat(filepath.Join(dir, "x.html")); err == nil {
		t.Error("a page was left for a recording that could not be read")
	}
}
