package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The bash completion completes commands, and each command's flags from
// its own help.
func TestBashCompletion(t *testing.T) {
	bin := sqscopeBin(t)
	script, err := exec.Command(bin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Symlink(bin, filepath.Join(dir, "sqscope"))
	complete := func(words ...string) string {
		t.Helper()
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = "'" + w + "'"
		}
		prog := string(script) + "\nCOMP_WORDS=(" + strings.Join(q, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) + "; _sqscope; echo \"${COMPREPLY[*]}\""
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", prog)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"sqscope", "rep"}, "replay report"},
		{[]string{"sqscope", "trace", "--js"}, "--json"},
		{[]string{"sqscope", "workload", "--inl"}, "--inline_size"},
		{[]string{"sqscope", "help", "exp"}, "export"},
	} {
		if got := complete(tc.words...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.words, got, tc.want)
		}
	}
	if out, err := exec.Command(bin, "completion", "tcsh").CombinedOutput(); err == nil || !strings.Contains(string(out), "want bash, zsh or fish") {
		t.Errorf("tcsh: %v %s", err, out)
	}
}

// The fish completion completes commands and flags in fish itself.
func TestFishCompletion(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Fatal("fish is needed (make deps installs it)")
	}
	bin := sqscopeBin(t)
	dir := t.TempDir()
	os.Symlink(bin, filepath.Join(dir, "sqscope"))
	cmd := exec.Command("fish", "--no-config", "-c", `sqscope completion fish | source; complete -C "sqscope rep"; complete -C "sqscope trace --js"`)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != "replay report --json" {
		t.Errorf("fish completed %q, want replay report --json", got)
	}
}
