package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// Two tracers on one process, as on a shared host: a service's `serve -a`
// and an engineer's `trace -p` of a workload already running, both
// exact. The workload made its QP before either tracer placed a probe on
// its data path and posts only once both are in place; serve's counters
// and trace's summary each equal its ground truth.
func TestServeAllBesideTraceP(t *testing.T) {
	bpftest.RequireHost(t, probe.Preflight)
	dir := t.TempDir()
	ready, truthFile := filepath.Join(dir, "ready"), filepath.Join(dir, "truth.json")
	wl := exec.Command(sqscopeBin(t), "workload", "--qps", "2", "-t", "128", "-Q", "16", "-l", "2", "-n", "20000",
		"--sim-deterministic", "--ready-file", ready, "--wait-signal", "--json-out", truthFile)
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	waitFile(t, ready)
	pid := fmt.Sprint(wl.Process.Pid)

	s := serveWith(t, "-a", "--mode", "counters")
	// in place for the processes running now once their scans are done
	// (other verbs processes of the host, another sqscope's among them,
	// make them take longer)
	s.waitFor(t, regexp.MustCompile(`tracing every process that uses verbs: `))
	tr := exec.Command(sqscopeBin(t), "trace", "-p", pid, "--json")
	var stdout, stderr bytes.Buffer
	tr.Stdout, tr.Stderr = &stdout, &stderr
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
	// trace -p says what it found in the running process's memory once
	// its probes are placed
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "found in its memory") })
	if err := wl.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := wl.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	if err := tr.Wait(); err != nil {
		t.Fatalf("trace -p: %v\n%s", err, stderr.String())
	}
	truth := readTruth(t, truthFile)
	if len(truth) != 2 {
		t.Fatalf("the workload's truth lists %d QPs, want 2", len(truth))
	}

	var out followOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("trace -p JSON: %v\n%s", err, stdout.String())
	}
	got := qpsByPID(out.QPs)[uint32(wl.Process.Pid)]
	if len(got) != len(truth) {
		t.Fatalf("trace -p: %d QPs of the workload, want %d", len(got), len(truth))
	}
	byNum := map[any]map[string]any{}
	for _, q := range got {
		byNum[q["qp_num"]] = q
	}
	for _, q := range truth {
		g := byNum[q["qp_num"]]
		if g == nil {
			t.Fatalf("trace -p: no QP %v", q["qp_num"])
		}
		for _, f := range []string{"wrs", "post_calls", "signaled"} {
			if g[f] != q[f] {
				t.Errorf("trace -p, QP %v: %s = %v, truth %v", q["qp_num"], f, g[f], q[f])
			}
		}
	}

	// serve flushes its counters every second: wait for them to agree
	deadline := time.Now().Add(bpftest.Timeout(t, 20*time.Second))
	for {
		mfs := series(t, func() []byte { b, _ := s.scrape(t, ""); return b }())
		match := 0
		for _, q := range truth {
			v, ok := value(mfs, "sqscope_send_wrs_total", map[string]string{"pid": pid, "qpn": fmt.Sprint(q["qp_num"])})
			if ok && v == q["wrs"].(float64) {
				match++
			}
		}
		if match == len(truth) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve -a: the workload's QPs (pid %s) never equal its truth %v", pid, truth)
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("serve -a after SIGTERM: %v\n%s", err, s.log.String())
	}
}
