package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// A workload that posts through the simulated HCA's direct path, as
// direct-verbs applications do (its WQEs written without ibv_post_send):
// traced in events mode, its QP is said to have its posts not traced,
// with its completions exact and no send figure shown as 0; in sentinel
// mode, the counters read from its memory still count every WR it posted.
func TestDirectVerbsPostsNotTraced(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	flags := "--api direct -Q 16 -n 4000"
	truthFile := filepath.Join(t.TempDir(), "truth.json")
	args := append([]string{"trace", "--json", "--mode", "events", "--workload", "--"}, strings.Fields(flags)...)
	args = append(args, "--sim-deterministic", "--json-out", truthFile)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(sqscopeBin(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sqscope %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var out struct {
		QPs       []map[string]any `json:"qps"`
		Diagnoses []struct {
			Kind  string  `json:"kind"`
			QPNum float64 `json:"qp_num"`
		} `json:"diagnoses"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("trace JSON: %v\n%s", err, stdout.String())
	}
	truth := readTruth(t, truthFile)
	if len(out.QPs) != 1 || len(truth) != 1 {
		t.Fatalf("QPs %v, truth %v: want one", out.QPs, truth)
	}
	q, w := out.QPs[0], truth[0]
	if q["posts_not_traced"] != true || q["cqes_polled"] != w["cqes_polled"] || w["wrs"] != 4000.0 {
		t.Errorf("QP: posts not traced %v, CQEs %v; the simulated HCA: %v WRs, %v CQEs polled", q["posts_not_traced"], q["cqes_polled"], w["wrs"], w["cqes_polled"])
	}
	for _, k := range []string{"wrs", "post_calls", "doorbells", "outstanding", "occupancy"} {
		if v, ok := q[k]; ok {
			t.Errorf("%s = %v of a QP whose posts were not seen", k, v)
		}
	}
	if len(out.Diagnoses) != 1 || out.Diagnoses[0].Kind != "posts_not_traced" || out.Diagnoses[0].QPNum != w["qp_num"] {
		t.Errorf("diagnoses %+v: want posts_not_traced on QP %v alone", out.Diagnoses, w["qp_num"])
	}

	// paced, so that the reads (every 0.1 s) see it run
	sout, struth := traceSentinelWith(t, "--sample-every 0 --budget 0", "--api direct -Q 16 -n 60000 --rate 50000")
	if len(sout.QPs) != 1 || len(struth) != 1 {
		t.Fatalf("sentinel: QPs %v, truth %v: want one", sout.QPs, struth)
	}
	mem, _ := sout.QPs[0]["memory"].(map[string]any)
	all := struth[0]["wrs"].(float64)
	if mem == nil || mem["samples"].(float64) < 3 || mem["posted"].(float64) > all || mem["posted"].(float64) < all/2 || len(sout.Diagnoses) != 0 {
		t.Errorf("sentinel: memory %v, diagnoses %+v; want most of the %v WRs posted read, nothing diagnosed", mem, sout.Diagnoses, all)
	}
}
