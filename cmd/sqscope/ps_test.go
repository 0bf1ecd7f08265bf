package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ps lists a running verbs process: its command name, that it runs the
// simulated HCA, how trace -p would find its data path (by symbol), and
// its QPs as the kernel lists them, or why it does not (no RDMA in this
// kernel, or the simulated HCA's QPs, which no kernel lists); the text
// says the same; an argument is a usage error.
func TestPS(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	wl := exec.Command(sqscopeBin(t), "workload", "-n", "1000", "--sim-deterministic", "--ready-file", ready, "--wait-signal")
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	waitFile(t, ready)
	out, err := exec.Command(sqscopeBin(t), "ps", "--json").Output()
	if err != nil {
		t.Fatalf("ps --json: %v", err)
	}
	var procs []struct {
		PID       int               `json:"pid"`
		Comm      string            `json:"comm"`
		Simulated bool              `json:"simulated_hca"`
		QPs       []map[string]any  `json:"qps"`
		QPsAbsent string            `json:"qps_absent"`
		DataPath  map[string]string `json:"data_path"`
		Trace     string            `json:"trace"`
	}
	if err := json.Unmarshal(out, &procs); err != nil {
		t.Fatalf("ps --json: %v\n%s", err, out)
	}
	comm := filepath.Base(sqscopeBin(t)) // the kernel keeps 15 characters of it
	comm = comm[:min(len(comm), 15)]
	found := false
	for _, p := range procs {
		if p.PID != wl.Process.Pid {
			continue
		}
		found = true
		if p.Comm != comm || !p.Simulated || p.DataPath["post_send"] != "symbol (simulated HCA)" || p.DataPath["poll_cq"] != "symbol (simulated HCA)" ||
			!strings.HasPrefix(p.Trace, fmt.Sprintf("trace -p %d: ", p.PID)) {
			t.Errorf("the workload as ps lists it: %+v", p)
		}
		if len(p.QPs) != 0 || p.QPsAbsent == "" {
			t.Errorf("the simulated HCA's QPs: %v (absent: %q); want none from the kernel, and why", p.QPs, p.QPsAbsent)
		}
	}
	if !found {
		t.Fatalf("ps does not list the running workload %d:\n%s", wl.Process.Pid, out)
	}
	text, err := exec.Command(sqscopeBin(t), "ps").Output()
	if err != nil || !strings.Contains(string(text), fmt.Sprintf("pid %d (%s):", wl.Process.Pid, comm)) || !strings.Contains(string(text), "simulated HCA") {
		t.Errorf("ps: %v\n%s", err, text)
	}
	// -v: the memory scan a trace -p would run finds the workload's
	// context and its QP, in its state
	out, err = exec.Command(sqscopeBin(t), "ps", "-v", "--json").Output()
	var scanned []struct {
		PID  int `json:"pid"`
		Scan *struct {
			BytesRead int64    `json:"bytes_read"`
			Contexts  []string `json:"contexts"`
			QPs       []struct {
				QPNum uint32 `json:"qpn"`
				Type  string `json:"type"`
				State string `json:"state"`
			} `json:"qps"`
		} `json:"scan"`
	}
	if err != nil || json.Unmarshal(out, &scanned) != nil {
		t.Fatalf("ps -v --json: %v\n%s", err, out)
	}
	for _, p := range scanned {
		if p.PID != wl.Process.Pid {
			continue
		}
		if sc := p.Scan; sc == nil || sc.BytesRead == 0 || len(sc.Contexts) != 1 || len(sc.QPs) != 1 ||
			sc.QPs[0].QPNum != 0x1c0 || sc.QPs[0].Type != "RC" || sc.QPs[0].State != "RTS" {
			t.Errorf("ps -v: the workload's scan %+v; want its context and QP 0x1c0 RC RTS", sc)
		}
	}
	if text, err := exec.Command(sqscopeBin(t), "ps", "-v").Output(); err != nil || !strings.Contains(string(text), "    QP 0x1c0 (448) RC RTS\n") {
		t.Errorf("ps -v: %v\n%s", err, text)
	}
	if _, _, code, err := sqscope("ps", "1234"); code != 2 || err == nil || !strings.Contains(err.Error(), "ps: takes no arguments") {
		t.Errorf("ps 1234: exit %d, %v; want 2", code, err)
	}
}
