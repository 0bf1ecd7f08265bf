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
// and prints the summary of what was seen. Every duration flag takes a
// Go duration or a bare number of seconds: the tracer's -D 1.5 and
// 1500ms, the workload's -D 60 and 1m.
func TestTraceDuration(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	for _, d := range [][2]string{{"1500ms", "60"}, {"1.5", "1m"}} {
		start := time.Now()
		out, err := exec.Command(bin, "trace", "-D", d[0], "--workload", "--", "-s", "64", "-I", "64", "-Q", "16", "-D", d[1], "--rate", "2000").CombinedOutput()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("trace -D %s, workload -D %s: %v:\n%s", d[0], d[1], err, out)
		}
		if took > bpftest.Timeout(t, 10*time.Second) {
			t.Errorf("trace -D %s took %s", d[0], took)
		}
		if !strings.Contains(string(out), "1 QP(s)") || !strings.Contains(string(out), "QP 0x1c0") {
			t.Errorf("trace -D %s: no summary of the QP:\n%s", d[0], out)
		}
	}
	for _, bad := range []string{"-1s", "-1", "5 s", "soon"} {
		out, err := exec.Command(bin, "trace", "-D", bad, "--workload").CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "-D") || !strings.Contains(string(out), bad) {
			t.Errorf("-D %q: %v %s; want exit 2 naming the flag and the value", bad, err, out)
		}
	}
}
