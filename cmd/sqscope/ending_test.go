package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// runBin runs sqscope with args (and sig sent once the file ready exists,
// if sig is not 0), and returns its exit status, stdout and stderr.
func runBin(t *testing.T, sig syscall.Signal, ready string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(sqscopeBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if sig != 0 {
		waitFile(t, ready)
		cmd.Process.Signal(sig)
	}
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// However a trace ends, its summary, its JSON and its recording are
// written, and say why it ended.
func TestEveryEndingIsWritten(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	t.Run("no verbs library: record", func(t *testing.T) {
		rec := filepath.Join(t.TempDir(), "run.sqscope")
		code, _, stderr := runBin(t, 0, "", "record", "-o", rec, "--verbs-timeout", "300ms", "-c", "sleep 3")
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != 1 || len(lines) != 2 || !strings.Contains(lines[0], "sqscope: recorded ") ||
			!strings.Contains(lines[0], "has not loaded a verbs library after 300ms") ||
			!strings.Contains(lines[1], "has not loaded a verbs library after 300ms") {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		var r struct {
			Recording struct {
				Complete bool `json:"complete"`
			} `json:"recording"`
			Ended string `json:"ended"`
		}
		reportInto(t, rec, &r)
		if !r.Recording.Complete || !strings.Contains(r.Ended, "has not loaded") {
			t.Fatalf("report of the recording: %+v", r)
		}
	})
	t.Run("no verbs library: trace --json", func(t *testing.T) {
		code, stdout, _ := runBin(t, 0, "", "trace", "--json", "--verbs-timeout", "300ms", "-c", "sleep 3")
		var r struct {
			Ended        string `json:"ended"`
			EndedOnError bool   `json:"ended_on_error"`
		}
		if err := decodeReport(t, []byte(stdout), &r); code != 1 || err != nil || !strings.Contains(r.Ended, "has not loaded") || r.EndedOnError {
			t.Fatalf("exit %d, JSON %+v (%v)", code, r, err)
		}
	})
	t.Run("SIGTERM: trace", func(t *testing.T) {
		// signaled once the workload posts, however long the attach took
		ready := filepath.Join(t.TempDir(), "ready")
		code, stdout, stderr := runBin(t, syscall.SIGTERM, ready, "trace", "--workload", "--", "-D", "30", "--rate", "2000", "--ready-file", ready)
		if code != 0 || !strings.Contains(stdout, "trace ended: terminated signal received; the target ") ||
			!strings.Contains(stdout, "QP 0x") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
}
