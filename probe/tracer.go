// Package probe is the only part of sqscope that talks to the kernel: it
// finds the verbs functions of a process, attaches the eBPF programs of
// package bpf to them, reads their ring buffer and turns the records into
// trace.Events.
//
// Where the probes go: the control path (ibv_alloc_pd, ibv_create_qp,
// ibv_qp_to_qp_ex, ibv_modify_qp, ibv_destroy_qp in libibverbs, and the
// simulated HCA's sqsim_* equivalents) is found by symbol. Each of those
// calls reveals data-path function pointers (the context's ops table, the
// provider's create_qp_ex, the ibv_qp_ex wr_* functions); the tracer maps
// each through /proc/PID/maps to a file offset and attaches there. Explicit
// FUNC=LIB:OFFSET probes cover anything else.
package probe

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// Mode selects what the kernel side produces.
type Mode int

const (
	// ModeEvents records every post, poll and wr batch.
	ModeEvents Mode = iota
	// ModeCounters keeps per-QP and per-CQ totals in the kernel and emits
	// no per-call records: QPCounters and EmptyPolls come with each flush.
	ModeCounters
)

// Options say what to trace and how.
type Options struct {
	// PID limits tracing to one process; 0 traces every process.
	PID int
	// Child is a process from StartHeld; it sets PID and Exe.
	Child *Child
	// Exe is searched for the simulated HCA's sqsim_* functions. Default:
	// the target's executable (/proc/PID/exe), or this executable when PID
	// is 0.
	Exe string
	// Binaries are more ELF files to search for ibv_* or sqsim_* functions.
	Binaries []string
	// Libibverbs is the libibverbs to hook; default: the one the target
	// has mapped, else libibverbs.so.1 in the standard library directories.
	Libibverbs string
	// Probes are explicit data-path locations.
	Probes []ExplicitProbe
	Mode   Mode
	// ReuseEvents lets Run pass the same *trace.Post and *trace.Poll (and
	// their WR and completion slices) again and again: fn must not keep
	// them past its return. It saves an allocation or two per record.
	ReuseEvents bool
	// CallTimes makes events-mode records carry each call's entry time
	// (trace.Post.EntryNS, trace.Poll.EntryNS); without it they are 0.
	CallTimes bool
	// RingBytes is the ring buffer size: a power of two, at least 4096.
	// Default 8 MiB.
	RingBytes int
	// FlushInterval is how often empty polls, lost counts and counters are
	// read from the kernel. Default 1s.
	FlushInterval time.Duration
	// NoStop disables stopping the target (SIGSTOP) while the probes for
	// newly revealed data-path functions are attached. Without the stop, a
	// post issued right after ibv_create_qp can run before its probe is in
	// place and is missed; with it, no call is missed but the target pauses
	// for about a millisecond each time new functions appear (a handful of
	// times per process). A shell sees the stop and may report the job as
	// stopped.
	NoStop bool
	// MaxWRs, MaxSGEs and MaxWCs lower the per-record bounds (WRs per post,
	// SGEs summed per WR, completions per poll); 0 keeps the compiled ones.
	MaxWRs, MaxSGEs, MaxWCs int

	// attachDelay slows every data-path attach down (tests of the stop).
	attachDelay time.Duration
	// perfEventUprobes forces the fallback used on kernels without
	// uprobe_multi links (tests).
	perfEventUprobes bool
	// noTaskStorage forces the fallback used on kernels whose uprobe
	// programs cannot use task storage (tests).
	noTaskStorage bool
	// noThreadSlots keeps every thread's state where a thread whose slot
	// is taken keeps it: task storage, or the by-tid hash (tests).
	noThreadSlots bool
	// oneThreadSlot leaves a single slot for all threads: the first takes
	// it, the others keep their state elsewhere (tests).
	oneThreadSlot bool
}

const (
	defaultRingBytes = 8 << 20
	defaultFlush     = time.Second
	// stopGrace bounds how long a stopped process waits for records of
	// other processes to be drained before it is continued.
	stopGrace = 50 * time.Millisecond
	// pollInterval is how often the reader looks for data records, which
	// do not wake it up (at most this much latency; a quarter-full ring
	// wakes it at once).
	pollInterval = 10 * time.Millisecond
)

// Tracer is an attached set of probes and the reader of their records.
type Tracer struct {
	opts Options
	objs bpf.VerbsObjects
	rd   *ringbuf.Reader
	rec  ringbuf.Record

	uprobes     Uprobes    // how the programs are loaded and attached
	mu          sync.Mutex // guards links, attachments, unsent, warnings, stopped, closed
	links       []link.Link
	attached    map[attachKey]bool
	attachments []trace.Attach
	closed      bool

	warnings []string
	unsent   []trace.Attach // attachments Run has not delivered yet
	// haveUnsent and haveStopped let Run skip the lock per record
	haveUnsent  atomic.Bool
	haveStopped atomic.Bool
	// reused events (Options.ReuseEvents)
	post       trace.Post
	poll       trace.Poll
	known      map[pidAddr]bool
	stopped    map[int]time.Time // processes waiting for SIGCONT, since; guarded by mu
	exitSeen   bool
	stops      int // control-path records that stopped their process
	syncing    atomic.Int32
	syncDone   chan struct{}
	stopping   atomic.Bool
	emptySeen  map[bpf.VerbsSqKey]uint64
	lostSeen   uint64
	countsSeen map[bpf.VerbsSqKey]bpf.VerbsSqQpCounters
	cqSeen     map[bpf.VerbsSqKey]bpf.VerbsSqCqStats
	ibvHooked  map[fileID]bool // libibverbs files with discovery probes

	qpRec   bpf.VerbsSqQpRec
	postRec bpf.VerbsSqPostRec
	pollRec bpf.VerbsSqPollRec
	recvRec bpf.VerbsSqRecvRec
	exitRec bpf.VerbsSqExitRec
}

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

// Open loads the BPF programs, attaches the discovery probes and the
// explicit ones, and returns a Tracer ready to Run. Call Run soon after: a
// target stopped while its new functions are attached waits for Run (or
// Close) to continue it.
func Open(opts Options) (*Tracer, error) {
	if opts.Child != nil {
		opts.PID = opts.Child.Pid()
		if opts.Exe == "" {
			opts.Exe = opts.Child.Path
		}
	}
	if opts.RingBytes == 0 {
		opts.RingBytes = defaultRingBytes
	}
	if opts.RingBytes < 4096 || opts.RingBytes&(opts.RingBytes-1) != 0 {
		return nil, fmt.Errorf("ring buffer size %d: want a power of two of at least 4096 bytes", opts.RingBytes)
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = defaultFlush
	}
	for _, b := range []struct {
		name string
		v    int
		max  int
	}{{"MaxWRs", opts.MaxWRs, bpf.MaxWRs}, {"MaxSGEs", opts.MaxSGEs, bpf.MaxSGEs}, {"MaxWCs", opts.MaxWCs, bpf.MaxWCs}} {
		if b.v < 0 || b.v > b.max {
			return nil, fmt.Errorf("%s %d: want 1..%d (0 for the default)", b.name, b.v, b.max)
		}
	}
	if err := checkKernel(); err != nil {
		return nil, err
	}
	if err := checkPrivileges(); err != nil {
		return nil, err
	}
	if opts.PID != 0 {
		if err := checkPID(opts.PID); err != nil {
			return nil, err
		}
	}
	for _, p := range opts.Probes {
		if err := CheckProbe(p); err != nil {
			return nil, err
		}
	}

	t := &Tracer{
		opts:       opts,
		attached:   map[attachKey]bool{},
		known:      map[pidAddr]bool{},
		stopped:    map[int]time.Time{},
		emptySeen:  map[bpf.VerbsSqKey]uint64{},
		countsSeen: map[bpf.VerbsSqKey]bpf.VerbsSqQpCounters{},
		cqSeen:     map[bpf.VerbsSqKey]bpf.VerbsSqCqStats{},
		ibvHooked:  map[fileID]bool{},
		syncDone:   make(chan struct{}),
	}
	if err := t.load(); err != nil {
		return nil, err
	}
	if err := t.attachAll(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Tracer) load() error {
	spec, err := bpf.LoadVerbs()
	if err != nil {
		return fmt.Errorf("reading the BPF object: %w", err)
	}
	self := os.Getpid()
	stop := !t.opts.NoStop
	if t.opts.PID == self {
		// A process cannot wait for itself to attach: use Sync instead.
		stop = false
		t.warnings = append(t.warnings, "tracing this process itself: calls through newly found functions are seen only after Tracer.Sync returns")
	}
	set := func(name string, v any) error {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("BPF object has no knob %s", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("setting BPF knob %s: %w", name, err)
		}
		return nil
	}
	bound := func(v, def int) uint32 {
		if v == 0 {
			return uint32(def)
		}
		return uint32(v)
	}
	stopKnob := boolKnob(stop)
	for _, kv := range []struct {
		name string
		v    any
	}{
		{"targ_tgid", uint32(t.opts.PID)},
		{"self_tgid", uint32(self)},
		{"stop_on_new", stopKnob},
		{"targ_mode", uint8(t.opts.Mode)},
		{"call_times", boolKnob(t.opts.CallTimes)},
		{"use_thread_slots", boolKnob(!t.opts.noThreadSlots)},
		{"max_wrs", bound(t.opts.MaxWRs, bpf.MaxWRs)},
		{"max_sges", bound(t.opts.MaxSGEs, bpf.MaxSGEs)},
		{"max_wcs", bound(t.opts.MaxWCs, bpf.MaxWCs)},
		{"wakeup_bytes", uint64(t.opts.RingBytes / 4)},
	} {
		if err := set(kv.name, kv.v); err != nil {
			return err
		}
	}
	if t.opts.oneThreadSlot {
		if err := set("slot_mask", uint32(0)); err != nil {
			return err
		}
	}
	spec.Maps["events"].MaxEntries = uint32(t.opts.RingBytes)

	t.uprobes.perfEvent = t.opts.perfEventUprobes
	loadAll := func() error {
		return t.uprobes.Load(spec, func() error { return spec.LoadAndAssign(&t.objs, nil) })
	}
	// The data-path probes keep per-thread state in task storage, which
	// uprobe programs may use on recent kernels only; elsewhere they keep
	// it in a hash by thread id (a few tens of ns more per call). The
	// error reported is the first one.
	if t.opts.noTaskStorage {
		if err := hashThreadState(spec); err != nil {
			return err
		}
	}
	err = loadAll()
	if err != nil && !t.opts.noTaskStorage {
		if herr := hashThreadState(spec); herr != nil {
			return herr
		}
		if loadAll() == nil {
			err = nil
		}
	}
	if err != nil {
		// A verifier rejection also comes as EACCES: tell it apart first.
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("the kernel's verifier rejected sqscope's BPF programs: %v", ve)
		}
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			return fmt.Errorf("loading BPF needs root or CAP_BPF and CAP_PERFMON: %v", err)
		}
		return fmt.Errorf("loading BPF programs: %w", err)
	}
	rd, err := ringbuf.NewReader(t.objs.Events)
	if err != nil {
		t.objs.Close()
		return fmt.Errorf("opening the BPF ring buffer: %w", err)
	}
	t.rd = rd
	return nil
}

// hashThreadState switches the programs' per-thread state from task
// storage to the hash by thread id.
func hashThreadState(spec *ebpf.CollectionSpec) error {
	vs, ok := spec.Variables["have_task_storage"]
	if !ok {
		return errors.New("BPF object has no knob have_task_storage")
	}
	if err := vs.Set(uint8(0)); err != nil {
		return fmt.Errorf("setting BPF knob have_task_storage: %w", err)
	}
	// unused now, but a map the kernel may not know must not fail the load
	m := spec.Maps["threads"]
	m.Type, m.Flags, m.MaxEntries = ebpf.Hash, 0, 1
	return nil
}

// attachAll places the exit tracepoint, the discovery probes and the
// explicit probes.
func (t *Tracer) attachAll() error {
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sched_process_exit", Program: t.objs.ProcExit})
	if err != nil {
		return fmt.Errorf("attaching to sched_process_exit: %w", err)
	}
	t.links = append(t.links, l)

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
		found += t.attachDiscovery(b[0], b[1], true)
	}
	if found == 0 && len(t.opts.Probes) == 0 {
		for _, a := range t.attachments {
			if a.Err != "" {
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
		if t.attachDataPathBySymbol() > 0 {
			t.warnings = append(t.warnings, fmt.Sprintf(
				"process %d was running before sqscope attached: its data-path functions were found by symbol, and QPs it created earlier are learned from their first post or poll, with caps unknown (max_send_wr is inferred from the first SQ-full ENOMEM)", t.opts.PID))
		} else {
			t.warnings = append(t.warnings, fmt.Sprintf(
				"process %d was running before sqscope attached: its existing QPs are seen from their next ibv_modify_qp, and their post_send/poll_cq functions only once some QP is created or modified (or given with --probe post_send=LIB:0xOFFSET); until then their posts and polls are not traced", t.opts.PID))
		}
	}
	return nil
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

var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
	"/usr/local/lib", "/usr/local/lib64", "/lib", "/usr/lib",
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
		open := fmt.Sprintf("/proc/%d/root%s", pid, m.Path)
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
		exe := fmt.Sprintf("/proc/%d/exe", t.opts.PID)
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
	a := trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
		Func: r.name, Path: path, Offset: off, How: how}
	id, err := fileIDOf(openPath)
	if err != nil {
		a.Err = err.Error()
		t.record(a)
		return a
	}
	key := attachKey{file: id, offset: off, role: r.name, cookie: cookie}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		a.Err = "tracer closed"
		return a
	}
	if t.attached[key] {
		return trace.Attach{} // already there: nothing new to report
	}
	ex, err := link.OpenExecutable(openPath)
	if err != nil {
		a.Err = err.Error()
		t.recordLocked(a)
		return a
	}
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
		l, err := t.uprobes.Attach(ex, p.prog(&t.objs.VerbsPrograms), off, cookie, t.opts.PID, p.ret)
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
			return a
		}
		placed = append(placed, l)
	}
	t.links = append(t.links, placed...)
	t.attached[key] = true
	t.recordLocked(a)
	return a
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
func (t *Tracer) learn(pid uint32, fns *[16]uint64) {
	var maps []mapping
	for i, addr := range fns {
		if addr == 0 {
			continue
		}
		k := pidAddr{pid, addr}
		if t.known[k] {
			continue
		}
		r, ok := roleByFn(i)
		if !ok {
			continue
		}
		if maps == nil {
			var err error
			if maps, err = readMaps(int(pid)); err != nil {
				t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
					Func: r.name, How: "ops-table", Err: fmt.Sprintf("reading maps of process %d: %v", pid, err)})
				return // gone: nothing to attach for it
			}
		}
		if t.opts.attachDelay > 0 {
			time.Sleep(t.opts.attachDelay)
		}
		path, openPath, off, err := fileOf(int(pid), maps, addr)
		if err != nil {
			t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
				Func: r.name, How: "ops-table", Err: err.Error()})
		} else {
			t.attach(pid, r, r.cookie, path, openPath, off, "ops-table")
		}
		// Known even when attaching failed: stopping the process again
		// would not help.
		t.known[k] = true
		if err := t.objs.KnownFns.Put(bpf.VerbsSqKey{Pid: pid, Addr: addr}, uint8(1)); err != nil {
			t.warn(fmt.Sprintf("cannot mark %s at %#x of process %d as attached (%v): the process may be stopped again", r.name, addr, pid, err))
		}
	}
}

// Warnings are things the user should know about what cannot be traced.
func (t *Tracer) Warnings() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.warnings...)
}

func (t *Tracer) warn(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.warnings = append(t.warnings, s)
}

// Attachments lists every probe placed (or that failed: Err set).
func (t *Tracer) Attachments() []trace.Attach {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]trace.Attach(nil), t.attachments...)
}

// Lost is the number of records dropped because the ring buffer was full.
func (t *Tracer) Lost() uint64 {
	var per []uint64
	if err := t.objs.Lost.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// Run reads records until ctx is done, the traced process (Options.PID)
// exits, or the Tracer is closed, calling fn for each event from this one
// goroutine. Attach events for probes already placed come first. Before
// returning it delivers every record already in the ring buffer and a
// final flush.
func (t *Tracer) Run(ctx context.Context, fn func(trace.Event)) error {
	t.deliverAttachments(fn)
	stop := context.AfterFunc(ctx, func() {
		t.stopping.Store(true)
		t.rd.Flush()
	})
	defer stop()

	next := time.Now().Add(t.opts.FlushInterval)
	// Data records do not wake the reader (see output() in bpf/output.bpf.h):
	// it polls. The deadline is renewed only when a read returns without
	// a record; until then records are read without a clock reading each.
	t.rd.SetDeadline(time.Now().Add(pollInterval))
	for n := 0; ; n++ {
		err := t.rd.ReadInto(&t.rec)
		if err != nil {
			t.rd.SetDeadline(time.Now().Add(pollInterval))
		}
		switch {
		case err == nil:
			if err := t.handle(t.rec.RawSample, fn); err != nil {
				return err
			}
			t.deliverAttachments(fn)
			t.resume(false)
			if n%256 == 0 && time.Now().After(next) {
				t.flush(fn)
				next = time.Now().Add(t.opts.FlushInterval)
			}
			if t.exitSeen && t.rd.AvailableBytes() == 0 {
				// The last thread's exit record can come before the
				// other threads have handed their pending counts over
				// (each does on its way out): wait for them.
				waitThreadsExited(t.opts.PID, time.Second)
				if t.rd.AvailableBytes() > 0 {
					continue
				}
				t.flush(fn)
				return nil
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.resume(true)
			if time.Now().Before(next) {
				continue
			}
			t.flush(fn)
			next = time.Now().Add(t.opts.FlushInterval)
			if t.opts.PID != 0 && processGone(t.opts.PID) && t.rd.AvailableBytes() == 0 {
				return nil // exited before its exit could be seen
			}
		case errors.Is(err, ringbuf.ErrFlushed):
			if t.stopping.Load() {
				t.resume(true)
				if err := t.handOver(fn); err != nil {
					t.warn(fmt.Sprintf("handing over the threads' pending counts: %v (the last calls of each thread may be missing from the totals)", err))
				}
				t.flush(fn)
				return nil
			}
			t.finishSync()
		case errors.Is(err, ringbuf.ErrClosed), errors.Is(err, os.ErrClosed):
			return nil
		default:
			return fmt.Errorf("reading the BPF ring buffer: %w", err)
		}
	}
}

func (t *Tracer) deliverAttachments(fn func(trace.Event)) {
	if !t.haveUnsent.Load() {
		return
	}
	t.mu.Lock()
	pending := t.unsent
	t.unsent = nil
	t.haveUnsent.Store(false)
	t.mu.Unlock()
	for i := range pending {
		a := pending[i]
		fn(&a)
	}
}

// resume continues stopped processes once their records are drained (or
// after stopGrace, so a busy other process cannot keep one stopped).
func (t *Tracer) resume(force bool) {
	if !t.haveStopped.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() { t.haveStopped.Store(len(t.stopped) > 0) }()
	for pid, since := range t.stopped {
		if !force && time.Since(since) < stopGrace {
			waitGroupStopped(pid, 20*time.Millisecond)
			if t.rd.AvailableBytes() > 0 {
				continue // read what the other threads wrote first
			}
		}
		syscall.Kill(pid, syscall.SIGCONT)
		delete(t.stopped, pid)
	}
}

// markStopped notes that pid was stopped for the record just handled.
func (t *Tracer) markStopped(pid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stops++
	if _, ok := t.stopped[pid]; !ok {
		t.stopped[pid] = time.Now()
		t.haveStopped.Store(true)
	}
}

// Sync waits until every record written before the call has been handled
// by Run, including the probes it attached. A process tracing itself calls
// it after creating QPs, since it cannot be stopped.
func (t *Tracer) Sync(ctx context.Context) error {
	t.mu.Lock()
	ch := t.syncDone
	t.mu.Unlock()
	t.syncing.Add(1)
	if err := t.rd.Flush(); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Tracer) finishSync() {
	if t.syncing.Swap(0) == 0 {
		return
	}
	t.mu.Lock()
	close(t.syncDone)
	t.syncDone = make(chan struct{})
	t.mu.Unlock()
}

// Close detaches every probe, continues any process still stopped and
// frees the kernel objects. Run returns.
func (t *Tracer) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for pid := range t.stopped {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	t.stopped = map[int]time.Time{}
	t.mu.Unlock()

	errs := t.detach()
	if t.rd != nil {
		if err := t.rd.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := t.objs.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing tracer: %w", err)
	}
	return nil
}

// boolKnob is a flag as the BPF side's __u8 knobs take it.
func boolKnob(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// detach removes every probe placed so far.
func (t *Tracer) detach() []error {
	t.mu.Lock()
	links := t.links
	t.links = nil
	t.mu.Unlock()
	// Each detach waits for an RCU grace period (~0.1 s): detach in
	// parallel so that they share them.
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Close()
		}()
	}
	wg.Wait()
	return errs
}

// handOver is the end of tracing a target that keeps running: the probes
// are removed, then a task iterator (hand_over in bpf/exit.bpf.h) adds every
// thread's pending counts to the maps the last flush reads, and the
// records still in the ring are delivered.
func (t *Tracer) handOver(fn func(trace.Event)) error {
	if err := errors.Join(t.detach()...); err != nil {
		return err
	}
	it, err := link.AttachIter(link.IterOptions{Program: t.objs.HandOver})
	if err != nil {
		return err
	}
	defer it.Close()
	rd, err := it.Open()
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, rd)
	rd.Close()
	if err != nil {
		return err
	}
	t.rd.SetDeadline(time.Now())
	for t.rd.ReadInto(&t.rec) == nil {
		if err := t.handle(t.rec.RawSample, fn); err != nil {
			return err
		}
	}
	return nil
}

// decodeInto copies a record into its fixed-size Go twin; a short record
// leaves the tail as it was. It returns the bytes copied.
func decodeInto[T any](dst *T, raw []byte) int {
	b := unsafe.Slice((*byte)(unsafe.Pointer(dst)), unsafe.Sizeof(*dst))
	return copy(b, raw)
}
