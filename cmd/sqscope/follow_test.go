package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// followOut is what the follow tests read of a trace's JSON.
type followOut struct {
	traceOut
	Processes []struct {
		PID      uint32 `json:"pid"`
		Parent   uint32 `json:"parent"`
		Comm     string `json:"comm"`
		Joined   string `json:"joined"`
		Exited   bool   `json:"exited"`
		ExitCode *int32 `json:"exit_code"`
	} `json:"processes"`
}

// qpsByPID groups a trace's QPs by their process.
func qpsByPID(qps []map[string]any) map[uint32][]map[string]any {
	out := map[uint32][]map[string]any{}
	for _, q := range qps {
		pid := uint32(q["pid"].(float64))
		out[pid] = append(out[pid], q)
	}
	return out
}

// The target of -c and -- is a process tree: every process it starts is
// traced, each QP labelled with its process, each count exact against the
// workload that made it; --no-follow keeps to the started command.
func TestFollowChildren(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	wl := bin + " workload --sim-deterministic"
	tests := []struct {
		name string
		// args, with {A} and {B} the workloads' truth files
		args []string
		// truths: the truth files whose QPs the trace must hold, exact,
		// each from a process of its own; their QP counts differ
		truths []string
		// others: truth files of workloads the trace must not see
		others   []string
		code     int
		children int  // processes forked by the target
		record   bool // also record it and read the recording back
		failing  bool // the target fails (record exits with its status)
	}{{
		name: "two workloads in the background of a shell",
		args: []string{"-c", "sh -c '" + wl + " --qps 2 -s 64 -I 64 -Q 16 -n 20000 --json-out {A} >/dev/null & " +
			wl + " -s 256 -Q 8 -t 64 -l 4 -n 6000 --json-out {B} >/dev/null & wait; exit 3'"},
		truths: []string{"{A}", "{B}"}, code: 3, children: 2, record: true, failing: true,
	}, {
		name:   "-- CMD ARGS",
		args:   append([]string{"--"}, strings.Fields(wl+" -s 64 -Q 16 -n 5000 --json-out {A}")...),
		truths: []string{"{A}"},
	}, {
		// the simulated HCA and the model both read it: BlueFlame off
		name:   "VAR=value before the command",
		args:   []string{"-c", "MLX5_SHUT_UP_BF=1 " + wl + " -s 64 -I 64 -Q 16 -n 5000 --json-out {A}"},
		truths: []string{"{A}"},
	}, {
		name:   "--no-follow sees only the started shell",
		args:   []string{"--no-follow", "-c", "sh -c '" + wl + " -s 64 -Q 16 -n 5000 --json-out {A} >/dev/null & wait'"},
		others: []string{"{A}"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := strings.NewReplacer("{A}", filepath.Join(dir, "a.json"), "{B}", filepath.Join(dir, "b.json"))
			var targs []string
			for _, a := range tc.args {
				targs = append(targs, files.Replace(a))
			}
			cmd := exec.Command(bin, append([]string{"trace", "--json"}, targs...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit %d, want the target's %d\n%s", code, tc.code, stderr.String())
			}
			var out followOut
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				t.Fatalf("trace JSON: %v\n%s", err, stdout.String())
			}
			checkFollowed(t, out, files, tc.truths, tc.others, tc.children)
			if !tc.record {
				return
			}
			// the same from a recording: the processes and labels are in it
			rec := filepath.Join(dir, "run.sqscope")
			if b, err := exec.Command(bin, append([]string{"record", "-o", rec}, targs...)...).CombinedOutput(); err != nil && !tc.failing {
				t.Fatalf("record: %v\n%s", err, b)
			}
			var fromRec followOut
			reportInto(t, rec, &fromRec)
			checkFollowed(t, fromRec, files, tc.truths, tc.others, tc.children)
		})
	}
}

// checkFollowed requires the QPs of each truth file, exact and labelled,
// in a process of their own, none of the others', and the children listed
// as exited with 0.
func checkFollowed(t *testing.T, out followOut, files *strings.Replacer, truths, others []string, wantChildren int) {
	t.Helper()
	if out.Lost != 0 {
		t.Fatalf("%d events lost", out.Lost)
	}
	groups := qpsByPID(out.QPs)
	if len(groups) != len(truths) {
		t.Fatalf("QPs of %d processes, want %d: %v", len(groups), len(truths), out.QPs)
	}
	for _, f := range truths {
		truth := readTruth(t, files.Replace(f))
		var got []map[string]any
		for _, g := range groups {
			if len(g) == len(truth) {
				got = g
			}
		}
		if got == nil {
			t.Fatalf("no process has the %d QP(s) of %s", len(truth), f)
		}
		for _, q := range got {
			if q["comm"] != "sqscope" {
				t.Errorf("QP %v of pid %v labelled %q, want sqscope", q["qp_num"], q["pid"], q["comm"])
			}
		}
		compareQPs(t, "trace of "+f, got, truth)
	}
	for _, f := range others {
		if truth := readTruth(t, files.Replace(f)); len(truth) == 0 || truth[0]["wrs"].(float64) == 0 {
			t.Fatalf("the untraced workload %s did nothing: %v", f, truth)
		}
	}
	children := 0
	for _, p := range out.Processes {
		if p.Joined == "fork" {
			children++
			if !p.Exited || p.ExitCode == nil || *p.ExitCode != 0 {
				t.Errorf("child %d: exited %v code %v, want exited with 0", p.PID, p.Exited, p.ExitCode)
			}
		}
	}
	if children != wantChildren {
		t.Errorf("%d forked processes listed, want %d: %+v", children, wantChildren, out.Processes)
	}
}

// -a traces every verbs process: one that was running before the trace
// began (its QPs found by symbol, its posts from then on counted) and ones
// started later, exact against their own results, one with a libibverbs
// file of its own; all stay listed after their exit.
func TestTraceAll(t *testing.T) {
	bpftest.RequireHost(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := t.TempDir()
	ready, before, after := filepath.Join(dir, "ready"), filepath.Join(dir, "before.json"), filepath.Join(dir, "after.json")
	w1 := exec.Command(bin, "workload", "-t", "128", "-Q", "16", "-n", "3000", "--sim-deterministic",
		"--ready-file", ready, "--wait-signal", "--json-out", before)
	if err := w1.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w1.Process.Kill(); w1.Wait() })
	waitFile(t, ready)

	tr := exec.Command(bin, "trace", "-a", "--json")
	var stdout, stderr bytes.Buffer
	tr.Stdout, tr.Stderr = &stdout, &stderr
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "tracing every process that uses verbs") })
	if !strings.Contains(stderr.String(), fmt.Sprint(w1.Process.Pid)) {
		t.Fatalf("the running workload %d is not among those found: %s", w1.Process.Pid, stderr.String())
	}
	if err := w1.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	w2 := exec.Command(bin, "workload", "--qps", "2", "-s", "128", "-Q", "8", "-l", "4", "-n", "8000", "--sim-deterministic", "--json-out", after)
	if out, err := w2.CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	// one more with its own copy of libibverbs (as in a container): the
	// copy is hooked when the process first shows itself
	copyDir, own := t.TempDir(), filepath.Join(dir, "own.json")
	copyLibibverbs(t, copyDir)
	w3 := exec.Command(bin, "workload", "-s", "64", "-Q", "4", "-n", "3000", "--sim-deterministic", "--json-out", own)
	w3.Env = append(os.Environ(), "LD_LIBRARY_PATH="+copyDir)
	if out, err := w3.CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	if err := w1.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	// both have exited: their last records are in the ring by now
	tr.Process.Signal(syscall.SIGINT)
	if err := tr.Wait(); err != nil {
		t.Fatalf("trace -a: %v\n%s", err, stderr.String())
	}
	var out followOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("trace JSON: %v\n%s", err, stdout.String())
	}
	if out.Lost != 0 {
		t.Fatalf("%d events lost", out.Lost)
	}
	// every process ran to its end, one running before: nothing to warn of
	noWarnings(t, stderr.String())
	groups := qpsByPID(out.QPs)
	compareQPs(t, "the workload started after -a", groups[uint32(w2.Process.Pid)], readTruth(t, after))
	compareQPs(t, "the workload with its own libibverbs", groups[uint32(w3.Process.Pid)], readTruth(t, own))
	hooked := false
	for _, p := range out.Probes {
		hooked = hooked || (p.Func == "create_qp" && p.Path == filepath.Join(copyDir, "libibverbs.so.1") && p.Err == "")
	}
	if !hooked {
		t.Errorf("the copy of libibverbs in %s was not hooked: %+v", copyDir, out.Probes)
	}
	// the one running before: its QP was made before the attach, so its
	// caps are not known, but every post came after
	truth, got := readTruth(t, before), groups[uint32(w1.Process.Pid)]
	if len(got) != 1 || len(truth) != 1 {
		t.Fatalf("QPs of the workload running before -a: trace %v, truth %d", got, len(truth))
	}
	for _, f := range []string{"wrs", "post_calls", "signaled"} {
		if got[0][f] != truth[0][f] {
			t.Errorf("running workload: %s = %v, truth %v", f, got[0][f], truth[0][f])
		}
	}
	joined := map[uint32]string{}
	for _, p := range out.Processes {
		if p.Exited && p.ExitCode != nil && *p.ExitCode == 0 && p.Comm == "sqscope" {
			joined[p.PID] = p.Joined
		}
	}
	// one started later joins by its first verbs call, or, when the
	// periodic look in /proc for processes mapping a verbs library came
	// between its start and that call (a busy host), as found then: its
	// QPs are exact either way (above)
	later := func(pid int) bool { j := joined[uint32(pid)]; return j == "first" || j == "found" }
	if joined[uint32(w1.Process.Pid)] != "running" || !later(w2.Process.Pid) || !later(w3.Process.Pid) {
		t.Errorf("processes %+v: want %d running, %d and %d first (or found), all exited with 0", out.Processes, w1.Process.Pid, w2.Process.Pid, w3.Process.Pid)
	}
}

// copyLibibverbs copies the installed libibverbs.so.1 into dir.
func copyLibibverbs(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"} {
		b, err := os.ReadFile(filepath.Join(d, "libibverbs.so.1"))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "libibverbs.so.1"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("no libibverbs.so.1 installed to copy")
}

// top with no target watches the whole host, as -a.
func TestTopWithoutTarget(t *testing.T) {
	bpftest.RequireHost(t, probe.Preflight)
	code, stdout, stderr := runBin(t, 0, "", "top", "--no-tui", "-i", "0.5", "-D", "1s")
	if code != 0 || !strings.Contains(stderr, "tracing every process that uses verbs") || !strings.Contains(stdout, "trace ended: the time limit was reached") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// Bad targets of the new forms: one clear line, non-zero status.
func TestFollowBadInput(t *testing.T) {
	bin := sqscopeBin(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"assignments only", []string{"trace", "-c", "VAR=1"}, 1, `"VAR=1": only variable assignments, no command to run`},
		{"assignments only after --", []string{"trace", "--", "A=1", "B=2"}, 1, "only variable assignments"},
		{"-a with -p", []string{"trace", "-a", "-p", "1"}, 2, "give only one of -p, -c, -a and --workload"},
		{"-a with a command", []string{"record", "-o", "/dev/null", "-a", "--", "true"}, 2, "unexpected arguments"},
		{"--no-follow with -a", []string{"top", "-a", "--no-follow"}, 2, "--no-follow: only a command sqscope starts is followed"},
		{"--no-follow with -p", []string{"trace", "-p", "1", "--no-follow"}, 2, "--no-follow"},
		{"-c and --", []string{"trace", "-c", "true", "--", "true"}, 2, "unexpected arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(bin, tc.args...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			msg := strings.TrimSpace(stderr.String())
			if code != tc.code || !strings.Contains(msg, tc.want) || strings.Contains(msg, "panic") || strings.Contains(msg, "\n") {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line with %q", code, msg, tc.code, tc.want)
			}
		})
	}
}
