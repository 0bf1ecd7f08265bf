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
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// -a on a host with a verbs process of a 1 GiB heap (its memory scan takes
// seconds) and another host-wide sqscope tracing: workloads started 0,
// 0.2, 1 and 3 s after sqscope are each traced by both, their posts
// exact; those that made their QPs after the discovery probes were placed
// exact in full, caps included. The time to "tracing" and each scan's are
// logged.
func TestTraceAllStartsLater(t *testing.T) {
	bpftest.RequireHost(t, probe.Preflight)
	bin, dir := sqscopeBin(t), t.TempDir()
	heapReady := filepath.Join(dir, "heap.ready")
	heap := exec.Command(os.Args[0])
	heap.Env = append(os.Environ(), "SQSCOPE_TEST_HEAP_MIB=1024", "SQSCOPE_TEST_READY="+heapReady)
	if err := heap.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { heap.Process.Kill(); heap.Wait() })
	waitFile(t, heapReady)

	type tracer struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
		start          time.Time
	}
	startTracer := func() *tracer {
		tr := &tracer{cmd: exec.Command(bin, "trace", "-a", "--json")}
		tr.cmd.Stdout, tr.cmd.Stderr = &tr.stdout, &tr.stderr
		tr.start = time.Now()
		if err := tr.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.cmd.Process.Kill(); tr.cmd.Wait() })
		return tr
	}
	other := startTracer() // another sqscope of the host, already tracing
	waitFor(t, func() bool { return strings.Contains(other.stderr.String(), "tracing every process that uses verbs") })
	tr := startTracer()

	type started struct {
		after        time.Duration
		cmd          *exec.Cmd
		ready, truth string
	}
	var wls []started
	for i, after := range []time.Duration{0, 200 * time.Millisecond, time.Second, 3 * time.Second} {
		time.Sleep(time.Until(tr.start.Add(after)))
		w := started{after: after, ready: filepath.Join(dir, fmt.Sprint("ready", i)), truth: filepath.Join(dir, fmt.Sprint("truth", i))}
		w.cmd = exec.Command(bin, "workload", "-t", "128", "-Q", "8", "-l", "2", "-n", "4000", "--sim-deterministic",
			"--ready-file", w.ready, "--wait-signal", "--json-out", w.truth)
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.cmd.Process.Kill(); w.cmd.Wait() })
		wls = append(wls, w)
	}
	waitFor(t, func() bool { return strings.Contains(tr.stderr.String(), "tracing every process that uses verbs") })
	t.Logf("sqscope said it traces every process %v after it started", time.Since(tr.start).Round(time.Millisecond))
	for _, w := range wls {
		waitFile(t, w.ready)
		if err := w.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range wls {
		if err := w.cmd.Wait(); err != nil {
			t.Fatalf("workload started after %v: %v", w.after, err)
		}
	}
	for name, x := range map[string]*tracer{"this sqscope": tr, "the other sqscope": other} {
		x.cmd.Process.Signal(syscall.SIGINT)
		if err := x.cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, x.stderr.String())
		}
		var out struct {
			followOut
			Scans []struct {
				PID        uint32
				Bytes      uint64
				DurationNS uint64 `json:"DurationNS"`
				Cut, Err   string
			} `json:"memory_scans"`
		}
		if err := json.Unmarshal(x.stdout.Bytes(), &out); err != nil {
			t.Fatalf("%s: JSON: %v\n%s", name, err, x.stdout.String())
		}
		for _, sc := range out.Scans {
			t.Logf("%s: scan of process %d: %d MiB in %v %s%s", name, sc.PID, sc.Bytes>>20, time.Duration(sc.DurationNS).Round(time.Millisecond), sc.Cut, sc.Err)
		}
		joined := map[uint32]string{}
		for _, p := range out.Processes {
			joined[p.PID] = p.Joined
		}
		groups := qpsByPID(out.QPs)
		for _, w := range wls {
			pid := uint32(w.cmd.Process.Pid)
			truth, got := readTruth(t, w.truth), groups[pid]
			what := fmt.Sprintf("%s, the workload started %v after sqscope (joined %q)", name, w.after, joined[pid])
			t.Log(what)
			if joined[pid] == "first" {
				compareQPs(t, what, got, truth)
				continue
			}
			if len(got) != 1 || len(truth) != 1 {
				var qps []string
				for _, q := range got {
					qps = append(qps, fmt.Sprintf("qpn %v found %v wrs %v", q["qp_num"], q["found"], q["wrs"]))
				}
				t.Fatalf("%s: QPs: trace %d (%s), truth %d", what, len(got), strings.Join(qps, "; "), len(truth))
			}
			for _, f := range []string{"wrs", "post_calls", "signaled"} {
				if got[0][f] != truth[0][f] {
					t.Errorf("%s: %s = %v, truth %v", what, f, got[0][f], truth[0][f])
				}
			}
		}
	}
}
