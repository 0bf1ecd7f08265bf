package probe

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A SIGSTOP the programs send holds a process only until anyone sends it
// SIGCONT: another tracer of the host (a second sqscope with -a, or one
// following a tree the process is in) that stopped it for its own probes
// continues it once those are placed, maybe before this one's are. Nothing
// here can refuse that SIGCONT; heldUntilNow says whether it came, so that
// the calls lost to it are said, never silently missing.

// stopMask is SIGSTOP's bit in the pending masks of /proc/PID/status.
const stopMask = uint64(1) << (syscall.SIGSTOP - 1)

// heldUntilNow reports whether thread tid of pid, which stopped its
// process for a record, has run no code since: it is stopped, its SIGSTOP
// is still pending (not yet acted on), or it is gone. A SIGCONT from
// anyone else clears a pending SIGSTOP and ends a stop, so false means the
// thread was continued before the probes its record revealed were placed.
// A thread stopped again by someone else after running is not caught.
func heldUntilNow(pid, tid int) bool {
	st, err := statState(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil || st == 'T' || st == 't' || st == 'Z' || st == 'X' {
		return true // gone (nothing to lose), or stopped
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return true // gone between the two reads
	}
	return pendingMask(string(b), "ShdPnd:")&stopMask != 0 || pendingMask(string(b), "SigPnd:")&stopMask != 0
}

// pendingMask is the hexadecimal signal mask on the status line named key
// (0 when absent or unreadable).
func pendingMask(status, key string) uint64 {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0
			}
			return m
		}
	}
	return 0
}

// stopHold is a process stopped for a record: since the record was handled,
// and the thread that stopped it.
type stopHold struct {
	since time.Time
	tid   int
}
