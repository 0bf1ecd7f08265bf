package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// A send CQ smaller than the signaled WRs its QP keeps outstanding, on an
// HCA slow enough that they pile up, polled as they complete: a risk, no
// overrun (the simulated HCA counts none and every WR completes). Every
// mode predicts it; events mode does not take the CQ's dry spells between
// completions for an overrun; the sentinel, with no window, predicts it
// from the provider's counts read in memory.
func TestCQOverrunRiskNoOverrun(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	const wl = "-t 128 -Q 1 --cq-depth 32 -s 65536 --sim-nic link-gbps=0.25,rtt-ns=200000 -n 1000"
	for _, mode := range []string{"events", "counters", "sentinel"} {
		t.Run(mode, func(t *testing.T) {
			truthFile := filepath.Join(t.TempDir(), "truth.json")
			args := []string{"trace", "--json", "--mode", mode}
			if mode == "sentinel" {
				args = append(args, "--sample-every", "0", "--budget", "0")
			}
			args = append(append(args, "--workload", "--"), strings.Fields(wl)...)
			cmd := exec.Command(sqscopeBin(t), append(args, "--json-out", truthFile)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("sqscope %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
			}
			var tr traceOut
			if err := decodeReport(t, stdout.Bytes(), &tr); err != nil {
				t.Fatalf("trace JSON: %v\n%s", err, stdout.String())
			}
			truth := readTruth(t, truthFile)
			if len(truth) != 1 || truth[0]["cq_overrun_errs"] != 0.0 || truth[0]["cqes_polled"] != 1000.0 {
				t.Fatalf("truth %v: want every WR completed, no overrun", truth)
			}
			var kinds []string
			for _, d := range tr.Diagnoses {
				kinds = append(kinds, d.Kind)
			}
			if !slices.Equal(kinds, []string{"cq_overrun_risk"}) {
				t.Errorf("diagnoses %q: want cq_overrun_risk alone", kinds)
			}
			if mode != "sentinel" {
				return
			}
			if len(tr.QPs) != 1 {
				t.Fatalf("QPs %v: want one", tr.QPs)
			}
			m, _ := tr.QPs[0]["memory"].(map[string]any)
			if _, ok := m["signaled_pending"]; !ok {
				t.Errorf("memory %v: no signaled_pending read", m)
			}
			var ev struct {
				Diagnoses []struct {
					Evidence map[string]uint64 `json:"evidence"`
				} `json:"diagnoses"`
			}
			if err := decodeReport(t, stdout.Bytes(), &ev); err != nil || len(ev.Diagnoses) != 1 || ev.Diagnoses[0].Evidence["pending_read"] != 1 {
				t.Errorf("the risk's evidence does not say it was read in memory (%v): %+v", err, ev.Diagnoses)
			}
		})
	}
}
