package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// Counters mode on the workload: the rate is the workload's own, the PCIe
// savings are not wrapped, the send queue the kernel kept is the
// workload's (-Q 16: runs of 15, a peak of 16, a CQE per signaled WR),
// and what the mode does not measure is absent from the JSON and the
// text.
func TestTraceCountersModeMeasuredOnly(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	flags := []string{"-s", "64", "-I", "64", "-Q", "16", "-n", "200000"}
	run := func(truthFile string, args ...string) string {
		t.Helper()
		args = append(append(args, "--mode", "counters", "--workload", "--"), flags...)
		if truthFile != "" {
			args = append(args, "--json-out", truthFile)
		}
		cmd := exec.Command(bin, append([]string{"trace"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		return stdout.String()
	}

	truthFile := filepath.Join(t.TempDir(), "truth.json")
	out := run(truthFile, "--json")
	var tr traceOut
	if err := decodeReport(t, []byte(out[strings.Index(out, "\n{")+1:]), &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.QPs) != 1 || tr.QPs[0]["counters_only"] != true {
		t.Fatalf("QPs %v", tr.QPs)
	}
	q := tr.QPs[0]
	app := readTruth(t, truthFile)[0]["app"].(map[string]any)
	secs, wrs := app["seconds"].(float64), q["wrs"].(float64)
	if secs <= 0 || wrs != 200000 {
		t.Fatalf("workload: %v WRs in %v s", wrs, secs)
	}
	rates := q["rates"].(map[string]any)
	got, want := rates["post_wrs_per_s"].(float64), wrs/secs
	if got < want/2 || got > want*2 {
		t.Errorf("post_wrs_per_s %.0f, the workload's own %.0f (%v WRs in %.3f s): not within 2x", got, want, wrs, secs)
	}
	pcie := q["pcie"].(map[string]any)
	if b, ok := pcie["bytes_saved"]; ok && (b == nil || b.(float64) < 0) {
		t.Errorf("bytes_saved %v", b)
	}
	for k, v := range pcie {
		if f, ok := v.(float64); ok && (f < 0 || f > wrs) {
			t.Errorf("pcie.%s = %v: negative or more than the WRs", k, v)
		}
	}
	for k, want := range map[string]float64{"longest_unsignaled_run": 15, "outstanding": 0, "cqes_polled": 200000 / 16} {
		if v, ok := q[k].(float64); !ok || v != want {
			t.Errorf("qps[0].%s = %v, want %v (the kernel's send-queue model)", k, q[k], want)
		}
	}
	// the peak: 16 after each signaled WR's post, more while its CQE is
	// on its way; never past the depth
	if p, ok := q["peak_outstanding"].(float64); !ok || p < 16 || p > q["max_send_wr"].(float64) {
		t.Errorf("qps[0].peak_outstanding = %v, want 16 to the depth %v", q["peak_outstanding"], q["max_send_wr"])
	}
	for obj, keys := range map[string][]string{
		"": {"bf_writes", "wqebbs", "dma_reads_wqe", "signal_interval_typical",
			"signal_interval_longest", "occupancy"},
		"rates": {"cqes_per_s"},
		"pcie":  {"wqe_fetches_saved_blueflame", "wqe_fetches_saved_batching", "bytes_saved_pct", "transactions_saved_pct"},
	} {
		m := q
		if obj != "" {
			m = q[obj].(map[string]any)
		}
		for _, k := range keys {
			if v, ok := m[k]; ok && v != nil {
				t.Errorf("qps[0].%s %s = %v: not measured in counters mode, want it absent", obj, k, v)
			}
		}
	}

	text := run("")
	// the workload's own summary comes first and says what the simulated
	// HCA did; the trace's report begins at "sqscope:"
	text = text[strings.Index(text, "\nsqscope:")+1:]
	for _, bad := range []string{"(BlueFlame", "WQEBBs", "occupancy:", "signal interval", "CQEs polled"} {
		if strings.Contains(text, bad) {
			t.Errorf("text says %q, not measured in counters mode:\n%s", bad, text)
		}
	}
	if strings.Count(text, "counters mode:") != 1 {
		t.Errorf("text does not say once what counters mode cannot see:\n%s", text)
	}
	if !strings.Contains(text, "send queue (kept in the kernel): outstanding 0 of") {
		t.Errorf("text does not give the send queue the kernel kept:\n%s", text)
	}
}
