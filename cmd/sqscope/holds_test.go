package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// A tracer stopped (SIGSTOP) and then killed (SIGKILL) while it holds a
// process it stopped for its probes does not leave that process stopped:
// its hold watchdog continues it, with no other sqscope needed, and then
// ends.
func TestKilledTracerContinuesWhatItHeld(t *testing.T) {
	bpftest.RequireHost(t, probe.Preflight)
	bin := sqscopeBin(t)
	tr := exec.Command(bin, "trace", "-a")
	var stderr bytes.Buffer
	tr.Stderr = &stderr
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "tracing every process that uses verbs") })
	wd := childNamed(t, tr.Process.Pid, "sqscope-hold")
	if err := tr.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	// the tracer's probes stop the workload at its first verbs call, and
	// the tracer, stopped, never reads why
	truth := filepath.Join(t.TempDir(), "truth.json")
	wl := exec.Command(bin, "workload", "-n", "2000", "--sim-deterministic", "--json-out", truth)
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	stat := fmt.Sprintf("/proc/%d/stat", wl.Process.Pid)
	waitFor(t, func() bool { return procState(stat) == 'T' })

	if err := tr.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for procState(stat) == 'T' {
		if time.Since(killed) > 2*time.Second {
			// Another sqscope of the host (a service's serve -a) may hold
			// it too, until its own probes are placed: then it is that
			// one's to continue, however slow this host is.
			others := otherHolders(t, wl.Process.Pid, tr.Process.Pid)
			if len(others) == 0 {
				t.Fatalf("the workload is still stopped %v after its tracer was killed, and no other sqscope holds it (holds: %v; the watchdog %d is %q, the tracer %q)",
					time.Since(killed), holdsOn(t, wl.Process.Pid), wd, procState(fmt.Sprintf("/proc/%d/stat", wd)), procState(fmt.Sprintf("/proc/%d/stat", tr.Process.Pid)))
			}
			if time.Since(killed) > bpftest.Timeout(t, 20*time.Second) {
				t.Fatalf("the workload is still stopped %v after its tracer was killed, held by sqscope %v", time.Since(killed), others)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the workload ran again %v after its tracer was killed", time.Since(killed).Round(time.Millisecond))
	if err := wl.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	// the watchdog has done its work and ended
	waitFor(t, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d/comm", wd))
		return err != nil || procComm(wd) != "sqscope-hold"
	})
}

// procState is the state letter of /proc/PID/stat, 0 when it cannot be read.
func procState(path string) byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

func procComm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// childNamed is the child of pid whose comm is comm.
func childNamed(t *testing.T, pid int, comm string) int {
	t.Helper()
	var found int
	waitFor(t, func() bool {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				if n, _ := strconv.Atoi(c); n > 0 && procComm(n) == comm {
					found = n
					return true
				}
			}
		}
		return false
	})
	return found
}

// holdsOn lists the holds on pid in the shared holds map every sqscope
// of the host loads.
func holdsOn(t *testing.T, pid int) []bpf.VerbsSqHoldKey {
	m, err := ebpf.LoadPinnedMap("/sys/fs/bpf/sqscope/"+bpf.VerbsMapSqHoldsV1, nil)
	if err != nil {
		t.Logf("the shared holds map: %v", err)
		return nil
	}
	defer m.Close()
	var out []bpf.VerbsSqHoldKey
	var k bpf.VerbsSqHoldKey
	var v bpf.VerbsSqHold
	for it := m.Iterate(); it.Next(&k, &v); {
		if k.Pid == uint32(pid) {
			out = append(out, k)
		}
	}
	return out
}

// otherHolders lists the live processes other than dead that hold pid.
func otherHolders(t *testing.T, pid, dead int) []uint32 {
	var out []uint32
	for _, k := range holdsOn(t, pid) {
		if k.Holder != uint32(dead) && procState(fmt.Sprintf("/proc/%d/stat", k.Holder)) != 0 {
			out = append(out, k.Holder)
		}
	}
	return out
}

// A command sqscope started ends when sqscope is killed (SIGKILL), unless
// --keep-target; run as another user (-u) too, though a change of user
// clears the parent-death signal.
func TestKilledTracerEndsItsCommand(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	for _, tc := range []struct {
		keep bool
		user string
	}{{false, ""}, {true, ""}, {false, "nobody"}} {
		keep := tc.keep
		t.Run(fmt.Sprintf("keep-target=%v,user=%s", keep, tc.user), func(t *testing.T) {
			ready := filepath.Join(worldDir(t), "ready")
			args := []string{"trace", "--workload", "--", "-D", "60", "--rate", "1000", "--ready-file", ready}
			if keep {
				args = append([]string{"trace", "--keep-target"}, args[1:]...)
			}
			if tc.user != "" {
				args = append([]string{"trace", "-u", tc.user}, args[1:]...)
			}
			tr := exec.Command(sqscopeBin(t), args...)
			if err := tr.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Process.Kill(); tr.Wait() })
			waitFile(t, ready)
			wl := childNamed(t, tr.Process.Pid, "sqscope")
			t.Cleanup(func() { syscall.Kill(wl, syscall.SIGKILL) })
			tr.Process.Kill()
			tr.Wait()
			stat := fmt.Sprintf("/proc/%d/stat", wl)
			ended := func() bool { st := procState(stat); return st == 0 || st == 'Z' }
			if keep {
				time.Sleep(500 * time.Millisecond)
				if ended() {
					t.Fatal("--keep-target: the workload ended with sqscope")
				}
				return
			}
			deadline := time.Now().Add(bpftest.Timeout(t, 2*time.Second))
			for !ended() {
				if time.Now().After(deadline) {
					t.Fatalf("the workload %d still runs after sqscope was killed", wl)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
