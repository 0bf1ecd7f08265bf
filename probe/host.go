package probe

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sqscope/sqscope/trace"
)

// Host-wide tracing (Options.All): every process that maps libibverbs, or
// runs a binary with the simulated HCA, when tracing begins, and every one
// that starts later. Probes go on the verbs libraries and those binaries
// only, with no process filter: a process that does not use verbs never
// hits one.

// verbsProcesses lists the processes, other than this one and those in
// skip, that map libibverbs or run a binary with the simulated HCA, by
// pid. simExe caches, by executable, whether it has the simulated HCA.
func verbsProcesses(skip map[int]bool, simExe map[fileID]bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || skip[pid] {
			continue
		}
		if lib, _ := libibverbsMapped(pid); lib != "" {
			out = append(out, pid)
			continue
		}
		exe := ProcDir(pid) + "/exe"
		id, err := fileIDOf(exe)
		if err != nil {
			continue // a kernel thread, or gone
		}
		has, seen := simExe[id]
		if !seen {
			_, err := ResolveSymbol(exe, "sqsim_create_qp")
			has = err == nil
			simExe[id] = has
		}
		if has {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// libibverbsMapped is the libibverbs process pid maps, if any.
func libibverbsMapped(pid int) (path, open string) {
	maps, err := readMaps(pid)
	if err != nil {
		return "", ""
	}
	for _, m := range maps {
		if isLibibverbs(m.Path) {
			return m.Path, ProcDir(pid) + "/root" + m.Path
		}
	}
	return "", ""
}

// attachHostRunning hooks every verbs process running now: the discovery
// probes on its files, for QPs it creates from now on, and the data path
// of the QPs it has, by symbol and through the memory scan (scanHost). Each is
// announced as a trace.Proc ("running"). It returns how many it found.
func (t *Tracer) attachHostRunning() int {
	pids := t.hookFound(trace.ProcRunning)
	t.running = pids
	return len(pids)
}

// rescanInterval is how often a host-wide trace looks in /proc for verbs
// processes its probes have not seen: one that maps a libibverbs file not
// hooked yet (a container's own copy, say) is found no later than this.
const rescanInterval = 2 * time.Second

// rescan hooks, at most every rescanInterval, the verbs processes a
// host-wide trace has not seen yet. Their QPs made before are found as a
// running process's are.
func (t *Tracer) rescan() {
	if !t.opts.All || t.stopping.Load() || time.Since(t.lastScan) < rescanInterval {
		return
	}
	t.hookFound(trace.ProcFound)
}

// hookFound hooks the verbs processes not seen yet, announcing each with
// how (trace.ProcRunning or trace.ProcFound), and returns their pids.
func (t *Tracer) hookFound(how string) []int {
	t.lastScan = time.Now()
	pids := verbsProcesses(t.hostSeen, t.simExe)
	for _, pid := range pids {
		if t.interrupted() != nil {
			return pids
		}
		t.hostSeen[pid] = true
		// its exit is reported, as that of a process whose first verbs
		// call the trace saw (ctl_note), and it is not announced twice
		if err := t.objs.Procs.Put(uint32(pid), uint8(1)); err != nil {
			t.warn(fmt.Sprintf("process %d: its exit will not be reported (%v)", pid, err))
		}
		comm, _ := os.ReadFile(ProcDir(pid) + "/comm")
		t.announce(trace.Proc{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: uint32(pid), TID: uint32(pid)},
			How: how, Comm: strings.TrimSuffix(string(comm), "\n")})
		t.hookProcess(pid)
	}
	t.queueScans(pids, how == trace.ProcRunning)
	return pids
}

// announce queues a process's event for Run to deliver, before the
// attachments found for it.
func (t *Tracer) announce(p trace.Proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.procs = append(t.procs, p)
	t.haveUnsent.Store(true)
}

// Running lists the verbs processes a host-wide trace found running when
// it began.
func (t *Tracer) Running() []int { return append([]int(nil), t.running...) }
