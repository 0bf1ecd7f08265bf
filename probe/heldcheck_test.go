package probe

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
)

func TestPendingMask(t *testing.T) {
	status := "Name:\tx\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000040000\nSigBlk:\tzz\n"
	for _, tc := range []struct {
		key  string
		want uint64
	}{
		{"ShdPnd:", stopMask},
		{"SigPnd:", 0},
		{"SigBlk:", 0}, // unreadable
		{"SigCgt:", 0}, // absent
	} {
		if got := pendingMask(status, tc.key); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.key, got, tc.want)
		}
	}
}

// TestHeldUntilNow stops and continues a child as a tracer and another
// process would: a stop continued by anyone is no longer a hold.
func TestHeldUntilNow(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	for _, tc := range []struct {
		name string
		sig  syscall.Signal // sent before the check, 0 for none
		want bool
	}{
		{"running, never stopped", 0, false},
		{"stopped", syscall.SIGSTOP, true},
		{"continued by another", syscall.SIGCONT, false},
	} {
		if tc.sig != 0 {
			if err := syscall.Kill(pid, tc.sig); err != nil {
				t.Fatal(err)
			}
		}
		if tc.sig == syscall.SIGSTOP && !waitGroupStopped(pid, 5*time.Second) {
			t.Fatalf("%s: child %d did not stop", tc.name, pid)
		}
		if tc.sig == syscall.SIGCONT {
			waitState(t, pid, 'S')
		}
		if got := heldUntilNow(pid, pid); got != tc.want {
			t.Errorf("%s: held %v, want %v", tc.name, got, tc.want)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if heldUntilNow(pid, pid) {
		t.Errorf("a reaped process counts as held: it may have run to its end")
	}
}

// waitState waits until pid's state is st.
func waitState(t *testing.T, pid int, st byte) {
	t.Helper()
	deadline := time.Now().Add(bpftest.Timeout(t, 5*time.Second))
	for {
		got, err := statState(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && got == st {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d in state %c, want %c", pid, got, st)
		}
		time.Sleep(time.Millisecond)
	}
}
