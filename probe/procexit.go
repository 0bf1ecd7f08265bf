package probe

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A process ends when its last thread ends. Its main thread may end long
// before (pthread_exit) and wait as a zombie while the others go on, which
// /proc/PID/stat shows as state Z: that is not the end. The kernel says
// when it is through the process's pidfd, which becomes readable once the
// main thread is a zombie and no other thread is left; without pidfds,
// the threads listed in /proc/PID/task say it.

// procWatch watches one process for its end.
type procWatch struct {
	pid int
	fd  int // pidfd, or -1
}

// watchProcess starts watching pid. It fails only when pid names no
// process.
func watchProcess(pid int) (*procWatch, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		return &procWatch{pid: pid, fd: fd}, nil
	case errors.Is(err, unix.ESRCH):
		return nil, fmt.Errorf("process %d does not exist", pid)
	}
	return &procWatch{pid: pid, fd: -1}, nil // no pidfds here: /proc
}

// ended reports whether the process has ended: every thread has exited
// (the main thread may still be a zombie nobody has reaped).
func (w *procWatch) ended() bool { return w.wait(0) }

// wait waits up to timeout for the process to end, and reports whether it
// has.
func (w *procWatch) wait(timeout time.Duration) bool {
	if w.fd < 0 {
		deadline := time.Now().Add(timeout)
		for {
			if noThreadLeft(w.pid) {
				return true
			}
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	ms := int(timeout / time.Millisecond)
	for {
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents != 0
	}
}

func (w *procWatch) close() {
	if w != nil && w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// noThreadLeft reports whether no thread of pid is left but zombies (or
// pid is gone). A thread is a zombie, or gone, only after the
// sched_process_exit tracepoint ran for it.
func noThreadLeft(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, p := range tasks {
		if st, err := statState(p); err == nil && st != 'Z' && st != 'X' {
			return false
		}
	}
	return true
}

// leaderExited reports whether the main thread of process pid has exited
// (the process may live on in its other threads).
func leaderExited(pid int) bool {
	st, err := statState(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && (st == 'Z' || st == 'X')
}

// ProcDir is the /proc directory to read what process pid maps, runs and
// sees from: /proc/PID, or, once its main thread has exited (its memory,
// root and executable go with it from there), a live thread's
// /proc/PID/task/TID.
func ProcDir(pid int) string {
	dir := fmt.Sprintf("/proc/%d", pid)
	if !leaderExited(pid) {
		return dir
	}
	tasks, _ := filepath.Glob(dir + "/task/*/stat")
	for _, p := range tasks {
		if st, err := statState(p); err == nil && st != 'Z' && st != 'X' {
			return filepath.Dir(p)
		}
	}
	return dir
}

// endsWithin reports whether process pid ends (or has ended) within d.
func endsWithin(pid int, d time.Duration) bool {
	w, err := watchProcess(pid)
	if err != nil {
		return true
	}
	defer w.close()
	return w.wait(d)
}

// Ended reports whether process pid has ended by the kernel's word: all
// of its threads have exited. A process whose main thread has exited
// while others run has not.
func Ended(pid int) bool { return endsWithin(pid, 0) }
