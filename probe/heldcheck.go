package probe

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// A SIGSTOP the programs send holds a process only until anyone sends it
// SIGCONT. The tracers of a host share their holds (holds.go), so another
// sqscope continues a process only once this one's probes are placed too;
// where they cannot be shared (no bpffs), another tracer of the host (a
// second sqscope with -a, or one following a tree the process is in) that
// stopped it for its own probes continues it once those are placed, maybe
// before this one's are, and so does anything else that sends SIGCONT.
// Nothing here can refuse that SIGCONT; what the trace shows of it is
// said, never silently missing, and only what it shows: a process that
// ended while held missed nothing, and one this tracer's own bound on a
// hold continued is not said to be another's doing.

// stopMask is SIGSTOP's bit in the pending masks of /proc/PID/status.
const stopMask = uint64(1) << (syscall.SIGSTOP - 1)

// threadHold is what became of a thread that stopped its process.
type threadHold int

const (
	threadHeld    threadHold = iota // stopped, or its SIGSTOP still pending
	threadEnded                     // gone or a zombie: its process ended
	threadRunning                   // continued before it was released
)

// heldThread says whether thread tid of pid, which stopped its process
// for a record, has run no code since: it is stopped, or its SIGSTOP is
// still pending (not yet acted on). A SIGCONT from anyone else clears a
// pending SIGSTOP and ends a stop, so threadRunning means the thread was
// continued before the probes its record revealed were placed. A stopped
// thread ends only when its process is killed; threadEnded does not tell
// that from a process that ran on to its end after a continue. A thread
// stopped again by someone else after running is not caught here (see
// ranWhileHeld).
func heldThread(pid, tid int) threadHold {
	st, err := statState(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil || st == 'Z' || st == 'X' {
		return threadEnded
	}
	if st == 'T' || st == 't' {
		return threadHeld
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return threadEnded
	}
	if pendingMask(string(b), "ShdPnd:")&stopMask != 0 || pendingMask(string(b), "SigPnd:")&stopMask != 0 {
		return threadHeld
	}
	return threadRunning
}

// ranWhileHeld looks at a record before it is handled: one of a thread
// that stopped its process, read after the record that stopped it and
// before this tracer continued it, was made after that stop, so the
// process ran meanwhile (continued, then maybe stopped again, by someone
// else). Records are read in the order each thread reserved them, and two
// kinds prove nothing ran: a process's join (the kernel's fork and exec
// tracepoints, or made in the same probe as the stop, after its record)
// and its exit (a process killed while stopped ends without running).
func (t *Tracer) ranWhileHeld(raw []byte) {
	if len(raw) < hdrSize {
		return // handle says why
	}
	var h bpf.VerbsSqHdr
	decodeInto(&h, raw[:hdrSize])
	t.mu.Lock()
	defer t.mu.Unlock()
	pid := int(h.Pid)
	s, ok := t.stopped[pid]
	switch {
	case !ok:
	case h.Kind == uint8(bpf.VerbsSqRecKindSQ_REC_EXIT):
		// any thread's: the last one of the process sends it
		if len(raw) >= exitRecSize {
			var r bpf.VerbsSqExitRec
			decodeInto(&r, raw[:exitRecSize])
			s.exitSig = int(r.ExitCode & 0x7f)
		}
		s.exited = true
		t.stopped[pid] = s
	case h.Kind == uint8(bpf.VerbsSqRecKindSQ_REC_PROC) || s.tid != int(h.Tid) || s.late:
	default:
		t.heldBroken(pid, heldFacts{ran: true, holdGone: !t.holdIn(pid), heldNS: since(s.stopNS)})
	}
}

// heldFacts is what the trace shows of a hold that did not last until
// this tracer released it.
type heldFacts struct {
	ran     bool // a record of the thread it stopped was made after the stop
	ended   bool // that thread is gone: its process ended
	exitSig int  // the signal that killed the process, from its exit record (0: none or unknown)
	// holdGone: this tracer's hold was no longer in the holds map, which
	// only a release past holdMax takes from it (the hold watchdog's, a
	// sweep's, another tracer's check); heldNS is how long since the stop
	holdGone bool
	heldNS   uint64
	// private says why the holds are not shared with the other tracers
	// of the host (nil: they are)
	private error
}

// heldWarning is what is said of a hold that did not last until this
// tracer released it, by what the trace shows; "" when nothing is to be
// said: the process ended before it ran again (it called nothing that
// could be missed) by an exit of its own (another thread's exit while the
// stop was pending) or for a reason not known.
func heldWarning(pid int, f heldFacts) string {
	const missing = "the calls it made meanwhile through the functions its new QP or CQ revealed may be missing"
	switch {
	case f.ended && !f.ran:
		if f.exitSig == 0 {
			return ""
		}
		return fmt.Sprintf("process %d ended while stopped for its probes (killed by signal %d, %v): it ran no code meanwhile, so nothing it called was missed",
			pid, f.exitSig, syscall.Signal(f.exitSig))
	case f.holdGone || f.heldNS >= uint64(holdMax):
		return fmt.Sprintf("process %d was continued while stopped for its probes once held for the %v a hold may last (by the hold watchdog sqscope-hold or a sweep of the holds: this tracer took longer than that to place them): %s",
			pid, holdMax, missing)
	case f.private != nil:
		return fmt.Sprintf("process %d was continued while stopped for its probes by a SIGCONT from another process (another tracer? the holds of the tracers of this host are not shared: %v): %s",
			pid, f.private, missing)
	}
	return fmt.Sprintf("process %d was continued while stopped for its probes by a SIGCONT from another process (not a tracer sharing this one's holds: a debugger, a shell's job control or a supervisor?): %s",
		pid, missing)
}

// heldBroken says, once per process, what became of a hold that did not
// last; t.mu held.
func (t *Tracer) heldBroken(pid int, f heldFacts) {
	if t.contByOther[pid] {
		return
	}
	f.private = t.holdsPrivate
	w := heldWarning(pid, f)
	if w == "" {
		return
	}
	t.contByOther[pid] = true
	t.warnings = append(t.warnings, w)
}

// checkHold says, when this tracer is about to release pid, what became of
// its hold if it did not last; t.mu held.
func (t *Tracer) checkHold(pid int, s stopHold) {
	if s.late {
		return // continued by this tracer, and said so when its record was read
	}
	switch heldThread(pid, s.tid) {
	case threadEnded:
		t.heldBroken(pid, heldFacts{ended: true, exitSig: s.exitSig})
	case threadRunning:
		t.heldBroken(pid, heldFacts{holdGone: !t.holdIn(pid), heldNS: since(s.stopNS)})
	}
}

// since is the time from ns (trace.MonotonicNS) to now, 0 for a time
// not yet come.
func since(ns uint64) uint64 {
	now := trace.MonotonicNS()
	return now - min(ns, now)
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
// the thread that stopped it and when (the record's time). late: this
// tracer continued the process after the record was made (said when it
// was read), so what became of the stop is its own doing; exited and
// exitSig: its exit record was read while it was held.
type stopHold struct {
	since   time.Time
	grouped time.Time // when all its threads were seen stopped
	tid     int
	stopNS  uint64
	late    bool
	exited  bool
	exitSig int
}
