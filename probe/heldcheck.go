package probe

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/bpf"
)

// A SIGSTOP the programs send holds a process only until anyone sends it
// SIGCONT. The tracers of a host share their holds (holds.go), so another
// sqscope continues a process only once this one's probes are placed too;
// where they cannot be shared (no bpffs), another tracer of the host (a
// second sqscope with -a, or one following a tree the process is in) that
// stopped it for its own probes continues it once those are placed, maybe
// before this one's are, and so does anything else that sends SIGCONT.
// Nothing here can refuse that SIGCONT; heldUntilNow says whether it came,
// so that the calls lost to it are said, never silently missing.

// stopMask is SIGSTOP's bit in the pending masks of /proc/PID/status.
const stopMask = uint64(1) << (syscall.SIGSTOP - 1)

// heldUntilNow reports whether thread tid of pid, which stopped its
// process for a record, has run no code since: it is stopped, or its
// SIGSTOP is still pending (not yet acted on). A SIGCONT from anyone else
// clears a pending SIGSTOP and ends a stop, so false means the thread was
// continued before the probes its record revealed were placed (or the
// process is gone: a stopped one ends only when killed, one continued
// may have run to its end). A thread stopped again by someone else after
// running is not caught here (see ranWhileHeld).
func heldUntilNow(pid, tid int) bool {
	st, err := statState(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil || st == 'Z' || st == 'X' {
		return false
	}
	if st == 'T' || st == 't' {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return false
	}
	return pendingMask(string(b), "ShdPnd:")&stopMask != 0 || pendingMask(string(b), "SigPnd:")&stopMask != 0
}

// ranWhileHeld looks at a record before it is handled: one of a thread
// that stopped its process, read after the record that stopped it and
// before this tracer continued it, was made after that stop, so the
// process ran meanwhile (continued, then maybe stopped again, by someone
// else). Records are read in the order each thread submits them.
func (t *Tracer) ranWhileHeld(raw []byte) {
	if len(raw) < hdrSize {
		return // handle says why
	}
	var h bpf.VerbsSqHdr
	decodeInto(&h, raw[:hdrSize])
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.stopped[int(h.Pid)]; ok && s.tid == int(h.Tid) {
		t.heldBroken(int(h.Pid))
	}
}

// heldBroken says, once per process, that pid ran while held; t.mu held.
func (t *Tracer) heldBroken(pid int) {
	if t.contByOther[pid] {
		return
	}
	t.contByOther[pid] = true
	why := ""
	if t.holdsPrivate != nil {
		why = fmt.Sprintf(" (the holds of the tracers of this host are not shared: %v)", t.holdsPrivate)
	}
	t.warnings = append(t.warnings, fmt.Sprintf("process %d ran on (continued by another process: another tracer?) or ended while stopped until the probes its new QP or CQ revealed were placed: the calls it made meanwhile through those functions may be missing%s", pid, why))
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
