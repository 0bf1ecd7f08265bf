package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// tracedDiagnoses traces the workload on the simulated HCA in mode and
// returns its diagnoses as "KIND QP 0xN" and the QPs' counts.
func tracedDiagnoses(t *testing.T, mode, flags string) ([]string, []map[string]any) {
	t.Helper()
	args := append([]string{"trace", "--json", "--mode", mode, "--workload", "--"}, strings.Fields(flags)...)
	cmd := exec.Command(sqscopeBin(t), append(args, "--sim-deterministic")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sqscope %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var r struct {
		Lost      uint64           `json:"lost_events"`
		QPs       []map[string]any `json:"qps"`
		Diagnoses []struct {
			Kind  string `json:"kind"`
			QPNum uint32 `json:"qp_num"`
		} `json:"diagnoses"`
	}
	// the last JSON document on stdout is the summary
	dec := json.NewDecoder(&stdout)
	for {
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("trace JSON: %v", err)
		}
	}
	if r.Lost != 0 || len(r.QPs) == 0 {
		t.Fatalf("%d QPs, %d events lost", len(r.QPs), r.Lost)
	}
	// a trace of a started command that ran to its end has nothing to
	// warn of, whatever the application did
	noWarnings(t, stderr.String())
	var kinds []string
	for _, d := range r.Diagnoses {
		kinds = append(kinds, fmt.Sprintf("%s QP %#x", d.Kind, d.QPNum))
	}
	slices.Sort(kinds)
	return kinds, r.QPs
}

// noWarnings fails t for every warning in stderr, the output of a clean
// trace, but one naming another tracer (a shared host's, not the trace's).
func noWarnings(t *testing.T, stderr string) {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "sqscope: warning") && !strings.Contains(l, "another tracer") {
			t.Errorf("a warning on a clean trace: %s", l)
		}
	}
}

// A healthy application stays quiet: perftest's flow control (never more
// than -t WRs outstanding) with its default -Q 100 -t 128, -Q from 1 up to
// half the depth, post lists, both posting APIs, 1 to 8 QPs, in both modes: no
// diagnosis and no prediction.
func TestHealthyMatrixIsQuiet(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	matrix := []string{
		"-n 5000", // the workload's defaults are perftest's: -Q 100 -t 128
		"-Q 100 -t 128 -n 5000 --api wr",
		"-Q 100 -t 128 -l 4 -n 5000",
		"-Q 64 -t 128 -l 8 -n 5000 --api wr",
		"-Q 128 -t 256 -s 64 -I 64 -n 5000",
		"-Q 16 -t 32 -s 64 -I 64 -l 2 -n 5000 --qps 4",
		"-Q 1 -t 256 -n 3000 --qps 4", // every WR signaled
		"-Q 100 -t 128 -n 2000 --qps 8",
		"-Q 50 -t 100 -l 5 -n 2000 --qps 8 --api wr",
		"-Q 64 -t 128 -s 256 --opcode write -l 4 -n 5000 --qps 2",
	}
	for _, mode := range []string{"events", "counters"} {
		for _, flags := range matrix {
			t.Run(mode+" "+flags, func(t *testing.T) {
				kinds, qps := tracedDiagnoses(t, mode, flags)
				if len(kinds) != 0 {
					t.Fatalf("a healthy run was diagnosed: %q", kinds)
				}
				for _, q := range qps {
					if q["wrs"].(float64) == 0 {
						t.Fatalf("QP %v posted nothing: the run did not run", q["qp_num"])
					}
				}
			})
		}
	}
}

// Every fault mode is diagnosed with its own cause and no other, on the QP
// that has it (a never-signaled run, and a queue growing while its
// completions are not polled, are predicted before they overflow; the
// prediction names the same cause). Counters mode, whose kernel keeps
// each send queue, names the same causes but those that need each call
// (the occupancy's trend, the CQ's overrun itself, the receive side's);
// a queue of signaled WRs whose CQ's totals were not flushed since the
// oldest of them (these runs are shorter than a flush) is an overflow
// without the polls' verdict (sq_overflow_inferred); a QP posted through
// the wr API has no model (its failures are counted, no cause named).
func TestFaultsNameTheirOwnCause(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	tests := []struct {
		name, flags string
		want        []string // kinds on QP 0x1c0 (the first), sorted
		counters    []string // what counters mode names, sorted
		counted     string   // the failures counters mode counts, "" when none
	}{
		{"never-signal", "-t 128 --fault never-signal -n 1000",
			[]string{"sq_overflow_never_signaled", "unsignaled_run_near_depth"},
			[]string{"sq_overflow_never_signaled", "unsignaled_run_near_depth"}, "enomem"},
		{"lazy-poll", "-t 128 -Q 16 --fault lazy-poll=300 -n 2000",
			[]string{"sq_overflow_cq_not_polled"}, []string{"sq_overflow_inferred"}, "enomem"},
		// posting 1,000 WR/s with the CQ polled every 300 posts: the
		// occupancy ramps for 128 ms with completions due, predicted
		// before the overflow
		{"lazy-poll, slow", "-t 128 -Q 16 --fault lazy-poll=300 --rate 1000 -n 400",
			[]string{"occupancy_trending_full", "sq_overflow_cq_not_polled"}, []string{"sq_overflow_inferred"}, "enomem"},
		{"inline-too-big", "-I 64 --fault inline-too-big -n 200", []string{"inline_too_big"}, []string{"inline_too_big"}, "enomem"},
		{"too-many-sge", "--fault too-many-sge -n 200", []string{"too_many_sge"}, []string{"too_many_sge"}, "enomem"},
		{"bad-opcode", "--fault bad-opcode -n 200", []string{"einval"}, []string{"einval"}, "einval"},
		{"too-many-sge wr api", "--fault too-many-sge -n 200 --api wr", []string{"too_many_sge"}, nil, "enomem"},
		{"post-before-rts", "--fault post-before-rts -n 200", []string{"post_qp_not_rts"}, []string{"post_qp_not_rts"}, "enomem"},
		{"post-before-rts wr api", "--fault post-before-rts --api wr -n 200", []string{"post_qp_not_rts"}, nil, "einval"},
		// the overrun itself shows in the CQ's completions, which counters
		// mode does not see one by one; the risk it does
		{"cq-overrun", "-t 128 -Q 1 --cq-depth 32 --fault cq-overrun -n 2000",
			[]string{"cq_overrun", "cq_overrun_risk"}, []string{"cq_overrun_risk"}, ""},
		// the receiving QP (0x1c1) is traced too, and stays quiet; counters
		// mode does not see the receives complete
		{"rq-starve", "-t 64 -Q 8 --fault rq-starve -n 500", []string{"rq_starved"}, []string{"sq_overflow_inferred"}, "enomem"},
		// the fault on the first of 4 QPs: the three others stay quiet
		{"never-signal on one QP of 4", "-s 64 -I 64 -Q 16 -t 128 --qps 4 --fault never-signal --fault-qp 0 -n 1000",
			[]string{"sq_overflow_never_signaled", "unsignaled_run_near_depth"},
			[]string{"sq_overflow_never_signaled", "unsignaled_run_near_depth"}, "enomem"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, k := range tc.want {
				want = append(want, k+" QP 0x1c0")
			}
			kinds, _ := tracedDiagnoses(t, "events", tc.flags)
			// the trend's prediction needs the ramp the workload paces,
			// which a busy host may break up (the thread preempted, then
			// catching up in a burst): a run without it is run again, up
			// to 3 times
			timed := tc.want[0] == "occupancy_trending_full"
			for try := 1; timed && try < 3 && slices.Equal(kinds, want[1:]); try++ {
				t.Logf("run %d: %q, without the prediction (the ramp broken up by the host?): again", try, kinds)
				kinds, _ = tracedDiagnoses(t, "events", tc.flags)
			}
			if !slices.Equal(kinds, want) {
				t.Errorf("events mode: diagnoses %q, want %q", kinds, want)
			}
			kinds, qps := tracedDiagnoses(t, "counters", tc.flags)
			var cwant []string
			for _, k := range tc.counters {
				cwant = append(cwant, k+" QP 0x1c0")
			}
			if !slices.Equal(kinds, cwant) {
				t.Errorf("counters mode: diagnoses %q, want %q", kinds, cwant)
			}
			if n, _ := qps[0][tc.counted].(float64); tc.counted != "" && n == 0 {
				t.Errorf("counters mode: %s of QP %v is %v, want the failures counted", tc.counted, qps[0]["qp_num"], qps[0][tc.counted])
			}
		})
	}
}
