package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// sentinelOut is what a sentinel-mode trace's JSON says.
type sentinelOut struct {
	Lost     uint64 `json:"lost_events"`
	Sentinel *struct {
		Sites       int    `json:"sites_probed"`
		Without     int    `json:"functions_without_sites"`
		Hits        uint64 `json:"error_site_hits"`
		Escalations uint64 `json:"escalations"`
		Sampling    *struct {
			Windows     uint64  `json:"windows"`
			Traced      float64 `json:"traced_s"`
			NotMeasured string  `json:"cost_not_measured"`
			LowerBound  string  `json:"cost_lower_bound"`
			Budget      float64 `json:"budget_pct"`
			Next        float64 `json:"next_window_in_s"`
			Shares      *struct {
				Windows    uint64   `json:"windows"`
				WRs        uint64   `json:"wrs"`
				Inline     estimate `json:"inline_pct"`
				Signaled   estimate `json:"signaled_pct"`
				NoInterval string   `json:"no_interval"`
			} `json:"shares"`
			Cost *struct {
				Probe  float64 `json:"probe_cpu_s"`
				Target float64 `json:"target_cpu_s"`
				Share  float64 `json:"share_pct"`
				Traps  uint64  `json:"traps"`
				TrapNS uint64  `json:"trap_ns"`
			} `json:"probe_cost"`
		} `json:"sampling"`
	} `json:"sentinel"`
	QPs   []map[string]any `json:"qps"`
	Total struct {
		PostCalls uint64 `json:"post_calls"`
		Polls     uint64 `json:"polls"`
	} `json:"total"`
	Probes    []trace.Attach `json:"probes"`
	Diagnoses []struct {
		Kind     string         `json:"kind"`
		QPNum    float64        `json:"qp_num"`
		Message  string         `json:"message"`
		Evidence map[string]any `json:"evidence"`
	} `json:"diagnoses"`
}

// estimate is an estimated percentage with its 95% interval.
type estimate struct {
	Pct  float64  `json:"value"`
	Low  *float64 `json:"ci95_low"`
	High *float64 `json:"ci95_high"`
}

// traceSentinel traces the workload on the simulated HCA in sentinel
// mode and returns the trace's JSON and the workload's truth.
func traceSentinel(t *testing.T, flags string) (sentinelOut, []map[string]any) {
	t.Helper()
	return traceSentinelWith(t, "", flags)
}

// traceSentinelWith is traceSentinel with more flags of the trace's.
func traceSentinelWith(t *testing.T, traceFlags, flags string) (sentinelOut, []map[string]any) {
	t.Helper()
	truthFile := filepath.Join(t.TempDir(), "truth.json")
	args := append([]string{"trace", "--json", "--mode", "sentinel"}, strings.Fields(traceFlags)...)
	args = append(append(args, "--workload", "--"), strings.Fields(flags)...)
	args = append(args, "--sim-deterministic", "--json-out", truthFile)
	cmd := exec.Command(sqscopeBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sqscope %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var out sentinelOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("trace JSON: %v\n%s", err, stdout.String())
	}
	if out.Lost != 0 || out.Sentinel == nil || out.Sentinel.Sites == 0 || out.Sentinel.Without != 0 {
		t.Fatalf("lost %d, sentinel %+v: want error sites in the simulated HCA's post_send", out.Lost, out.Sentinel)
	}
	return out, readTruth(t, truthFile)
}

// The sentinel catches each fault with its cause and QP: every refusal
// the simulated HCA counted is counted once, by the error site before the
// escalation window and by the window's records in it.
func TestSentinelCatchesFaults(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	cases := []struct {
		name, flags, count, diag string
	}{
		{"never-signal", "--fault never-signal -n 2000", "enomem_sq_full", "sq_overflow_at_error_site"},
		{"never-signal after healthy traffic", "--fault never-signal --fault-after 0.3 -D 0.6 --qps 2 --fault-qp 1", "enomem_sq_full", "sq_overflow_at_error_site"},
		{"inline-too-big", "--fault inline-too-big -n 2000", "enomem_inline", "inline_too_big"},
		{"inline-too-big after healthy traffic", "--fault inline-too-big --fault-after 0.3 -D 0.6", "enomem_inline", "inline_too_big"},
		{"too-many-sge", "--fault too-many-sge -n 2000", "enomem_sge", "too_many_sge"},
		{"bad-opcode", "--fault bad-opcode -n 2000", "einval", "einval"},
		{"post-before-rts", "--fault post-before-rts -n 2000", "not_rts", "post_qp_not_rts"},
		// the escalation window sees the completions not polled: the
		// cause, not only the full queue
		{"lazy-poll", "--fault lazy-poll=500 -Q 16 -n 5000", "enomem_sq_full", "sq_overflow_cq_not_polled"},
		{"lazy-poll after healthy traffic", "--fault lazy-poll=500 -Q 16 --fault-after 0.3 -D 0.6 --qps 2 --fault-qp 1", "enomem_sq_full", "sq_overflow_cq_not_polled"},
		// no post fails: the overrun is read in the QP's memory (the
		// simulated HCA's count), and escalates as a failure does
		{"cq-overrun", "-t 128 -Q 1 --cq-depth 32 --fault cq-overrun -n 2000", "cq_overrun_errs", "cq_overrun"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, truth := traceSentinel(t, tc.flags)
			read := tc.count == "cq_overrun_errs" // seen in memory, not at an error site
			if (out.Sentinel.Hits == 0) != read || out.Sentinel.Escalations != 1 {
				t.Errorf("sentinel %+v: want one escalation, and error-site hits unless the fault fails no post", out.Sentinel)
			}
			var faulted []float64
			for _, q := range truth {
				if q[tc.count].(float64) > 0 {
					faulted = append(faulted, q["qp_num"].(float64))
				}
			}
			if len(faulted) != 1 {
				var saw []string
				for _, q := range truth {
					app := q["app"].(map[string]any)
					saw = append(saw, fmt.Sprintf("QP %v: %v WRs in %v s, fault from %v s, peak %v", q["qp_num"], app["wrs"], app["seconds"], app["fault_start_s"], app["peak_outstanding"]))
				}
				t.Fatalf("the simulated HCA counted %s on QPs %v: want one (%s)", tc.count, faulted, strings.Join(saw, "; "))
			}
			for _, q := range truth {
				var got map[string]any
				for _, g := range out.QPs {
					if g["qp_num"] == q["qp_num"] {
						got = g
					}
				}
				if got == nil {
					t.Fatalf("QP %v not in the trace", q["qp_num"])
				}
				app := q["app"].(map[string]any) // what the application saw returned
				count := got[tc.count]
				if read {
					mem, _ := got["memory"].(map[string]any)
					count = mem["cq_errors"]
				}
				if count != q[tc.count] || got["enomem"] != app["enomem"] {
					t.Errorf("QP %v: %s %v, enomem %v; the simulated HCA counted %v, the application %v",
						q["qp_num"], tc.count, count, got["enomem"], q[tc.count], app["enomem"])
				}
			}
			var diagnosed []float64
			for _, d := range out.Diagnoses {
				if d.Kind == tc.diag {
					diagnosed = append(diagnosed, d.QPNum)
				}
			}
			if !slices.Equal(diagnosed, faulted) {
				t.Errorf("%s on QPs %v, want %v (diagnoses %+v)", tc.diag, diagnosed, faulted, out.Diagnoses)
			}
		})
	}
}

// A healthy run in sentinel mode takes no trap on its data path: no
// error site runs, no window opens, no post or poll is recorded, and
// nothing is diagnosed.
func TestSentinelHealthyIsQuiet(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	for _, flags := range []string{
		"-n 5000",
		"-Q 64 -t 128 -l 8 -n 5000 --api wr",
		"-Q 16 -t 32 -s 64 -I 64 -l 2 -n 5000 --qps 4",
	} {
		t.Run(flags, func(t *testing.T) {
			out, truth := traceSentinel(t, flags)
			if out.Sentinel.Hits != 0 || out.Sentinel.Escalations != 0 || out.Total.PostCalls != 0 || out.Total.Polls != 0 || len(out.Diagnoses) != 0 {
				t.Errorf("sentinel %+v, %d post calls and %d polls recorded, diagnoses %+v: want none",
					out.Sentinel, out.Total.PostCalls, out.Total.Polls, out.Diagnoses)
			}
			for _, a := range out.Probes {
				if (a.Func == "post_send" || a.Func == "poll_cq") && a.How != trace.HowErrorSite {
					t.Errorf("a data-path probe was placed: %+v", a)
				}
			}
			posted := 0.0
			for _, q := range truth {
				posted += q["post_calls"].(float64)
			}
			if posted == 0 {
				t.Fatal("the workload posted nothing")
			}
		})
	}
}
