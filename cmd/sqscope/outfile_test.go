package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// fileState is what a path is: its kind, mode and content.
func fileState(t *testing.T, path string) string {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		return "missing"
	}
	if !st.Mode().IsRegular() {
		return st.Mode().String()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().String() + " " + string(b)
}

// The export's output contract: only regular files or stdout, never
// through a link, never over its input or an existing recording unless
// forced, an existing file keeps its mode, and a failed export leaves
// the old file as it was.
func TestExportOutputSafety(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sqscope")
	writeRecording(t, good, sample(), 5)
	full, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "damaged.sqscope")
	bad := append([]byte(nil), full...)
	bad[len(bad)-40] ^= 0xff
	if err := os.WriteFile(damaged, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.sqscope")
	writeRecording(t, other, sample(), 5)
	existing := filepath.Join(dir, "existing.json")
	if err := os.WriteFile(existing, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(existing, 0o644)
	target := filepath.Join(dir, "target.json")
	os.WriteFile(target, []byte("link target"), 0o644)
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "null")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" { // CI runs as root
			t.Fatalf("mknod: %v", err)
		}
		t.Skipf("mknod needs root: %v", err)
	}

	tests := []struct {
		name    string
		args    []string
		code    int
		err     string // in the error; "" for success
		path    string // the output path whose state is checked
		changed bool   // whether it is expected to change
	}{
		{"device node", []string{"export", good, "-o", dev}, 1, "is a character device, not a regular file", dev, false},
		{"symbolic link", []string{"export", good, "-o", link}, 1, "is a symbolic link", link, false},
		{"link target untouched", []string{"export", good, "-o", link}, 1, "is a symbolic link", target, false},
		{"output is the input", []string{"export", good, "-o", good}, 1, "is also an input", good, false},
		{"output is the input, forced", []string{"export", good, "-o", good, "--force"}, 1, "is also an input", good, false},
		{"existing recording", []string{"export", good, "-o", other}, 1, "is an existing recording: give --force", other, false},
		{"existing recording, forced", []string{"export", good, "-o", other, "--force"}, 0, "", other, true},
		{"damaged input keeps the old output", []string{"export", damaged, "-o", existing}, 1, "is left as it was", existing, false},
		{"existing file replaced", []string{"export", good, "-o", existing}, 0, "", existing, true},
		{"directory", []string{"export", good, "-o", dir}, 1, "is a directory", dir, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := fileState(t, tc.path)
			_, _, code, err := sqscope(tc.args...)
			if code != tc.code || (tc.err == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("exit %d, error %v; want exit %d and one line with %q", code, err, tc.code, tc.err)
			}
			after := fileState(t, tc.path)
			if (after != before) != tc.changed {
				t.Errorf("%s was %q, is %q (changed: want %v)", tc.path, before, after, tc.changed)
			}
		})
	}
	// the replaced file kept its mode and holds the export
	if st, err := os.Stat(existing); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("replaced output: %v, mode %v, want 0644", err, st.Mode().Perm())
	}
	if b, _ := os.ReadFile(existing); !bytes.HasPrefix(b, []byte(`{"displayTimeUnit"`)) {
		t.Errorf("replaced output holds %.40q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// a new output is private, as the recording it comes from
	fresh := filepath.Join(dir, "fresh.json")
	if _, _, code, err := sqscope("export", good, "-o", fresh); code != 0 {
		t.Fatal(err)
	}
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("new output mode %v, want 0600", st.Mode().Perm())
	}
}

// record keeps an existing recording unless --force, refuses outputs that
// are not regular files before it starts the target, and writes to
// standard output with -o -.
func TestRecordOutputSafety(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "good.sqscope")
	workload := []string{"--workload", "--", "-s", "64", "-I", "64", "-Q", "16", "-n", "2000"}
	record := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"record"}, append(args, workload...)...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	if _, errs, code := record("-o", rec); code != 0 {
		t.Fatalf("first record: exit %d: %s", code, errs)
	}
	before := fileState(t, rec)
	start := time.Now()
	_, errs, code := record("-o", rec)
	if code != 1 || !strings.Contains(errs, "is an existing recording: give --force") || fileState(t, rec) != before {
		t.Fatalf("second record without --force: exit %d, %q; the file changed: %v", code, errs, fileState(t, rec) != before)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the refusal took %s: was the target started?", d)
	}
	if _, errs, code := record("-o", rec, "--force"); code != 0 || fileState(t, rec) == before {
		t.Fatalf("record --force: exit %d, %s; replaced: %v", code, errs, fileState(t, rec) != before)
	}
	if _, errs, code := record("-o", dir); code != 1 || !strings.Contains(errs, "is a directory") {
		t.Errorf("record -o DIR: exit %d, %q", code, errs)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// -o -: the recording on stdout, the target's own output on stderr
	out, errs, code := record("-o", "-")
	if code != 0 {
		t.Fatalf("record -o -: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error(`record -o - made a file named "-"`)
	}
	piped := filepath.Join(dir, "piped.sqscope")
	if err := os.WriteFile(piped, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, code, err := sqscope("report", "--json", piped)
	if code != 0 || !strings.Contains(got, `"wrs": 2000`) {
		t.Fatalf("report of the piped recording: exit %d, %v:\n%.400s", code, err, got)
	}
	if !strings.Contains(errs, "sqscope workload: device sim") {
		t.Errorf("the target's output is not on stderr: %.300q", errs)
	}
}

// A text report that cannot be written is an error, as JSON already is.
func TestReportToFullDevice(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sqscope")
	writeRecording(t, good, sample(), 5)
	for _, args := range [][]string{{"report", good}, {"report", "--json", good}, {"export", good, "-o", "-"}} {
		var errb bytes.Buffer
		err := run(context.Background(), args, full, &errb)
		if exitCode(err) != 1 || !strings.Contains(fmt.Sprint(err), "no space left on device") {
			t.Errorf("%q > /dev/full: exit %d, %v", args, exitCode(err), err)
		}
	}
}
