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
// savings are not wrapped, and what the mode does not measure is absent
// from the JSON and the text.
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
	for obj, keys := range map[string][]string{
		"": {"bf_writes", "wqebbs", "dma_reads_wqe", "longest_unsignaled_run", "signal_interval_typical",
			"signal_interval_longest", "occupancy", "peak_outstanding", "cqes_polled"},
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
	for _, bad := range []string{"longest unsignaled run", "(BlueFlame", "WQEBBs", "occupancy:", "signal interval", "CQEs polled"} {
		if strings.Contains(text, bad) {
			t.Errorf("text says %q, not measured in counters mode:\n%s", bad, text)
		}
	}
	if strings.Count(text, "counters mode:") != 1 {
		t.Errorf("text does not say once what counters mode cannot see:\n%s", text)
	}
}
