package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// Ctrl-C during the memory scan of a running process with a 1 GiB heap
// (seconds long) ends sqscope within a second, with status 130 and why,
// and leaves the target running.
func TestInterruptDuringScan(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	ready := filepath.Join(t.TempDir(), "ready")
	target := exec.Command(os.Args[0])
	target.Env = append(os.Environ(), "SQSCOPE_TEST_HEAP_MIB=1024", "SQSCOPE_TEST_READY="+ready)
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Process.Kill(); target.Wait() })
	waitFile(t, ready)

	tr := exec.Command(sqscopeBin(t), "trace", "-p", fmt.Sprint(target.Process.Pid), "-D", "60s")
	var out bytes.Buffer
	tr.Stdout, tr.Stderr = &out, &out
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
	// the scan is under way once sqscope has read 64 MiB
	waitFor(t, func() bool { return readChars(tr.Process.Pid) > 64<<20 })
	if err := tr.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	done := make(chan error, 1)
	go func() { done <- tr.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(bpftest.Timeout(t, time.Second)):
		t.Fatalf("sqscope still runs %v after SIGINT:\n%s", time.Since(sent), out.String())
	}
	took := time.Since(sent)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	switch {
	case code == 130 && strings.Contains(out.String(), "interrupted (interrupt signal received) while attaching: nothing was traced"):
		t.Logf("ended %v after SIGINT, during the scan", took.Round(time.Millisecond))
	case code == 0 && strings.Contains(out.String(), "trace ended: interrupt signal received"):
		// a fast host: the scan was over
		t.Logf("ended %v after SIGINT, after the scan", took.Round(time.Millisecond))
	default:
		t.Fatalf("exit %d after SIGINT:\n%s", code, out.String())
	}
	if st := procState(fmt.Sprintf("/proc/%d/stat", target.Process.Pid)); st == 'T' {
		t.Fatal("the target is left stopped")
	}
}

// readChars is what process pid has read so far (rchar of /proc/PID/io).
func readChars(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// heapTarget runs this test binary (which maps libibverbs, as sqscope
// does) as a verbs process with mib MiB of heap, all touched, that writes
// ready and then waits to be killed: a target whose memory scan is long.
func heapTarget(mib, ready string) {
	n, err := strconv.Atoi(mib)
	if err != nil || n <= 0 {
		fmt.Fprintln(os.Stderr, "SQSCOPE_TEST_HEAP_MIB:", mib)
		os.Exit(2)
	}
	heap := make([]byte, n<<20)
	for i := range len(heap) / 4096 {
		heap[i*4096] = byte(i)
	}
	os.WriteFile(ready, nil, 0o600)
	time.Sleep(10 * time.Minute)
	runtime.KeepAlive(heap)
}

// -p PID --wait on a process that later runs a verbs program (a shell
// that execs it) traces that program from its exec: exact, caps known.
func TestWaitFollowsExec(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin, dir := sqscopeBin(t), t.TempDir()
	truth, go_ := filepath.Join(dir, "truth.json"), filepath.Join(dir, "go")
	sh := exec.Command("sh", "-c", fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.01; done; exec %s workload -n 3000 -Q 4 -l 2 --sim-deterministic --json-out %s >/dev/null`, go_, bin, truth))
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	tr := exec.Command(bin, "trace", "-p", fmt.Sprint(sh.Process.Pid), "--wait", "--json")
	var stdout, stderr bytes.Buffer
	tr.Stdout, tr.Stderr = &stdout, &stderr
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
	// the shell execs once the probes are in place, when sqscope says
	// it waits for it
	waitFor(t, func() bool {
		return strings.Contains(stderr.String(), fmt.Sprintf("process %d uses no verbs library yet: its probes are in place, waiting", sh.Process.Pid))
	})
	if err := os.WriteFile(go_, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tr.Wait(); err != nil {
		t.Fatalf("trace -p --wait: %v\n%s", err, stderr.String())
	}
	var out traceOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("JSON: %v\n%s", err, stdout.String())
	}
	compareQPs(t, "the program the target execs", out.QPs, readTruth(t, truth))
}

// Ctrl-C or SIGTERM ends sqscope within a second whatever it is doing:
// loading and verifying its programs, scanning the target's memory,
// placing its probes, or tracing; the signal is sent at moments spread
// over the attach, as measured here. It says nothing was traced (exit
// 130) or prints what was (exit 0), and never leaves the target stopped.
func TestInterruptAnyPhase(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	ready := filepath.Join(t.TempDir(), "ready")
	wl := exec.Command(sqscopeBin(t), "workload", "-n", "100000000", "--rate", "1000", "--sim-deterministic", "--ready-file", ready)
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	waitFile(t, ready)
	pid := fmt.Sprint(wl.Process.Pid)
	// how long the attach takes here: the signals fall across it
	start := time.Now()
	if out, err := exec.Command(sqscopeBin(t), "trace", "-p", pid, "-D", "1ms").CombinedOutput(); err != nil {
		t.Fatalf("trace -p %s -D 1ms: %v\n%s", pid, err, out)
	}
	attach := time.Since(start)
	t.Logf("a trace of 1 ms took %v here", attach.Round(time.Millisecond))
	phases := map[string]int{}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, frac := range []float64{0, 0.05, 0.15, 0.3, 0.5, 0.8} {
			tr := exec.Command(sqscopeBin(t), "trace", "-p", pid, "-D", "60s")
			var out bytes.Buffer
			tr.Stdout, tr.Stderr = &out, &out
			if err := tr.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(frac * float64(attach)))
			tr.Process.Signal(sig)
			sent := time.Now()
			done := make(chan error, 1)
			go func() { done <- tr.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(bpftest.Timeout(t, time.Second)):
				tr.Process.Kill()
				<-done
				t.Fatalf("%v at %.0f%% of the attach: sqscope still ran %v after it:\n%s", sig, 100*frac, time.Since(sent), out.String())
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			switch {
			case code == 130 && strings.Contains(out.String(), "nothing was traced"):
				phases["attaching: nothing traced"]++
			case code == 0 && strings.Contains(out.String(), "trace ended:"):
				phases["tracing: the summary printed"]++
			case code == -1 && err != nil && out.Len() == 0:
				// killed by the signal before Go's handler was in place (the
				// program's start, tens of ms for a cold binary): nothing was
				// placed yet, nothing said
				phases["before the handler"]++
			default:
				t.Fatalf("%v at %.0f%% of the attach: exit %d (%v):\n%s", sig, 100*frac, code, err, out.String())
			}
			if st := procState(fmt.Sprintf("/proc/%d/stat", wl.Process.Pid)); st == 'T' {
				t.Fatalf("%v at %.0f%% of the attach: the target is left stopped", sig, 100*frac)
			}
		}
	}
	t.Logf("where the signals fell: %v", phases)
}
