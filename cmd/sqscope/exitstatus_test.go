package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// trace and record exit as strace does: with the status of the command
// they started when it failed (128+N for signal N), else 3 when --fail-on's
// severity was diagnosed; a command they give up on is not left running.
func TestExitStatus(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string // in stderr's last line; "" for none
	}{
		{"target exits 0", []string{"trace", "--workload", "--", "-n", "2000"}, 0, ""},
		{"target exits 3", []string{"trace", "--verbs-timeout", "5s", "-c", "sh -c 'exit 3'"}, 3, "the target exited with status 3"},
		{"target killed", []string{"trace", "--verbs-timeout", "5s", "-c", "sh -c 'kill -9 $$'"}, 128 + 9, "killed by signal 9"},
		{"record passes it on", []string{"record", "-o", filepath.Join(dir, "r.sqscope"), "--verbs-timeout", "5s", "-c", "sh -c 'exit 5'"}, 5, "the target exited with status 5"},
		{"a workload error", []string{"trace", "--workload", "--", "-t", "0"}, 2, "the target exited with status 2"},
		{"--fail-on error, overflow", []string{"trace", "--fail-on", "error", "--workload", "--", "--fault", "never-signal", "-n", "2000"}, 3, "--fail-on error: error sq_overflow"},
		{"--fail-on error, healthy", []string{"trace", "--fail-on", "error", "--workload", "--", "-n", "2000"}, 0, ""},
		{"--fail-on bad", []string{"trace", "--fail-on", "fatal", "--workload"}, 2, `--fail-on "fatal": want error, warning or prediction`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runBin(t, 0, "", tc.args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if code != tc.code || (tc.err != "" && !strings.Contains(last, tc.err)) {
				t.Fatalf("exit %d, last line %q; want exit %d and %q", code, last, tc.code, tc.err)
			}
		})
	}
}

// A command that never loads verbs is stopped when sqscope gives up on
// it, unless --keep-target.
func TestGiveUpStopsTheTarget(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	marker := filepath.Join(t.TempDir(), "alive")
	// the target lets go of the test's pipes, which a kept target would hold
	script := "echo $$ > " + marker + "; exec sleep 30 </dev/null >/dev/null 2>&1"
	for _, keep := range []bool{false, true} {
		args := []string{"trace", "--verbs-timeout", "500ms", "-c", "sh -c '" + script + "'"}
		if keep {
			args = append(args, "--keep-target")
		}
		start := time.Now()
		code, _, stderr := runBin(t, 0, "", args...)
		if code != 1 || !strings.Contains(stderr, "has not loaded a verbs library") || time.Since(start) > 10*time.Second {
			t.Fatalf("keep %v: exit %d after %s: %s", keep, code, time.Since(start), stderr)
		}
		b, err := os.ReadFile(marker)
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		for _, c := range strings.TrimSpace(string(b)) {
			pid = pid*10 + int(c-'0')
		}
		alive := syscall.Kill(pid, 0) == nil && !zombie(pid)
		if alive != keep {
			t.Errorf("keep %v: the target is alive: %v", keep, alive)
		}
		if alive {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func zombie(pid int) bool {
	b, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	return err != nil || strings.HasPrefix(strings.TrimSpace(string(b)), "Z")
}
