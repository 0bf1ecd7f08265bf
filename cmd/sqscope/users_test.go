package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// nobody is the user the tests run commands as.
const nobody = 65534

// worldDir is a temporary directory every user may write in (t.TempDir's
// parent is root's alone), removed at the end of the test.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sqscope-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// -u runs the started command as that user, with sqscope tracing it as
// root: the workload's ready file is nobody's, and its QP is traced.
func TestRunAsUser(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := worldDir(t)
	ready := filepath.Join(dir, "ready")
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "trace", "-u", "nobody", "--json", "--workload", "--", "-n", "2000", "--ready-file", ready)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	st, err := os.Stat(ready)
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != nobody {
		t.Errorf("the workload's ready file is user %d's, want nobody's (%d)", uid, nobody)
	}
	var snap struct {
		QPs []struct {
			WRs uint64 `json:"wrs"`
		} `json:"qps"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &snap); err != nil || len(snap.QPs) != 1 || snap.QPs[0].WRs != 2000 {
		t.Errorf("the trace of the workload run as nobody: %v, %+v; want one QP of 2000 WRs", err, snap)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "-u", "no-such-user-here", "-c", "true"}, "-u no-such-user-here: no such user"},
		{[]string{"trace", "-u", "nobody", "-p", "1"}, "-u: only a command sqscope starts"},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%q: %v %s; want exit 2 with %q", tc.args, err, out, tc.want)
		}
	}
}

// Run through sudo, a recording is the sudo user's, 0600; -q leaves
// stderr to warnings, where without it the recording is said, with the
// events report counts in it.
func TestRecordOwnerAndQuiet(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := t.TempDir()
	for _, quiet := range []bool{false, true} {
		out := filepath.Join(dir, "run.sqscope")
		os.Remove(out)
		args := []string{"record", "-o", out, "--workload", "--", "-n", "1000"}
		if quiet {
			args = append([]string{"record", "-q"}, args[1:]...)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "SUDO_UID=65534", "SUDO_GID=65534")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%q: %v: %s", args, err, stderr.String())
		}
		st, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != nobody || sys.Gid != nobody || st.Mode().Perm() != 0o600 {
			t.Errorf("%q: the recording is %d:%d %v, want %d:%d -rw-------", args, sys.Uid, sys.Gid, st.Mode().Perm(), nobody, nobody)
		}
		said := strings.Contains(stderr.String(), "sqscope: recorded ")
		if said == quiet {
			t.Errorf("%q: stderr %q", args, stderr.String())
		}
		if !quiet { // the events it says it recorded are those report counts
			var n int
			fmt.Sscanf(stderr.String()[strings.Index(stderr.String(), "sqscope: recorded "):], "sqscope: recorded %d events", &n)
			rep, err := exec.Command(bin, "report", "--json", out).Output()
			var doc struct {
				Events int `json:"events"`
			}
			if err != nil || json.Unmarshal(rep, &doc) != nil || n == 0 || doc.Events != n {
				t.Errorf("record said %d events, report counts %d (%v)", n, doc.Events, err)
			}
		}
		// a shared host may give warnings (another tracer): -q keeps
		// those, and nothing else
		for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			if quiet && l != "" && !strings.Contains(l, "warning") {
				t.Errorf("-q: stderr holds more than warnings: %q", l)
			}
		}
	}
}
