package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// -D stops tracing after the duration, stops the command sqscope started,
// and prints the summary of what was seen.
func TestTraceDuration(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	start := time.Now()
	out, err := exec.Command(bin, "trace", "-D", "1500ms", "--workload", "--", "-s", "64", "-I", "64", "-Q", "16", "-D", "60", "--rate", "2000").CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if took > 10*time.Second {
		t.Errorf("trace -D 1500ms took %s", took)
	}
	if !strings.Contains(string(out), "1 QP(s)") || !strings.Contains(string(out), "QP 0x1c0") {
		t.Errorf("no summary of the QP:\n%s", out)
	}
	if out, err := exec.Command(bin, "trace", "-D", "-1s", "--workload").CombinedOutput(); err == nil || !strings.Contains(string(out), "-D/--duration must be positive") {
		t.Errorf("negative -D: %v %s", err, out)
	}
}
