package probe

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

type pidAddr struct {
	pid  uint32
	addr uint64
}

type attachKey struct {
	file   fileID
	offset uint64
	role   string
	cookie uint64
}

// attachAll places the exit tracepoint, the discovery probes and the
// explicit probes.
func (t *Tracer) attachAll() error {
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sched_process_exit", Program: t.objs.ProcExit})
	if err != nil {
		return fmt.Errorf("attaching to sched_process_exit: %w", err)
	}
	t.links = append(t.links, l)
	if err := t.attachProcTracepoints(); err != nil {
		return err
	}

	found := 0
	if lib := t.findLibibverbs(); lib != "" {
		if id, err := fileIDOf(lib); err == nil {
			t.ibvHooked[id] = true
		}
		found += t.attachDiscovery(lib, lib, false)
	} else {
		t.warnings = append(t.warnings, "libibverbs.so.1 not found: only the simulated HCA and explicit probes are traced")
	}
	seen := map[fileID]bool{}
	for _, b := range t.simBinaries() {
		id, err := fileIDOf(b[1])
		if err != nil {
			t.warnings = append(t.warnings, fmt.Sprintf("cannot open %s (%v): its simulated HCA, if any, is not traced", b[0], err))
			continue
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		t.exeHooked[id] = true
		found += t.attachDiscovery(b[0], b[1], true)
	}
	if t.opts.All {
		found += t.attachHostRunning()
	}
	if found == 0 && len(t.opts.Probes) == 0 {
		for _, a := range t.attachments {
			switch {
			case a.Err == "":
			case t.opts.PID > 0 && endsWithin(t.opts.PID, time.Second):
				// a probe tied to a process that is exiting is refused
				// (ESRCH, ENOENT): that is the cause, not the library
				return fmt.Errorf("process %d exited while sqscope attached to it (%s)", t.opts.PID, a.Err)
			default:
				return fmt.Errorf("found no verbs functions to probe: %s", a.Err)
			}
		}
		return errors.New("found no verbs functions to probe: no libibverbs.so.1 and no sqsim_* functions in the target (give --probe FUNC=LIB:0xOFFSET)")
	}
	for _, p := range t.opts.Probes {
		r, _ := roleByName(p.Func)
		a := t.attach(uint32(t.opts.PID), r, r.cookie, p.Path, p.Path, p.Offset, "explicit")
		if a.Err != "" {
			return fmt.Errorf("probe %s: %s", p, a.Err)
		}
	}
	if t.opts.PID != 0 && t.opts.Child == nil && t.opts.PID != os.Getpid() {
		res, scanErr, bySym, byMem := t.attachRunning(t.opts.PID, t.opts.ScanBounds)
		t.mu.Lock()
		t.scan = &res
		if !errors.Is(scanErr, ErrScanBound) { // what it found before the bound is used
			t.scanErr = scanErr
		}
		t.mu.Unlock()
		switch {
		case t.scanErr != nil && bySym == 0:
			// the QPs it has cannot be found: nothing to trace them by
			return t.scanErr
		case bySym+byMem == 0 && t.scan.Cut != "":
			return fmt.Errorf("%w: the %s, after %d MiB of process %d, came before any verbs context", ErrScanBound, t.scan.Cut, t.scan.Bytes>>20, t.opts.PID)
		}
		if s := t.scan; s != nil && len(s.QPs) > 0 {
			t.warnings = append(t.warnings, fmt.Sprintf(
				"process %d was running before sqscope attached: %d QP(s) found in its memory (%d MiB of %d mappings read in %v), their caps unknown and the WRs they had outstanding before the attach unknown until a completion of a WR posted since retires them",
				t.opts.PID, len(s.QPs), s.Bytes>>20, s.Mappings, s.Duration.Round(time.Millisecond)))
		}
		placed := bySym + byMem
		switch {
		case placed > 0 && len(t.scan.QPs) == 0, placed == 0 && UsesVerbs(t.opts.PID):
			// found no QP, or not even a context: of a process that was
			// ending then, that is the cause to say
			ended := exiting(t.opts.PID) || t.proc.wait(attachEndWait)
			t.warnings = append(t.warnings, runningNote(t.opts.PID, bySym, byMem, len(t.scan.QPs), ended))
		case placed == 0 && exiting(t.opts.PID):
			t.warnings = append(t.warnings, runningNote(t.opts.PID, 0, 0, len(t.scan.QPs), true))
		default:
			// QPs found and their functions placed; or no verbs library
			// and no simulated HCA yet (a shell that will exec the
			// program, say): it has no QP to miss
		}
	}
	return nil
}

// attachEndWait is how long an attach that found no QP in a running
// target waits for it to end: one closing its device on its way out
// ends within it, and is said to have ended, not to have QPs to learn.
const attachEndWait = 100 * time.Millisecond

// runningNote says what a trace of a process that was running before
// sqscope attached, and in whose memory no QP (or no function to place)
// was found, sees of the QPs it made earlier: bySym and byMem data-path
// functions were placed by symbol and from its memory, qps QPs found in
// it; ended, it ended during the attach (on its way out it had destroyed
// what the scan did not find), which is then the cause to say.
func runningNote(pid, bySym, byMem, qps int, ended bool) string {
	switch {
	case ended && qps > 0:
		return fmt.Sprintf("process %d ended while sqscope attached: nothing of it is traced", pid)
	case ended:
		found := "no verbs context"
		if bySym+byMem > 0 {
			found = "no QP"
		}
		return fmt.Sprintf("process %d ended while sqscope attached: its memory scan found %s (destroyed on its way out), and nothing of it is traced", pid, found)
	case bySym+byMem > 0:
		how := "by symbol"
		if bySym == 0 {
			how = "in its memory"
		}
		return fmt.Sprintf("process %d was running before sqscope attached: its data-path functions were found %s, and QPs it created earlier are learned from their first post or poll, with caps unknown (max_send_wr is inferred from the first SQ-full ENOMEM)", pid, how)
	}
	return fmt.Sprintf("process %d was running before sqscope attached: its existing QPs are seen from their next ibv_modify_qp, and their post_send/poll_cq functions only once some QP is created or modified (or given with --probe post_send=LIB:0xOFFSET); until then their posts and polls are not traced", pid)
}

// attachDiscovery hooks the control-path functions found in one ELF file
// and returns how many it placed.
func (t *Tracer) attachDiscovery(path, openPath string, sim bool) int {
	n := 0
	via := uint64(bpf.VerbsSqViaSQ_VIA_IBV)
	if sim {
		via = uint64(bpf.VerbsSqViaSQ_VIA_SIM)
	}
	f, err := elf.Open(openPath)
	if err != nil {
		t.warnings = append(t.warnings, fmt.Sprintf("cannot read %s (%v): its verbs functions are not traced", path, err))
		return 0
	}
	defer f.Close()
	for _, d := range discoveryFuncs {
		name := d.ibv
		if sim {
			name = d.sim
		}
		if name == "" {
			continue
		}
		sym, err := resolveSymbol(f, openPath, name)
		if err != nil {
			continue // not every binary has every function
		}
		r, _ := roleByName(d.role)
		if a := t.attach(uint32(t.opts.PID), r, via, path, openPath, sym.Offset, "symbol"); a.Err == "" {
			n++
		}
	}
	return n
}

var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
	"/usr/local/lib", "/usr/local/lib64", "/lib", "/usr/lib",
}

// findLibibverbs returns the libibverbs to hook.
func (t *Tracer) findLibibverbs() string {
	if t.opts.Libibverbs != "" {
		return t.opts.Libibverbs
	}
	if t.opts.PID != 0 {
		if maps, err := readMaps(t.opts.PID); err == nil {
			for _, m := range maps {
				if isLibibverbs(m.Path) {
					return m.Path
				}
			}
		}
	}
	// A held child has not run its loader yet: look where it will, its
	// LD_LIBRARY_PATH first, then the executable's RUNPATH/RPATH.
	if c := t.opts.Child; c != nil {
		var dirs []string
		for _, e := range c.cmd.Env {
			if v, ok := strings.CutPrefix(e, "LD_LIBRARY_PATH="); ok {
				dirs = append(dirs, filepath.SplitList(v)...)
			}
		}
		dirs = append(dirs, runpath(c.Path)...)
		for _, dir := range dirs {
			p := filepath.Join(dir, "libibverbs.so.1")
			if _, err := os.Stat(p); err == nil {
				if r, err := filepath.EvalSymlinks(p); err == nil {
					return r
				}
				return p
			}
		}
	}
	for _, dir := range libDirs {
		p := filepath.Join(dir, "libibverbs.so.1")
		if _, err := os.Stat(p); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return r
			}
			return p
		}
	}
	return ""
}

func isLibibverbs(path string) bool {
	return filepath.Base(path) == "libibverbs.so.1" || hasPrefixBase(path, "libibverbs.so.1.")
}

// runpath is an executable's DT_RUNPATH or DT_RPATH directories, with
// $ORIGIN expanded.
func runpath(exe string) []string {
	f, err := elf.Open(exe)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range filepath.SplitList(v) {
				out = append(out, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(exe)))
			}
		}
	}
	return out
}

// hookNewLibibverbs attaches the discovery probes to a libibverbs the
// target mapped that is not the one hooked at start (a bundled copy it
// dlopen()ed, say). QPs it created before this are seen from their next
// modify.
func (t *Tracer) hookNewLibibverbs() {
	pid := t.opts.PID
	if pid == 0 {
		return
	}
	maps, err := readMaps(pid)
	if err != nil {
		return
	}
	for _, m := range maps {
		if !isLibibverbs(m.Path) {
			continue
		}
		open := ProcDir(pid) + "/root" + m.Path
		id, err := fileIDOf(open)
		if err != nil || t.ibvHooked[id] {
			continue
		}
		t.ibvHooked[id] = true
		t.attachDiscovery(m.Path, open, false)
	}
}

func hasPrefixBase(path, prefix string) bool {
	b := filepath.Base(path)
	return len(b) >= len(prefix) && b[:len(prefix)] == prefix
}

// simBinaries lists [path, openPath] of the files searched for sqsim_*.
func (t *Tracer) simBinaries() [][2]string {
	var out [][2]string
	switch {
	case t.opts.Exe != "":
		out = append(out, [2]string{t.opts.Exe, t.opts.Exe})
	case t.opts.PID != 0:
		exe := ProcDir(t.opts.PID) + "/exe"
		if p, err := os.Readlink(exe); err == nil {
			out = append(out, [2]string{p, exe})
		} else {
			t.warnings = append(t.warnings, fmt.Sprintf("cannot read the target's executable (%v): its simulated HCA, if any, is not traced", err))
		}
	default:
		if p, err := os.Executable(); err == nil {
			out = append(out, [2]string{p, p})
		}
	}
	for _, b := range t.opts.Binaries {
		out = append(out, [2]string{b, b})
	}
	return out
}

// attach places role's programs at (openPath, off) once per file, offset
// and role, and records the attachment. path is the name reported, pid the
// process it was found for.
func (t *Tracer) attach(pid uint32, r role, cookie uint64, path, openPath string, off uint64, how string) trace.Attach {
	return t.attachFound(pid, r, cookie, path, openPath, off, how, "")
}

// attachFound is attach for a function a debug file's symbols found.
func (t *Tracer) attachFound(pid uint32, r role, cookie uint64, path, openPath string, off uint64, how, debug string) trace.Attach {
	a, _, _ := t.attachPlaced(pid, r, cookie, path, openPath, off, how, debug)
	return a
}

// attachPlaced is attachFound that also returns the links it placed and
// their key (none when it placed nothing), for probes removed before the
// tracer closes (sentinel.go).
func (t *Tracer) attachPlaced(pid uint32, r role, cookie uint64, path, openPath string, off uint64, how, debug string) (trace.Attach, []link.Link, attachKey) {
	a := trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
		Func: r.name, Path: path, Offset: off, How: how, DebugFile: debug}
	id, err := fileIDOf(openPath)
	if err != nil {
		a.Err = err.Error()
		t.record(a)
		return a, nil, attachKey{}
	}
	key := attachKey{file: id, offset: off, role: r.name, cookie: cookie}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.stopping.Load() {
		// stopping: the probes are being removed, and one placed now
		// could stop a process after the last read of the ring
		a.Err = "tracer closed"
		return a, nil, key
	}
	if err := t.interrupted(); err != nil {
		a.Err = err.Error() // Open ends: nothing more is placed
		return a, nil, key
	}
	if t.attached[key] {
		return trace.Attach{}, nil, key // already there: nothing new to report
	}
	ex, err := link.OpenExecutable(openPath)
	if err != nil {
		a.Err = err.Error()
		t.recordLocked(a)
		return a, nil, key
	}
	// The kernel keeps a uprobe to a process by the main thread's memory,
	// which goes when the main thread exits: a probe placed after that
	// would never fire. It is placed for every process then, and the
	// programs keep to the target (targ_tgid; flush reads its counts only).
	// Following the target's children, probes are placed for every
	// process too: a child is in the programs' filter from its fork on,
	// and a uprobe's process filter cannot grow.
	filter := t.opts.PID
	if t.following() {
		filter = 0
	}
	leaderGone := func() bool {
		if filter == 0 || !leaderExited(filter) {
			return false
		}
		filter = 0
		if !t.warnedLeader {
			t.warnedLeader = true
			t.warnings = append(t.warnings, fmt.Sprintf("the main thread of process %d has exited: probes placed from now on fire in every process that maps their file, and are ignored outside process %d", t.opts.PID, t.opts.PID))
		}
		return true
	}
	leaderGone()
	var placed []link.Link
	// The return probe goes first: a call entering before it exists then
	// finds no saved arguments and is skipped as a whole.
	for _, p := range []struct {
		prog func(*bpf.VerbsPrograms) *ebpf.Program
		ret  bool
	}{{r.ret, true}, {r.entry, false}} {
		if p.prog == nil {
			continue
		}
		l, err := t.uprobes.Attach(ex, p.prog(&t.objs.VerbsPrograms), off, cookie, filter, p.ret)
		if err != nil && leaderGone() {
			// the main thread exited since it was looked at: no probe
			// can be tied to it any more
			l, err = t.uprobes.Attach(ex, p.prog(&t.objs.VerbsPrograms), off, cookie, filter, p.ret)
		}
		if err != nil {
			for _, l := range placed {
				l.Close()
			}
			kind := "uprobe"
			if p.ret {
				kind = "uretprobe"
			}
			a.Err = fmt.Sprintf("attaching %s to %s:%#x: %v", kind, path, off, err)
			t.recordLocked(a)
			return a, nil, key
		}
		placed = append(placed, l)
	}
	t.links = append(t.links, placed...)
	t.attached[key] = true
	if how == trace.HowEscalation || how == trace.HowSample {
		// an escalation's probes see calls from now: a failure seen at an
		// error site before it is the analyzer's to count (sentinel.go)
		a.TimeNS = trace.MonotonicNS()
	}
	t.recordLocked(a)
	return a, placed, key
}

// notTracedPrefix starts the Err of a trace.Attach for a data-path function
// sqscope found and left without a probe on purpose.
const notTracedPrefix = "not traced: "

// notTraced records, once per file and offset, a data-path function found
// at (openPath, off) that sqscope does not probe, and what that hides.
func (t *Tracer) notTraced(pid uint32, r role, path, openPath string, off uint64, how string) {
	a := trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
		Func: r.name, Path: path, Offset: off, How: how, Err: notTracedPrefix + r.hides}
	id, err := fileIDOf(openPath)
	if err != nil {
		t.record(a)
		return
	}
	key := attachKey{file: id, offset: off, role: r.name}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.attached[key] {
		return
	}
	t.attached[key] = true
	t.recordLocked(a)
}

func (t *Tracer) record(a trace.Attach) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recordLocked(a)
}

func (t *Tracer) recordLocked(a trace.Attach) {
	t.attachments = append(t.attachments, a)
	t.unsent = append(t.unsent, a)
	t.haveUnsent.Store(true)
}

// learn attaches to the data-path functions a control-path record
// revealed, then tells the kernel side they are known.
func (t *Tracer) learn(pid uint32, fns []uint64) { t.learnHow(pid, fns, "ops-table") }

// learnHow attaches to data-path functions found how ("ops-table",
// "memory"), indexed by their role's fn, and returns how many it placed.
func (t *Tracer) learnHow(pid uint32, fns []uint64, how string) int {
	t.learnMu.Lock()
	defer t.learnMu.Unlock()
	placed := 0
	var maps []mapping
	type fnAt struct {
		r    role
		addr uint64
	}
	var order []fnAt
	for i, addr := range fns {
		if r, ok := roleByFn(i); ok && addr != 0 {
			order = append(order, fnAt{r, addr})
		}
	}
	// the polls' probes before the posts' (the process may be running)
	slices.SortStableFunc(order, func(a, b fnAt) int { return postLast(a.r, b.r) })
	for _, f := range order {
		r, addr := f.r, f.addr
		k := pidAddr{pid, addr}
		if t.known[k] {
			continue
		}
		if maps == nil {
			var err error
			if maps, err = readMaps(int(pid)); err != nil {
				t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
					Func: r.name, How: how, Err: fmt.Sprintf("reading maps of process %d: %v", pid, err)})
				return placed // gone: nothing to attach for it
			}
		}
		if t.opts.attachDelay > 0 {
			time.Sleep(t.opts.attachDelay)
		}
		path, openPath, off, err := fileOf(int(pid), maps, addr)
		if err == nil {
			t.fnFile[k] = path
		}
		switch {
		case err != nil:
			t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
				Func: r.name, How: how, Err: err.Error()})
		case r.entry == nil && r.ret == nil:
			t.notTraced(pid, r, path, openPath, off, how)
		case t.sentinelDefers(r):
			placed += t.deferDataPath(pid, r, path, openPath, off, how)
		default:
			if a := t.attach(pid, r, r.cookie, path, openPath, off, how); a.Err == "" && a.Func != "" {
				placed++
			}
		}
		// Known even when attaching failed: stopping the process again
		// would not help.
		t.known[k] = true
		if err := t.objs.KnownFns.Put(bpf.VerbsSqKey{Pid: pid, Addr: addr}, uint8(1)); err != nil {
			t.warn(fmt.Sprintf("cannot mark %s at %#x of process %d as attached (%v): the process may be stopped again", r.name, addr, pid, err))
		}
	}
	return placed
}

// UsesVerbs says whether process pid maps a libibverbs or runs a binary
// with the simulated HCA.
func UsesVerbs(pid int) bool {
	if lib, _ := libibverbsMapped(pid); lib != "" {
		return true
	}
	_, err := ResolveSymbol(ProcDir(pid)+"/exe", "sqsim_create_qp")
	return err == nil
}
