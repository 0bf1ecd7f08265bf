package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// uprobePMU exists when the kernel can create uprobe perf events (a
// variable for tests).
var uprobePMU = "/sys/bus/event_source/devices/uprobe"

// checkKernel fails when the kernel cannot place uprobes.
func checkKernel() error {
	if _, err := os.Stat(uprobePMU); err != nil {
		return fmt.Errorf("this kernel has no uprobes (%s is missing): sqscope needs a kernel built with CONFIG_UPROBE_EVENTS", uprobePMU)
	}
	return nil
}

// checkPrivileges fails early, with the fix, when this process may not
// load BPF programs and open perf events.
func checkPrivileges() error {
	if os.Geteuid() == 0 {
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil {
		has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
		if has(unix.CAP_SYS_ADMIN) || (has(unix.CAP_BPF) && has(unix.CAP_PERFMON)) {
			return nil
		}
	}
	return fmt.Errorf("loading BPF needs root or CAP_BPF and CAP_PERFMON: running as uid %d without them (try sudo)", os.Geteuid())
}

// checkPID fails when pid names no running process.
func checkPID(pid int) error {
	if pid < 0 {
		return fmt.Errorf("bad process id %d", pid)
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("process %d does not exist", pid)
	}
	if Ended(pid) {
		return fmt.Errorf("process %d has already exited", pid)
	}
	return nil
}

// statState is the state letter of a /proc/.../stat file (R, S, D, T, t,
// Z, X...).
func statState(path string) (byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("%s: unexpected format", path)
	}
	return b[i+2], nil
}

// waitGroupStopped waits until every thread of pid is stopped, or the
// timeout passes. A SIGSTOP stops the threads one by one as each next
// returns to user space; records they made on their way are in the ring
// buffer once all of them are stopped.
func waitGroupStopped(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if len(tasks) == 0 {
			return true // gone
		}
		all := true
		for _, p := range tasks {
			st, err := statState(p)
			if err == nil && st != 'T' && st != 't' && st != 'Z' && st != 'X' {
				all = false
				break
			}
		}
		if all {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// Preflight says why this process cannot trace (no uprobes in the kernel,
// no privilege), or returns nil.
func Preflight() error {
	if err := checkKernel(); err != nil {
		return err
	}
	return checkPrivileges()
}
