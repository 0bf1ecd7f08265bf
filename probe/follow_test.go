package probe

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
)

func TestCommString(t *testing.T) {
	c := func(s string) []int8 {
		out := make([]int8, 16)
		for i := range len(s) {
			out[i] = int8(s[i])
		}
		return out
	}
	for _, tc := range []struct {
		in   []int8
		want string
	}{
		{c(""), ""},
		{c("sh"), "sh"},
		{c("ib_write_bw"), "ib_write_bw"},
		{c("fifteen-chars-x"), "fifteen-chars-x"},
		{append(c("a"), 'b'), "a"}, // stops at the first NUL
	} {
		if got := commString(tc.in); got != tc.want {
			t.Errorf("commString(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A process a program stopped whose record the tracer never read (it was
// stopped between the last read and the probes' removal) is continued
// when the tracer closes.
func TestCloseContinuesEveryStoppedProcess(t *testing.T) {
	requireBPF(t)
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	pid := sleeper.Process.Pid
	tr, err := Open(Options{All: true, NoStop: true}) // stops no one of its own
	if err != nil {
		t.Fatal(err)
	}
	// as stop_self does in the kernel
	syscall.Kill(pid, syscall.SIGSTOP)
	if !waitGroupStopped(pid, 5*time.Second) {
		t.Fatal("the process did not stop")
	}
	if err := tr.objs.StoppedPids.Put(uint32(pid), uint8(1)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(bpftest.Timeout(t, 5*time.Second))
	for {
		st, err := statState(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		if st != 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process is still stopped after Close")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// After its exec a process's libibverbs is not mapped yet: it is found
// where its loader will look, its LD_LIBRARY_PATH first.
func TestLibibverbsOfFollowsLDLibraryPath(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libibverbs.so.1")
	if err := os.WriteFile(lib, []byte("not loaded, only found"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"LD_LIBRARY_PATH=/nonexistent:" + dir}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Start returns once the child exists, not once it has exec'd: until
	// then its environ is the test's own. The tracer asks after the exec.
	waitExeced(t, cmd.Process.Pid, "sleep")
	path, open := libibverbsOf(cmd.Process.Pid)
	if path != lib || open != ProcDir(cmd.Process.Pid)+"/root"+lib {
		t.Errorf("libibverbsOf = %q, %q; want %q", path, open, lib)
	}
}

// waitExeced waits until pid's comm is comm and its environment is
// there, that is until its exec is done: the kernel names the new image
// before it lays out its stack, so for a while its environ reads empty
// (on a busy host long enough to be read).
func waitExeced(t *testing.T, pid int, comm string) {
	t.Helper()
	deadline := time.Now().Add(bpftest.Timeout(t, 10*time.Second))
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && strings.TrimSpace(string(b)) == comm && len(env) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not exec %s within 10 s", pid, comm)
		}
		time.Sleep(time.Millisecond)
	}
}
