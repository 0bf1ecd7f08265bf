package main

import (
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// In the sentinel mode a trigger escalates: a SIGUSR1 during a healthy
// run places the full probes on its process, so the file holds its posts
// after the trigger and none before it (healthy, no window), and its
// report says from when the detail is complete.
func TestFlightSentinelEscalates(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	dir := filepath.Join(t.TempDir(), "flight")
	ready := filepath.Join(t.TempDir(), "ready")
	cmd, stderr := startFlight(t, "--mode", "sentinel", "--sample-every", "0", "--budget", "0", "--flight", "2s", "--after", "1s",
		"--trigger", "signal", "-o", dir, "--workload", "--", "-D", "30", "--rate", "20000", "--ready-file", ready)
	waitFile(t, ready)
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// the file is begun at the trigger and complete after the after window
	waitFor(t, func() bool { m, _ := filepath.Glob(filepath.Join(dir, "*.sqscope")); return len(m) > 0 })
	time.Sleep(bpftest.Timeout(t, 2*time.Second))
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record --flight: %v\n%s", err, stderr)
	}
	files := flightFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d files, want 1\n%s", len(files), stderr)
	}
	r, err := trace.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	at := r.Info().Flight.TriggerNS
	var before, after int
	var escalated uint64
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *trace.Post:
			if e.TimeNS < at {
				before++
			} else {
				after++
			}
		case *trace.Attach:
			if e.How == trace.HowEscalation && e.Err == "" && escalated == 0 {
				escalated = e.TimeNS
			}
		}
	}
	if before != 0 || after == 0 || escalated < at {
		t.Errorf("%d posts before the trigger, %d after, escalation placed at %d (trigger %d): want posts from the escalation after it only",
			before, after, escalated, at)
	}
	t.Logf("the escalation's probes in place %v after the trigger; %d posts after it", time.Duration(escalated-at), after)
	out, err := exec.Command(sqscopeBin(t), "report", files[0]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "traced in full from") {
		t.Errorf("report: %v, want it to say from when the failing process was traced in full:\n%s", err, out)
	}
}
