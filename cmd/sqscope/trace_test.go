package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// sqscopeBin builds the real binary once per test run.
func sqscopeBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("SQSCOPE_BIN"); p != "" {
			// make test built it already; the nobody test needs it
			// readable by all, which a build into the tree is
			binPath = p
			return
		}
		binDir, binErr = os.MkdirTemp("", "sqscope-bin-")
		if binErr != nil {
			return
		}
		os.Chmod(binDir, 0o755) // the no-privilege test runs it as nobody
		binPath = filepath.Join(binDir, "sqscope")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = err
			binPath = string(out)
		}
	})
	if binErr != nil {
		t.Fatalf("building sqscope: %v\n%s", binErr, binPath)
	}
	return binPath
}

func TestMain(m *testing.M) {
	if mib := os.Getenv("SQSCOPE_TEST_HEAP_MIB"); mib != "" {
		heapTarget(mib, os.Getenv("SQSCOPE_TEST_READY"))
		return
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// The fields the tracer must rebuild exactly from the trace alone.
var exactFields = []string{
	"wrs", "inline", "signaled", "post_calls", "cqes_polled",
	"enomem_sq_full", "enomem_inline", "enomem_sge", "einval",
	"doorbells", "bf_writes", "dma_reads_wqe", "dma_reads_payload", "cqe_writes", "peak_outstanding",
	"max_send_wr", "max_inline_data", "dma_bytes_payload", "dma_writes_response", "dma_bytes_response",
	"not_rts", "post_recvs", "recv_cqes_polled",
}

type traceOut struct {
	Events uint64 `json:"events"`
	Lost   uint64 `json:"lost_events"`
	Self   struct {
		CPUSeconds        float64 `json:"cpu_seconds"`
		StartupCPUSeconds float64 `json:"startup_cpu_seconds"`
		WallSeconds       float64 `json:"wall_seconds"`
		Cores             float64 `json:"cores"`
		NSPerEvent        float64 `json:"cpu_ns_per_event"`
	} `json:"sqscope_cpu"`
	QPs       []map[string]any `json:"qps"`
	CQs       []map[string]any `json:"cqs"`
	SRQRecvs  float64          `json:"srq_recvs"`
	Diagnoses []struct {
		Kind  string  `json:"kind"`
		QPNum float64 `json:"qp_num"`
	} `json:"diagnoses"`
	Probes []struct {
		Func, Path, How, Err string
	} `json:"probes"`
}

// traceWorkload runs `sqscope trace --json --workload -- FLAGS` and returns
// the tracer's view and the workload's own ground truth.
func traceWorkload(t *testing.T, flags string) (traceOut, []map[string]any) {
	t.Helper()
	bin := sqscopeBin(t)
	truthFile := filepath.Join(t.TempDir(), "truth.json")
	args := append([]string{"trace", "--json", "--workload", "--"}, strings.Fields(flags)...)
	args = append(args, "--sim-deterministic", "--json-out", truthFile)
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sqscope %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	// stdout is the tracer's JSON alone (the workload's own summary went
	// to stderr)
	out := stdout.String()
	var tr traceOut
	if err := decodeReport(t, []byte(out), &tr); err != nil {
		t.Fatalf("trace JSON: %v\n%s", err, out)
	}
	// what sqscope itself used: some CPU to start, some after, at most
	// every core, and per event the CPU time after start-up over the events
	c := tr.Self
	running := c.CPUSeconds - c.StartupCPUSeconds
	if c.StartupCPUSeconds <= 0 || running <= 0 || c.WallSeconds <= 0 || c.Cores <= 0 || c.Cores > float64(runtime.NumCPU()) ||
		tr.Events == 0 || math.Abs(c.NSPerEvent-running*1e9/float64(tr.Events)) > 1e-6*c.NSPerEvent {
		t.Errorf("sqscope_cpu %+v with %d events", c, tr.Events)
	}
	return tr, readTruth(t, truthFile)
}

// readTruth reads the workload's --json-out ground truth.
func readTruth(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var truth []map[string]any
	if err := json.Unmarshal(b, &truth); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return truth
}

// compareQPs requires every exact field of every QP to equal the truth.
func compareQPs(t *testing.T, what string, got, truth []map[string]any) {
	t.Helper()
	for _, q := range truth {
		// a simulated receiving peer is a QP of the trace too
		if r, ok := q["receiver"].(map[string]any); ok {
			truth = append(truth, r)
		}
	}
	if len(got) != len(truth) {
		t.Fatalf("%s saw %d QPs, the workload had %d", what, len(got), len(truth))
	}
	byNum := map[float64]map[string]any{}
	for _, q := range got {
		byNum[q["qp_num"].(float64)] = q
	}
	for _, want := range truth {
		g, ok := byNum[want["qp_num"].(float64)]
		if !ok {
			t.Fatalf("%s: QP %v missing", what, want["qp_num"])
		}
		for _, f := range exactFields {
			if g[f] != want[f] {
				t.Errorf("%s: QP %#x %s = %v, ground truth %v", what, uint32(want["qp_num"].(float64)), f, g[f], want[f])
			}
		}
	}
}

// cqFields are a CQ's counts the trace must rebuild exactly.
var cqFields = []string{"polls", "empty_polls", "cqes"}

// compareCQs requires every send CQ the workload's QPs completed on (one
// per QP, or one a thread's QPs share) to be in the trace, its polls and
// completions equal to the truth, and the receives posted to the SRQs to
// equal theirs.
func compareCQs(t *testing.T, what string, out traceOut, truth []map[string]any) {
	t.Helper()
	byAddr := map[float64]map[string]any{}
	for _, c := range out.CQs {
		byAddr[c["cq"].(float64)] = c
	}
	seen := map[float64]bool{}
	var srqPosted float64
	srqs := map[float64]bool{}
	for _, q := range truth {
		if s, ok := q["srq"].(map[string]any); ok && !srqs[s["addr"].(float64)] {
			srqs[s["addr"].(float64)] = true
			srqPosted += s["posted"].(float64)
		}
		want, ok := q["cq"].(map[string]any)
		if !ok {
			t.Fatalf("%s: QP %v has no CQ ground truth", what, q["qp_num"])
		}
		addr := want["addr"].(float64)
		if seen[addr] {
			continue
		}
		seen[addr] = true
		got, ok := byAddr[addr]
		if !ok {
			t.Errorf("%s: CQ %#x missing", what, uint64(addr))
			continue
		}
		for _, f := range cqFields {
			if got[f] != want[f] {
				t.Errorf("%s: CQ %#x %s = %v, ground truth %v", what, uint64(addr), f, got[f], want[f])
			}
		}
	}
	if out.SRQRecvs != srqPosted {
		t.Errorf("%s: %v receives posted to SRQs, ground truth %v", what, out.SRQRecvs, srqPosted)
	}
}

// recordWorkload records the workload to a file and reads it back with
// `sqscope report --json`.
func recordWorkload(t *testing.T, flags string) (traceOut, []map[string]any) {
	t.Helper()
	bin := sqscopeBin(t)
	dir := t.TempDir()
	truthFile, rec := filepath.Join(dir, "truth.json"), filepath.Join(dir, "run.sqscope")
	args := append([]string{"record", "-o", rec, "--workload", "--"}, strings.Fields(flags)...)
	args = append(args, "--sim-deterministic", "--json-out", truthFile)
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("sqscope %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	st, err := os.Stat(rec)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("recording %v mode %v, want 0600", err, st.Mode())
	}
	var r traceOut
	reportInto(t, rec, &r)
	return r, readTruth(t, truthFile)
}

// reportInto reads the recording rec with `sqscope report --json` into v.
func reportInto(t *testing.T, rec string, v any) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(sqscopeBin(t), "report", "--json", rec)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.String())
	}
	if err := decodeReport(t, out, v); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, out)
	}
}

// everyOpcode is every --opcode the simulated HCA builds.
const everyOpcode = "send,send_imm,send_inv,write,write_imm,read,cmp_swp,fetch_add,atomic_write,local_inv,bind_mw"

// TestTraceMatchesGroundTruth is the decisive test: counts rebuilt from the
// trace alone equal the simulated HCA's own counters, with 0 lost events,
// and the data path was found through the ops table.
func TestTraceMatchesGroundTruth(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	// what a READ or atomic run must show besides the truth: the HCA
	// writes the responses into the local buffer and reads no payload
	type reads struct {
		opcodes                         map[string]any
		payloadReads, respWrites, respB float64
	}
	readBW := &reads{map[string]any{"RDMA_READ": 2000.0}, 0, 2000, 128000}
	atomics := &reads{map[string]any{"ATOMIC_CMP_AND_SWP": 2000.0, "ATOMIC_FETCH_AND_ADD": 2000.0}, 0, 4000, 32000}
	matrix := []struct {
		name, flags string
		reads       *reads
	}{
		{"inline Q16", "-s 64 -I 64 -Q 16 -n 20000", nil},
		{"no inline Q16", "-s 64 -Q 16 -n 20000", nil},
		{"inline Q1", "-s 64 -I 64 -Q 1 -n 5000", nil},
		{"inline Q64 depth 256", "-s 64 -I 64 -Q 64 -t 256 -n 20000", nil},
		{"post list 8", "-s 64 -I 64 -Q 16 -l 8 -n 20000", nil},
		{"wr api depth 64 list 8", "-s 64 -Q 16 -t 64 -l 8 --api wr -n 20000", nil},
		{"wr api inline", "-s 64 -I 64 -Q 16 --api wr -n 20000", nil},
		{"3 QPs", "-s 64 -I 64 -Q 16 --qps 3 -n 10000", nil},
		{"sig-all", "-s 64 -I 64 --sig-all -n 5000", nil},
		{"UD", "-s 64 -I 64 -Q 16 --connection UD -n 10000", nil},
		{"write list 8 Q64", "-s 256 --opcode write -l 8 -Q 64 -t 256 -n 20000", nil},
		{"never-signal", "-t 128 --fault never-signal -n 2000", nil},
		{"never-signal wr api", "-t 128 --fault never-signal --api wr -n 2000", nil},
		{"lazy-poll", "-t 128 -Q 16 --fault lazy-poll=300 -n 5000", nil},
		{"inline-too-big", "--fault inline-too-big -n 500", nil},
		{"too-many-sge", "--fault too-many-sge -n 500", nil},
		{"bad-opcode", "--fault bad-opcode -n 500", nil},
		// every opcode the simulated HCA builds, in turn, and extended
		// CQ polling (ibv_start_poll..ibv_end_poll)
		{"every opcode", "--opcode " + everyOpcode + " -s 64 -I 64 -Q 4 -l 4 -n 8800", nil},
		{"every opcode wr api", "--opcode " + everyOpcode + " -s 64 -I 64 -Q 4 -l 4 -n 8800 --api wr", nil},
		{"cq-ex", "-s 64 -I 64 -Q 16 -n 20000 --cq-ex", nil},
		{"cq-ex every opcode wr api", "--opcode " + everyOpcode + " -s 64 -Q 3 -l 2 -n 8800 --api wr --cq-ex --poll-batch 5", nil},
		{"cq-ex lazy-poll", "-t 128 -Q 16 --fault lazy-poll=300 -n 5000 --cq-ex", nil},
		// as ib_read_bw -s 64 -n 2000 posts, and through the wr API
		{"read", "--opcode read -s 64 -n 2000", readBW},
		{"read wr api", "--opcode read -s 64 -n 2000 --api wr", readBW},
		{"read list 8 wr api", "--opcode read -s 4096 -Q 16 -l 8 -t 256 -n 2000 --api wr", &reads{map[string]any{"RDMA_READ": 2000.0}, 0, 2000, 8192000}},
		{"atomics", "--opcode cmp_swp,fetch_add -s 64 -Q 16 -l 4 -n 4000", atomics},
		{"atomics wr api", "--opcode cmp_swp,fetch_add -Q 16 -l 4 -n 4000 --api wr", atomics},
		{"write and read", "--opcode write,read -s 64 -I 64 -Q 16 -n 4000", &reads{map[string]any{"RDMA_WRITE": 2000.0, "RDMA_READ": 2000.0}, 0, 2000, 128000}},
		{"post-before-rts", "--fault post-before-rts -n 500", nil},
		{"post-before-rts wr api", "--fault post-before-rts --api wr -n 500", nil},
		{"cq-overrun", "-t 128 -Q 1 --cq-depth 32 --fault cq-overrun -n 2000", nil},
		{"receiver", "-s 64 -Q 16 --receiver -n 5000", nil},
		{"rq-starve", "-t 64 -Q 8 --fault rq-starve -n 500", nil},
		// applications' shapes: QPs spread over threads, each thread
		// polling one CQ its QPs share, SENDs taking the receives of
		// one SRQ per thread
		{"8 QPs over 2 threads", "-s 64 -I 64 -Q 16 --qps 8 --threads 2 -n 4000", nil},
		{"shared CQ", "-s 64 -I 64 -Q 16 --qps 8 --threads 2 --shared-cq -n 4000", nil},
		{"shared CQ lists wr api", "-s 64 -Q 8 -l 16 --qps 6 --threads 2 --shared-cq --api wr -n 4000", nil},
		{"shared cq-ex", "-s 64 -I 64 -Q 16 --qps 8 --threads 2 --shared-cq --cq-ex -n 4000", nil},
		{"shared CQ receiver", "-s 64 -Q 16 --qps 8 --threads 2 --shared-cq --receiver -n 4000", nil},
		{"srq", "-s 64 -Q 16 --qps 8 --threads 2 --srq -n 4000", nil},
		{"shared CQ and srq lists", "-s 64 -I 64 -Q 16 -l 16 --qps 16 --threads 4 --shared-cq --srq -n 4000", nil},
	}
	for _, tc := range matrix {
		t.Run(tc.name, func(t *testing.T) {
			tr, truth := traceWorkload(t, tc.flags)
			if tr.Lost != 0 {
				t.Fatalf("%d events lost", tr.Lost)
			}
			compareQPs(t, "trace", tr.QPs, truth)
			compareCQs(t, "trace", tr, truth)
			rec, truth := recordWorkload(t, tc.flags)
			if rec.Lost != 0 {
				t.Fatalf("%d events lost in the recording", rec.Lost)
			}
			compareQPs(t, "report --json of a recording", rec.QPs, truth)
			compareCQs(t, "report --json of a recording", rec, truth)
			if r := tc.reads; r != nil {
				for _, out := range []traceOut{tr, rec} {
					q := out.QPs[0]
					if !reflect.DeepEqual(q["opcodes"], r.opcodes) || q["dma_reads_payload"] != r.payloadReads ||
						q["dma_writes_response"] != r.respWrites || q["dma_bytes_response"] != r.respB {
						t.Errorf("opcodes %v, payload reads %v, response writes %v (%v B); want %v, %v, %v (%v B)",
							q["opcodes"], q["dma_reads_payload"], q["dma_writes_response"], q["dma_bytes_response"],
							r.opcodes, r.payloadReads, r.respWrites, r.respB)
					}
				}
			}
			dataPath := 0
			for _, p := range tr.Probes {
				switch p.Func {
				case "post_send", "poll_cq", "wr_complete", "wr_start", "start_poll", "next_poll", "end_poll",
					"wr_atomic_cmp_swp", "wr_atomic_fetch_add", "wr_atomic_write", "wr_bind_mw", "wr_local_inv", "wr_send_inv":
					dataPath++
					if p.How != "ops-table" || p.Err != "" {
						t.Errorf("%s attached %q (%s), want through the ops table", p.Func, p.How, p.Err)
					}
				}
			}
			if dataPath == 0 {
				t.Fatalf("no data-path probe reported: %+v", tr.Probes)
			}
		})
	}
}

// Thousands of QPs driven by a few threads are traced whole: 1,024 QPs
// over 16 threads at full speed (each thread polling one CQ its QPs
// share), 0 events lost with the default ring, every QP and CQ equal to
// the simulated HCA's counts.
func TestTraceManyQPsLosesNothing(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	for _, list := range []string{"1", "16"} {
		t.Run("post list "+list, func(t *testing.T) {
			tr, truth := traceWorkload(t, "-s 64 -I 64 -Q 16 --qps 1024 --threads 16 --shared-cq -n 64 -l "+list)
			if tr.Lost != 0 {
				t.Fatalf("%d events lost", tr.Lost)
			}
			compareQPs(t, "trace", tr.QPs, truth)
			compareCQs(t, "trace", tr, truth)
		})
	}
	// counters mode keeps a total per QP and per CQ in the kernel: 4,096
	// QPs, each with its own CQ, all counted
	t.Run("counters mode 4096 QPs", func(t *testing.T) {
		truthFile := filepath.Join(t.TempDir(), "truth.json")
		cmd := exec.Command(sqscopeBin(t), "trace", "--json", "--mode", "counters", "--workload", "--",
			"-s", "64", "-I", "64", "-Q", "16", "--qps", "4096", "--threads", "16", "-n", "32", "--sim-deterministic", "--json-out", truthFile)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var tr traceOut
		if err := json.Unmarshal(stdout.Bytes(), &tr); err != nil {
			t.Fatal(err)
		}
		truth := readTruth(t, truthFile)
		byNum := map[float64]map[string]any{}
		for _, q := range tr.QPs {
			byNum[q["qp_num"].(float64)] = q
		}
		if tr.Lost != 0 || len(tr.QPs) != len(truth) {
			t.Fatalf("%d QPs (truth %d), %d lost", len(tr.QPs), len(truth), tr.Lost)
		}
		for _, want := range truth {
			got := byNum[want["qp_num"].(float64)]
			for _, f := range []string{"wrs", "post_calls", "inline", "signaled", "doorbells"} {
				if got == nil || got[f] != want[f] {
					t.Fatalf("QP %v %s: counters mode %v, truth %v", want["qp_num"], f, got, want[f])
				}
			}
		}
	})
}

// The traced workload's own results equal the untraced ones (deterministic
// simulated NIC), only slower.
func TestTracingDoesNotChangeResults(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	flags := strings.Fields("-s 64 -I 64 -Q 16 -l 4 -n 20000 --sim-deterministic --json")
	plain, err := exec.Command(bin, append([]string{"workload"}, flags...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	_, traced := traceWorkload(t, "-s 64 -I 64 -Q 16 -l 4 -n 20000")
	var untraced []map[string]any
	if err := json.Unmarshal(plain, &untraced); err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{"app": true, "qp_num": true, "cq": true}
	for k, v := range untraced[0] {
		if skip[k] {
			continue
		}
		if traced[0][k] != v {
			t.Errorf("%s: traced %v, untraced %v", k, traced[0][k], v)
		}
	}
	// the send CQ's counts too; its address is the run's own
	tcq, ucq := traced[0]["cq"].(map[string]any), untraced[0]["cq"].(map[string]any)
	delete(tcq, "addr")
	delete(ucq, "addr")
	if !reflect.DeepEqual(tcq, ucq) {
		t.Errorf("send CQ: traced %v, untraced %v", tcq, ucq)
	}
}

// A process traced with -p created its QPs before the attach: they are
// learned from their first post, caps unknown, and max_send_wr inferred
// from the first SQ-full ENOMEM.
func TestTraceRunningProcess(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := t.TempDir()
	ready, truthFile := filepath.Join(dir, "ready"), filepath.Join(dir, "truth.json")
	wl := exec.Command(bin, "workload", "-t", "128", "--fault", "never-signal", "-n", "2000",
		"--sim-deterministic", "--ready-file", ready, "--wait-signal", "--json-out", truthFile)
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	waitFile(t, ready)
	tr := exec.Command(bin, "trace", "--json", "-p", fmt.Sprint(wl.Process.Pid))
	var stdout, stderr bytes.Buffer
	tr.Stdout, tr.Stderr = &stdout, &stderr
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	// the tracer is attached once it has printed its warning about the late attach
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "was running before sqscope attached") })
	if err := wl.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := wl.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	if err := tr.Wait(); err != nil {
		t.Fatalf("trace: %v\n%s", err, stderr.String())
	}
	var out traceOut
	if err := decodeReport(t, stdout.Bytes(), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	truth := readTruth(t, truthFile)
	if len(out.QPs) != 1 || len(truth) != 1 {
		t.Fatalf("QPs: trace %d, truth %d", len(out.QPs), len(truth))
	}
	q, w := out.QPs[0], truth[0]
	for _, f := range []string{"wrs", "post_calls", "enomem_sq_full", "max_send_wr"} {
		if q[f] != w[f] {
			t.Errorf("%s: trace %v, truth %v", f, q[f], w[f])
		}
	}
	if q["caps_known"] != false || q["caps_inferred"] != true {
		t.Errorf("caps_known %v caps_inferred %v, want false true", q["caps_known"], q["caps_inferred"])
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	waitFor(t, func() bool { _, err := os.Stat(path); return err == nil })
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(bpftest.Timeout(t, 20*time.Second))
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Bad targets get one clear line and a non-zero status, never a panic.
func TestTraceErrors(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	tests := []struct {
		name   string
		args   []string
		nobody bool
		code   int
		want   string
	}{
		{"no target", []string{"trace"}, false, 2, "no target"},
		{"call times in counters mode", []string{"trace", "--mode", "counters", "--call-times", "-c", "true"}, false, 2, "--call-times needs --mode events"},
		{"ring not a power of two", []string{"trace", "--ring-mib", "3", "-c", "true"}, false, 2, "--ring-mib 3: want a power of two"},
		{"pid does not exist", []string{"trace", "-p", "999999"}, false, 1, "process 999999 does not exist"},
		{"never loads verbs", []string{"trace", "--verbs-timeout", "500ms", "-c", "sleep 3"}, false, 1, "has not loaded a verbs library after 500ms"},
		{"probe outside the library", []string{"trace", "--probe", "post_send=/proc/self/exe:0xffffffffff", "-c", "true"}, false, 1, "outside the executable segments"},
		{"malformed probe", []string{"trace", "--probe", "post_send", "-c", "true"}, false, 2, "want FUNC=LIB:0xOFFSET"},
		{"no privilege", []string{"trace", "-c", "true"}, true, 1, "CAP_BPF and CAP_PERFMON"},
		{"unknown command", []string{"trace", "-c", "/nonexistent/cmd"}, false, 1, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			if tc.nobody {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			msg := strings.TrimSpace(stderr.String())
			if code != tc.code || !strings.Contains(msg, tc.want) || strings.Contains(msg, "panic") || strings.Count(msg, "\n") > 0 {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line with %q", code, msg, tc.code, tc.want)
			}
		})
	}
}

// SIGINT during record stops the target, keeps its last events and leaves
// a complete file whose counts equal the workload's own.
func TestRecordInterrupted(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := t.TempDir()
	rec, truthFile := filepath.Join(dir, "run.sqscope"), filepath.Join(dir, "truth.json")
	cmd := exec.Command(bin, "record", "-o", rec, "--workload", "--", "-s", "64", "-I", "64", "-Q", "16",
		"-D", "30", "--rate", "20000", "--json-out", truthFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, func() bool { st, err := os.Stat(rec); return err == nil && st.Size() > 100000 })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record after SIGINT: %v\n%s", err, stderr.String())
	}
	var r struct {
		Recording struct {
			Complete bool `json:"complete"`
		} `json:"recording"`
		traceOut
	}
	reportInto(t, rec, &r)
	if !r.Recording.Complete {
		t.Fatal("recording not complete after SIGINT")
	}
	truth := readTruth(t, truthFile)
	for _, f := range []string{"wrs", "post_calls", "inline", "signaled", "cqes_polled"} {
		if len(r.QPs) != 1 || len(truth) != 1 || r.QPs[0][f] != truth[0][f] {
			t.Fatalf("%s: recording %v, truth %v", f, r.QPs, truth)
		}
	}
}

// The low-overhead mode keeps per-QP and per-CQ totals in the kernel; its
// totals equal the ground truth for what it counts, failed and partly
// accepted lists included.
func TestTraceCountersMode(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	tests := []struct{ name, flags string }{
		{"inline lists", "-s 64 -I 64 -Q 16 -l 4 -n 40000"},
		{"payload lists", "-s 256 -Q 8 -l 8 -n 16000"},
		{"SQ full mid-list", "-s 64 -I 64 -Q 16 -l 4 -t 64 -n 4000 --fault never-signal"},
		{"bad opcode", "-s 64 -I 64 -Q 16 -l 4 -n 8000 --fault bad-opcode"},
		{"too many SGEs", "-s 64 -Q 16 -l 4 -n 8000 --fault too-many-sge"},
		{"inline too big", "-s 64 -I 64 -Q 16 -l 4 -n 8000 --fault inline-too-big"},
		{"healthy, then bad opcodes", "-s 64 -I 64 -Q 16 -l 4 -D 0.3 --fault bad-opcode --fault-after 0.15"},
		{"every opcode, extended CQ", "--opcode " + everyOpcode + " -s 64 -I 64 -Q 4 -l 4 -n 8800 --api wr --cq-ex"},
		// a READ's or an atomic's SGEs receive the response: no payload
		{"read", "--opcode read -s 64 -n 2000"},
		{"read lists wr api", "--opcode read -s 64 -Q 16 -l 4 -n 4000 --api wr"},
		{"atomics and writes in lists", "--opcode cmp_swp,write,fetch_add -s 64 -Q 16 -l 4 -n 6000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			truthFile := filepath.Join(t.TempDir(), "truth.json")
			args := append([]string{"trace", "--json", "--mode", "counters", "--workload", "--"}, strings.Fields(tc.flags)...)
			cmd := exec.Command(bin, append(args, "--sim-deterministic", "--json-out", truthFile)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			out := stdout.String()
			var tr traceOut
			if err := decodeReport(t, []byte(out[strings.Index(out, "\n{")+1:]), &tr); err != nil {
				t.Fatal(err)
			}
			truth := readTruth(t, truthFile)
			if len(tr.QPs) != 1 || tr.QPs[0]["counters_only"] != true || tr.Lost != 0 {
				t.Fatalf("QPs %v, %d lost", tr.QPs, tr.Lost)
			}
			compareCounted(t, "counters mode", tr.QPs, truth)
		})
	}
}

// countedFields are the fields counters mode counts in the kernel, which
// must equal the ground truth.
var countedFields = []string{"wrs", "post_calls", "inline", "inline_bytes", "signaled", "doorbells", "einval",
	"dma_reads_payload", "dma_bytes_payload"}

// compareCounted requires what counters mode counts of every QP to equal
// the truth: its counted fields, ENOMEM (whose cause is for the events
// mode to tell), and its send CQ's polls.
func compareCounted(t *testing.T, what string, got, truth []map[string]any) {
	t.Helper()
	if len(got) != len(truth) {
		t.Fatalf("%s saw %d QPs, the workload had %d", what, len(got), len(truth))
	}
	byNum := map[float64]map[string]any{}
	for _, q := range got {
		byNum[q["qp_num"].(float64)] = q
	}
	for _, want := range truth {
		got, ok := byNum[want["qp_num"].(float64)]
		if !ok {
			t.Fatalf("%s: QP %v missing", what, want["qp_num"])
		}
		for _, f := range countedFields {
			if got[f] != want[f] {
				t.Errorf("%s: QP %v %s = %v, truth %v", what, want["qp_num"], f, got[f], want[f])
			}
		}
		// what needs each WR's opcode is not measured: absent
		for _, f := range []string{"opcodes", "dma_writes_response", "dma_bytes_response"} {
			if v, ok := got[f]; ok {
				t.Errorf("%s: QP %v %s = %v in counters mode: not measured there, want it absent", what, want["qp_num"], f, v)
			}
		}
		app := want["app"].(map[string]any)
		if got["enomem"] != app["enomem"] { // what the posts returned, whatever the cause
			t.Errorf("%s: QP %v ENOMEM %v, truth %v", what, want["qp_num"], got["enomem"], app["enomem"])
		}
		if got["polls"] != app["polls"] || got["empty_polls"] != app["empty_polls"] {
			t.Errorf("%s: QP %v polls %v/%v empty, truth %v/%v", what, want["qp_num"], got["polls"], got["empty_polls"], app["polls"], app["empty_polls"])
		}
	}
}
