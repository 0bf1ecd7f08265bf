package probe

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestDying(t *testing.T) {
	self, _ := procStart(os.Getpid())
	if dying(os.Getpid(), self) {
		t.Error("this process is called dying")
	}
	if !dying(os.Getpid(), self+1) {
		t.Error("a process of another start time is not called gone")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, _ := procStart(pid)
	if dying(pid, start) {
		t.Error("a sleeping process is called dying")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for !dying(pid, start) { // a zombie until waited for
		if time.Now().After(deadline) {
			t.Fatal("a killed process is never called dying")
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Wait()
	if !dying(pid, start) {
		t.Error("a reaped process is not called gone")
	}
}
