package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// report --html on a committed recording: the page is written (a new
// file 0600, or standard output when it is not a terminal), and the
// output rules hold.
func TestReportHTML(t *testing.T) {
	rec := filepath.Join("testdata", "faults", "lazy-poll.sqscope")
	dir := t.TempDir()
	out := filepath.Join(dir, "run.html")
	_, stderr, code, err := sqscope("report", "--html", "-o", out, rec)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(out)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("new page has mode %v, want 0600", st.Mode().Perm())
	}
	for _, want := range []string{"<!DOCTYPE html>", "sq_overflow_cq_not_polled", `id="sqscope-data"`, "no peak is lost"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(stderr, "wrote "+out) {
		t.Errorf("stderr %q does not say what was written", stderr)
	}

	stdout, _, code, _ := sqscope("report", "--html", rec)
	if code != 0 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") {
		t.Errorf("-o - to a pipe: exit %d, %q...", code, stdout[:min(len(stdout), 40)])
	}

	recCopy := filepath.Join(dir, "copy.sqscope")
	orig, _ := os.ReadFile(rec)
	if err := os.WriteFile(recCopy, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"over a recording", []string{"report", "--html", "-o", recCopy, rec}, 1, "existing recording"},
		{"over its input", []string{"report", "--html", "-o", rec, rec}, 1, "also an input"},
		{"html and json", []string{"report", "--html", "--json", rec}, 2, "without --json"},
		{"-o without --html", []string{"report", "-o", out, rec}, 2, "-o and --html go together"},
		{"no such recording", []string{"report", "--html", "-o", filepath.Join(dir, "x.html"), filepath.Join(dir, "none.sqscope")}, 1, "none.sqscope"},
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
	if _, err := os.Stat(filepath.Join(dir, "x.html")); err == nil {
		t.Error("a page was left for a recording that could not be read")
	}
}
