package main

import (
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// The sentinel reads each QP's send-queue counters from the target's
// memory, without a trap: on a healthy paced workload with no window,
// every WR posted is counted (none was traced), its rate is the
// workload's within 5%, and the occupancy read stays within the depth;
// on a never-signal overflow the reads show the queue full at its depth.
func TestSentinelReadsCounters(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	mem := func(t *testing.T, flags string) (map[string]any, map[string]any, map[string]any) {
		t.Helper()
		out, truth := traceSentinelWith(t, "--sample-every 0 --budget 0", flags)
		if len(out.QPs) != 1 || len(truth) != 1 {
			t.Fatalf("%d QPs traced, %d in the truth: want one", len(out.QPs), len(truth))
		}
		q := out.QPs[0]
		m, ok := q["memory"].(map[string]any)
		if !ok {
			t.Fatalf("QP %v: no memory reads", q)
		}
		return q, m, truth[0]
	}
	t.Run("healthy", func(t *testing.T) {
		q, m, w := mem(t, "-n 150000 --rate 50000 -Q 32 -t 128")
		app := w["app"].(map[string]any)
		truthWRs, secs := w["wrs"].(float64), app["seconds"].(float64)
		want := truthWRs / secs
		got := m["wrs_per_s"].(float64)
		t.Logf("read %v times: %v WRs posted by the last read of %v, %.0f WR/s over %v s, the workload's %.0f WR/s over %.2f s",
			m["samples"], m["posted"], truthWRs, got, m["span_s"], want, secs)
		if q["wrs"].(float64) != 0 {
			t.Errorf("%v WRs traced: the sentinel without windows traces no post", q["wrs"])
		}
		if m["samples"].(float64) < 5 || m["posted_since_create"] != true {
			t.Errorf("memory %v: want reads every 0.1 s of a 3 s run, counted from the create", m)
		}
		if p := m["posted"].(float64); p > truthWRs || p < m["wrs_between_samples"].(float64) || p < truthWRs/2 {
			t.Errorf("%v WRs posted by the last read of %v posted in all", p, truthWRs)
		}
		if math.Abs(got-want) > 0.05*want {
			t.Errorf("%.0f WR/s read from memory, the workload's %.0f: want within 5%%", got, want)
		}
		depth := q["max_send_wr"].(float64)
		if o, pk := m["outstanding"].(float64), m["peak_sampled"].(float64); o > depth || pk > depth || pk > w["peak_outstanding"].(float64) {
			t.Errorf("outstanding %v, highest read %v: want within max_send_wr %v and the true peak %v", o, pk, depth, w["peak_outstanding"])
		}
		if _, ok := m["dropped"]; ok {
			t.Errorf("memory %v: a read dropped on a paced workload", m)
		}
	})
	t.Run("never-signal", func(t *testing.T) {
		q, m, _ := mem(t, "--fault never-signal --fault-after 0.5 -D 1.5 --rate 20000 -t 128")
		depth := q["max_send_wr"].(float64)
		if m["peak_sampled"].(float64) != depth || m["outstanding"].(float64) != depth || q["outstanding"].(float64) != depth {
			t.Errorf("QP %v, memory %v: want the queue read full at its depth %v after the overflow", q, m, depth)
		}
	})
	// serve exports the WRs read, a counter that grows with the workload's,
	// in its default (sentinel) mode, and the occupancy read as the QP's
	t.Run("serve", func(t *testing.T) {
		// the workload outlasts the test (serve's end ends it); each
		// scrape waits for the count to grow, as long as the host needs
		s := startServe(t, "sentinel", "-D 600 --rate 20000 -t 128 -Q 16")
		var last, v, out float64
		var ok, haveOut bool
		for i := 0; i < 2; i++ {
			waitFor(t, func() bool {
				body, _ := s.scrape(t, "")
				mfs := series(t, body)
				v, ok = value(mfs, "sqscope_sq_posted_read_wrs_total", map[string]string{"qpn": "448"})
				out, haveOut = value(mfs, "sqscope_sq_outstanding_wrs", map[string]string{"qpn": "448"})
				return ok && v > last
			})
			if !haveOut || out > 128 {
				t.Fatalf("scrape %d: WRs read %v, after %v; outstanding %v (exported %v): want the occupancy within the depth", i, v, last, out, haveOut)
			}
			last = v
		}
	})
	// a running process's QPs, found in its memory by the attach (before
	// the reader runs), are read too: from the provider's own count, not
	// since their create
	t.Run("attached", func(t *testing.T) {
		wl := startWorkload(t, "-D", "60", "--rate", "20000")
		out, err := exec.Command(sqscopeBin(t), "trace", "--json", "--mode", "sentinel", "--sample-every", "0", "--budget", "0",
			"-p", strconv.Itoa(wl.Process.Pid), "-D", "2").Output()
		if err != nil {
			t.Fatalf("trace -p: %v", err)
		}
		var r struct {
			QPs []map[string]any `json:"qps"`
		}
		if err := json.Unmarshal(out, &r); err != nil || len(r.QPs) != 1 {
			t.Fatalf("trace JSON (%v): want one QP\n%s", err, out)
		}
		m, ok := r.QPs[0]["memory"].(map[string]any)
		if !ok || r.QPs[0]["found"] != "memory" || m["posted_since_create"] == true || m["samples"].(float64) < 2 || m["wrs_per_s"].(float64) <= 0 {
			t.Errorf("QP %v: want it found in memory and read, its count not since its create", r.QPs[0])
		}
	})
}

// startWorkload starts `sqscope workload ARGS` and waits until it says
// it runs (its --ready-file); the test's end interrupts it and waits.
func startWorkload(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	wl := exec.Command(sqscopeBin(t), append(append([]string{"workload"}, args...), "--ready-file", ready)...)
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		wl.Process.Signal(syscall.SIGINT)
		wl.Wait()
	})
	waitFile(t, ready)
	return wl
}
