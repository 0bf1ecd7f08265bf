package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// A fault that begins after a minute of healthy traffic is caught by the
// sentinel, as it runs by default (its sample windows under the 1%
// budget), within a second of the first failure: the trace's report of
// the interval in which the diagnosis first appears, with its cause and
// QP, is read here within a second of the failure's own time.
func TestSentinelLateFault(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	if testing.Short() {
		t.Skip("a minute of healthy traffic first")
	}
	const healthy = 60.0
	cases := []struct {
		name, fault, count, diag string
	}{
		{"never-signal", "never-signal", "enomem_sq_full", "sq_overflow_at_error_site"},
		{"inline-too-big", "inline-too-big", "enomem_inline", "inline_too_big"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			truthFile := filepath.Join(t.TempDir(), "truth.json")
			args := []string{"trace", "--json", "-i", "0.1", "--mode", "sentinel", "--workload", "--",
				"--qps", "2", "--fault-qp", "1", "--fault", tc.fault, "--fault-after", fmt.Sprint(healthy), "-D", fmt.Sprint(healthy + 2),
				"--sim-deterministic", "--json-out", truthFile}
			cmd := exec.Command(sqscopeBin(t), args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			type line struct {
				Diagnoses []struct {
					Kind    string `json:"kind"`
					QPNum   uint32 `json:"qp_num"`
					FirstNS uint64 `json:"first_ns"`
				} `json:"diagnoses"`
				Sentinel *struct {
					Sampling *struct {
						Windows uint64 `json:"windows"`
					} `json:"sampling"`
				} `json:"sentinel"`
			}
			var (
				caught, failedNS uint64 // when the line with the diagnosis was read, and the first failure's time
				caughtQP         uint32
				windows          uint64
				last             string
			)
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				read := trace.MonotonicNS()
				last = sc.Text()
				var l line
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Fatalf("a line of the trace's NDJSON: %v\n%.400s", err, sc.Text())
				}
				if l.Sentinel != nil && l.Sentinel.Sampling != nil {
					windows = l.Sentinel.Sampling.Windows
				}
				for _, d := range l.Diagnoses {
					if d.Kind == tc.diag && caught == 0 {
						caught, failedNS, caughtQP = read, d.FirstNS, d.QPNum
					}
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("sqscope %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			truth := readTruth(t, truthFile)
			var faulted []uint32
			for _, q := range truth {
				if q[tc.count].(float64) > 0 {
					faulted = append(faulted, uint32(q["qp_num"].(float64)))
				}
				if app := q["app"].(map[string]any); app["fault_start_s"] != nil && app["fault_start_s"].(float64) < healthy {
					t.Fatalf("QP %v: the fault began %v s in, want after %v s of healthy traffic", q["qp_num"], app["fault_start_s"], healthy)
				}
			}
			if len(faulted) != 1 {
				t.Fatalf("the simulated HCA counted %s on QPs %v: want one", tc.count, faulted)
			}
			if caught == 0 {
				t.Fatalf("no line said %s; the last:\n%.2000s", tc.diag, last)
			}
			if caughtQP != faulted[0] {
				t.Errorf("%s on QP %#x, want the faulted QP %#x", tc.diag, caughtQP, faulted[0])
			}
			if windows == 0 {
				t.Errorf("no sample window opened in %v s of healthy traffic: want the sentinel as it runs by default", healthy)
			}
			latency := time.Duration(caught - failedNS)
			t.Logf("%s on QP %#x read %v after the first failure (%d sample windows before)", tc.diag, caughtQP, latency, windows)
			if bound := bpftest.Timeout(t, time.Second); caught < failedNS || latency > bound {
				t.Errorf("the diagnosis was read %v after the first failure: want within %v", latency, bound)
			}
		})
	}
}
