package probe

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
)

// A process whose main thread has exited (a zombie, state Z in
// /proc/PID/stat) while another thread runs has not ended; it ends with
// its last thread. Both ways of knowing (the pidfd, and /proc without
// pidfds) say so.
func TestMainThreadExitIsNotTheEnd(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc)")
	}
	bin := filepath.Join(t.TempDir(), "main_exit")
	if out, err := exec.Command(cc, "-O2", "-pthread", "-o", bin, "testdata/main_exit.c").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/main_exit.c: %v\n%s", err, out)
	}
	for _, how := range []string{"pidfd", "proc"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.Command(bin, "600")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			pid := cmd.Process.Pid
			w, err := watchProcess(pid)
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			if how == "proc" {
				w.close() // as where pidfd_open is missing
			}
			deadline := time.Now().Add(bpftest.Timeout(t, 5*time.Second))
			for {
				st, err := statState(fmt.Sprintf("/proc/%d/stat", pid))
				if err == nil && st == 'Z' {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the main thread did not exit (state %c, %v)", st, err)
				}
				time.Sleep(time.Millisecond)
			}
			if w.ended() || w.wait(100*time.Millisecond) {
				t.Fatal("the process is taken as ended while a thread runs")
			}
			if !w.wait(5 * time.Second) {
				t.Fatal("the end of the last thread was not seen")
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("exit: %v", err)
			}
			if !Ended(pid) {
				t.Fatal("a reaped process is not taken as ended")
			}
		})
	}
}
