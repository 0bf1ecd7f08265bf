package probe

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// The hold watchdog. A tracer that stops processes for its probes
// (holds.go) starts, from its own executable, a small process that
// outlives it: it holds the read end of a pipe whose write end only the
// tracer has, and the tracer's holds map and list of stopped processes.
// When the tracer dies, whatever killed it (SIGKILL, a crash, the OOM
// killer), its main thread is a zombie at once and the kernel closes the
// write end once its probes are released; from the first, the watchdog
// releases every hold of the dead tracer and continues each process it
// held that no other live tracer holds, until the second, and exits. While the tracer lives but does
// not run (stopped, hung) the watchdog releases its holds older than
// holdMax, so no process stays stopped past that bound for a tracer that
// does not read. It runs in its own process group (a terminal's Ctrl-C
// goes to the tracer, whose normal end closes the pipe) as
// "sqscope-hold".

// holdWatchEnv marks a process started as a hold watchdog; its value names
// the tracer: tgid:tracer:start.
const holdWatchEnv = "SQSCOPE_HOLD_WATCHDOG"

// watchdogExe is the executable a tracer starts its watchdog from, set by
// EnableHoldWatchdog; empty: no watchdog (holds are then released by the
// tracer, its periodic sweep, or the next sqscope to start).
var watchdogExe string

// EnableHoldWatchdog makes every tracer of this process start a hold
// watchdog from this executable (as it is running, even if its file has
// since been replaced), whose main must call RunHoldWatchdog first.
func EnableHoldWatchdog() {
	watchdogExe = "/proc/self/exe"
}

// watchdog is a tracer's side of its hold watchdog.
type watchdog struct {
	cmd   *exec.Cmd
	alive *os.File // the pipe's write end: closing it (or dying) ends the watchdog
	done  chan struct{}
}

// startWatchdog starts the hold watchdog of t, if this executable has one.
func (t *Tracer) startWatchdog() error {
	if watchdogExe == "" || t.objs.SqHoldsV1 == nil || t.opts.NoStop {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	holds, err := t.objs.SqHoldsV1.Clone()
	if err != nil {
		w.Close()
		return err
	}
	defer holds.Close()
	files := []*os.File{r, os.NewFile(uintptr(holds.FD()), "holds")}
	for _, m := range []*ebpf.Map{t.objs.StopsOff, t.objs.StoppedPids} {
		c, err := m.Clone()
		if err != nil {
			w.Close()
			return err
		}
		defer c.Close()
		files = append(files, os.NewFile(uintptr(c.FD()), "map"))
	}
	cmd := exec.Command(watchdogExe)
	cmd.Env = []string{fmt.Sprintf("%s=%d:%d:%d", holdWatchEnv, t.hold.tgid, t.hold.tracer, t.hold.start)}
	cmd.ExtraFiles = files // fd 3 to 6 in the watchdog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting the hold watchdog: %w", err)
	}
	wd := &watchdog{cmd: cmd, alive: w, done: make(chan struct{})}
	go func() { cmd.Wait(); close(wd.done) }()
	t.watchdog = wd
	return nil
}

// stopWatchdog ends the watchdog once the tracer has released its holds:
// it finds none left and exits.
func (t *Tracer) stopWatchdog() {
	wd := t.watchdog
	if wd == nil {
		return
	}
	t.watchdog = nil
	wd.alive.Close()
	select {
	case <-wd.done:
	case <-time.After(2 * time.Second):
		wd.cmd.Process.Kill()
		<-wd.done
	}
}

// RunHoldWatchdog runs this process as a tracer's hold watchdog when it
// was started as one, and then reports true (the caller exits with
// status 0); otherwise it returns false at once.
func RunHoldWatchdog() bool {
	v, ok := os.LookupEnv(holdWatchEnv)
	if !ok {
		return false
	}
	if err := runHoldWatchdog(v); err != nil {
		fmt.Fprintln(os.Stderr, "sqscope-hold:", err)
	}
	return true
}

func runHoldWatchdog(who string) error {
	f := strings.Split(who, ":")
	if len(f) != 3 {
		return fmt.Errorf("%s=%q: want TGID:TRACER:START", holdWatchEnv, who)
	}
	tgid, err1 := strconv.ParseUint(f[0], 10, 32)
	tracer, err2 := strconv.ParseUint(f[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("%s=%q: %w", holdWatchEnv, who, err)
	}
	if name, err := unix.BytePtrFromString("sqscope-hold"); err == nil {
		unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
	}
	holds, err := ebpf.NewMapFromFD(4)
	if err != nil {
		return fmt.Errorf("the holds map: %w", err)
	}
	stopsOff, err := ebpf.NewMapFromFD(5)
	if err != nil {
		return fmt.Errorf("the stop switch: %w", err)
	}
	stopped, err := ebpf.NewMapFromFD(6)
	if err != nil {
		return fmt.Errorf("the stopped processes: %w", err)
	}
	start, _ := strconv.ParseUint(f[2], 10, 64)
	mine := func(k bpf.VerbsSqHoldKey) bool { return holdOf(k, uint32(tgid), tracer) }
	fds := []unix.PollFd{{Fd: 3, Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 100)
		if err != nil && err != unix.EINTR {
			return err
		}
		if n > 0 && fds[0].Revents != 0 {
			// the tracer has closed its end: it ended, or it died and
			// the kernel has released all it held
			releaseDead(holds, stopped, mine)
			return nil
		}
		if dying(int(tgid), start) {
			// Killed: its probes are released after its threads have
			// exited, one RCU grace period each (seconds, for hundreds):
			// until then they stop no one, and what they stopped before
			// is continued, until its end of the pipe closes.
			stopsOff.Put(uint32(0), uint32(1))
			releaseDead(holds, stopped, mine)
			continue
		}
		// the tracer lives: its holds past holdMax go
		now := trace.MonotonicNS()
		for _, e := range holdEntries(holds) {
			if mine(e.k) && now > e.v.Ts && now-e.v.Ts > uint64(holdMax) {
				holds.Delete(e.k)
				if !heldByOther(holds, int(e.k.Pid)) {
					syscall.Kill(int(e.k.Pid), syscall.SIGCONT)
				}
			}
		}
	}
}

// dying says whether the process pid, started at start, is exiting or
// gone: its main thread past the start of its exit (PF_EXITING: a killed
// process's last thread may still be releasing its probes, in state D,
// for seconds), a zombie, or another process by now.
func dying(pid int, start uint64) bool {
	f, err := statFields(pid)
	if err != nil || f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return true
	}
	const pfExiting = 0x4
	flags, err1 := strconv.ParseUint(f[6], 10, 64) // field 9
	s, err2 := strconv.ParseUint(f[19], 10, 64)    // field 22
	return err1 != nil || err2 != nil || flags&pfExiting != 0 || (start != 0 && s != start)
}

// releaseDead releases every hold of a tracer that has ended, and
// continues what it stopped and no one else holds.
func releaseDead(holds, stopped *ebpf.Map, mine func(bpf.VerbsSqHoldKey) bool) {
	pids := map[uint32]bool{}
	for _, e := range holdEntries(holds) {
		if mine(e.k) {
			holds.Delete(e.k)
			pids[e.k.Pid] = true
		}
	}
	var pid uint32
	var v uint8
	it := stopped.Iterate()
	for it.Next(&pid, &v) {
		pids[pid] = true
	}
	for pid := range pids {
		if !heldByOther(holds, int(pid)) {
			syscall.Kill(int(pid), syscall.SIGCONT)
		}
	}
}
