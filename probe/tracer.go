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
// each through /proc/PID/maps to a file offset and attaches there. A
// process traced after it started is searched by symbol (with its debug
// files, debugfile.go) and in its memory (ScanDataPath, memscan.go).
// Explicit FUNC=LIB:OFFSET probes cover anything else.
package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
	// ModeSentinel places no probe on the data path while the target is
	// healthy: only on the error sites of its provider's post_send and
	// wr_complete (probe/errsite), and, for Options.Escalate after a
	// process's first failure, the events mode's data-path probes
	// (sentinel.go). The control path is probed as in events mode.
	ModeSentinel
)

// DefaultEscalate is how long the sentinel mode traces a process in full
// after its first failure (Options.Escalate).
const DefaultEscalate = 10 * time.Second

// DefaultSampleFor is how long a sample window of the sentinel mode
// lasts (Options.SampleFor).
const DefaultSampleFor = 200 * time.Millisecond

// Options say what to trace and how.
type Options struct {
	// Context, when done, ends Open within moments whatever it is doing
	// (loading, scanning a process's memory, placing probes): Open then
	// removes what it placed, continues what it stopped and returns an
	// error wrapping ErrInterrupted. Nil: never.
	Context context.Context
	// PID limits tracing to one process; 0 traces every process.
	PID int
	// Child is a process from StartHeld; it sets PID and Exe.
	Child *Child
	// Follow traces the processes PID forks (and theirs) too, from their
	// fork on, with the verbs functions their programs bring.
	Follow bool
	// All traces every process of the host that uses verbs, running now
	// or started later (PID must be 0).
	All bool
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
	// ProbesAnywhere accepts explicit probes inside a function the file's
	// symbols know; by default only a function's start is.
	ProbesAnywhere bool
	Mode           Mode
	// Escalate is how long the sentinel mode keeps the full data-path
	// probes on a process after a failure; default DefaultEscalate.
	Escalate time.Duration
	// SampleEvery, in the sentinel mode, opens a sample window (sample.go)
	// this long after the previous one ended: the data-path probes on
	// every healthy traced process for SampleFor (default
	// DefaultSampleFor). 0: no sample windows. Budget, a percentage of the
	// traced processes' own CPU time, makes the wait longer when a
	// window's measured cost needs it (up to MaxSamplePeriod); 0: none.
	SampleEvery time.Duration
	SampleFor   time.Duration
	Budget      float64
	// ReuseEvents lets Run pass the same *trace.Post and *trace.Poll (and
	// their WR and completion slices) again and again: fn must not keep
	// them past its return. It saves an allocation or two per record.
	ReuseEvents bool
	// CallTimes makes events-mode records carry each call's entry time
	// (trace.Post.EntryNS, trace.Poll.EntryNS); without it they are 0.
	CallTimes bool
	// RingBytes is the ring buffer size: a power of two, at least 4096.
	// Default 32 MiB in events mode (about 0.4 s of 16-WR posts from 1,024
	// QPs at full speed here: what the reader needs to come back in when
	// other work keeps the CPUs busy), 8 MiB in counters mode.
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
	// DebugDirs are searched for separate debug files (build-id and
	// .gnu_debuglink); default: $SQSCOPE_DEBUG_DIR, else
	// DefaultDebugDirs.
	DebugDirs []string
	// ScanBounds bound the memory scan of a process traced after it
	// started (PID without Child, or each process All finds running).
	ScanBounds ScanBounds
	// ScanTotal bounds the memory scans of a host-wide trace (All) taken
	// together; zero fields take DefaultScanTotalBytes and
	// DefaultScanTotalTime.
	ScanTotal ScanBounds
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
	// privateHolds keeps this tracer's holds to itself, as where bpffs is
	// missing (tests).
	privateHolds bool
}

const (
	// DefaultRingBytes is the ring of events mode when Options leave it
	// out (RingBytes).
	DefaultRingBytes         = 32 << 20
	defaultCountersRingBytes = 8 << 20
	defaultFlush             = time.Second
	// stopGrace bounds how long a stopped process waits for records of
	// other processes to be drained before it is continued.
	stopGrace = 50 * time.Millisecond
	// groupStopMax bounds the wait for every thread of a stopped process
	// to stop (one that does not, in an uninterruptible sleep or stopped
	// by a debugger, must not keep the others stopped).
	groupStopMax = time.Second
	// pollInterval is how often the reader looks for data records, which
	// do not wake it up (at most this much latency; a quarter-full ring
	// wakes it at once).
	pollInterval = 10 * time.Millisecond
)

// Tracer is an attached set of probes and the reader of their records.
type Tracer struct {
	watchdog *watchdog // continues what this tracer holds if it dies (holdwatch.go)
	// a return value no post_send or poll_cq gives was seen (and said)
	oddPost, oddPoll bool
	opts             Options
	objs             bpf.VerbsObjects
	rd               *ringbuf.Reader
	rec              ringbuf.Record

	uprobes     Uprobes    // how the programs are loaded and attached
	mu          sync.Mutex // guards links, attachments, unsent, warnings, stopped, closed, cut
	links       []link.Link
	attached    map[attachKey]bool
	attachments []trace.Attach
	closed      bool
	cut         CutInfo // cut.go

	warnings []string
	unsent   []trace.Attach // attachments Run has not delivered yet
	// haveUnsent and haveStopped let Run skip the lock per record
	haveUnsent  atomic.Bool
	haveStopped atomic.Bool
	// dataCalls counts the data-path calls read from the ring (posts,
	// polls and the empty polls they carry, receives): what a sample
	// window's probes ran for, where the kernel's statistics cannot say
	dataCalls atomic.Uint64
	// reused events (Options.ReuseEvents)
	post  trace.Post
	poll  trace.Poll
	known map[pidAddr]bool
	// fnFile is the file each revealed function is in: a QP's provider is
	// the file of its post_send (trace.QPCreate field Lib)
	fnFile  map[pidAddr]string
	stopped map[int]stopHold // processes waiting for SIGCONT; guarded by mu
	hold    holdID           // this tracer in the holds map shared by every sqscope (holds.go)
	// holdsPrivate says why the holds map is not shared with the other
	// tracers of the host (nil: it is)
	holdsPrivate error
	// contByOther: processes said to have been continued by someone
	// else during a stop; guarded by mu
	contByOther map[int]bool
	lastCont    map[int]uint64 // when this tracer last continued each process (trace.MonotonicNS); guarded by mu
	proc        *procWatch     // the end of Options.PID; nil when tracing every process
	exitSeen    bool
	stops       int // control-path records that stopped their process
	syncing     atomic.Int32
	syncDone    chan struct{}
	stopping    atomic.Bool
	emptySeen   map[cqGenKey]uint64
	lostSeen    uint64
	countsSeen  map[bpf.VerbsSqGenKey]bpf.VerbsSqQpCounters
	occSeen     map[bpf.VerbsSqGenKey]trace.SQModel         // the model last reported with them
	qpFinals    map[bpf.VerbsSqGenKey]bpf.VerbsSqQpCounters // totals of destroyed QPs
	cqSeen      map[cqGenKey]bpf.VerbsSqCqStats
	cqFinals    map[cqGenKey]bpf.VerbsSqCqStats // counts replaced CQs ended with
	ibvHooked   map[fileID]bool                 // libibverbs files with discovery probes
	// the memory scan of a process traced after it started, its error,
	// and the events the scans made (delivered by Run before any record of
	// their process); guarded by mu
	scan      *ScanResult
	scanErr   error
	pre       []trace.Event
	after     []trace.Event   // delivered after the attachments (a sample window's end)
	mem       *memSampler     // the sentinel's reads of the QPs' counters (memsample.go)
	exeHooked map[fileID]bool // executables searched for the simulated HCA
	members   map[uint32]bool // processes followed from the target (Follow)
	procs     []trace.Proc    // processes to announce; guarded by mu
	running   []int           // verbs processes found when a host-wide trace began
	hostSeen  map[int]bool    // processes a host-wide trace knows of
	simExe    map[fileID]bool // executables looked at: has the simulated HCA
	lastScan  time.Time       // of /proc, for a host-wide trace
	hostScan  hostScanUse     // what a host-wide trace's scans used of ScanTotal (hostscan.go); guarded by hostScans.mu
	hostScans *hostScanner    // the background scans of a host-wide trace
	learnMu   sync.Mutex      // learnHow: the reader and the background scans learn functions
	// warnedLeader: the warning that probes are placed for every process
	// (the target's main thread has exited) was given; guarded by mu
	warnedLeader bool

	sentinel sentinel // the sentinel mode's sites and windows (sentinel.go)

	qpRec    bpf.VerbsSqQpRec
	cqRec    bpf.VerbsSqCqRec
	postRec  bpf.VerbsSqPostRec
	pollRec  bpf.VerbsSqPollRec
	recvRec  bpf.VerbsSqRecvRec
	exitRec  bpf.VerbsSqExitRec
	objRec   bpf.VerbsSqObjRec
	finalRec bpf.VerbsSqQpFinalRec
}

// Open loads the BPF programs, attaches the discovery probes and the
// explicit ones, and returns a Tracer ready to Run. Call Run soon after: a
// target stopped while its new functions are attached waits for Run (or
// Close) to continue it.
func Open(opts Options) (*Tracer, error) {
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Child != nil {
		opts.PID = opts.Child.Pid()
		if opts.Exe == "" {
			opts.Exe = opts.Child.Path
		}
	}
	if opts.RingBytes == 0 {
		opts.RingBytes = DefaultRingBytes
		if opts.Mode == ModeCounters {
			opts.RingBytes = defaultCountersRingBytes
		}
	}
	if opts.RingBytes < 4096 || opts.RingBytes&(opts.RingBytes-1) != 0 {
		return nil, fmt.Errorf("ring buffer size %d: want a power of two of at least 4096 bytes", opts.RingBytes)
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = defaultFlush
	}
	if opts.Escalate < 0 {
		return nil, fmt.Errorf("escalation window %v: want a positive duration", opts.Escalate)
	}
	if opts.Escalate == 0 {
		opts.Escalate = DefaultEscalate
	}
	if err := checkSampling(&opts); err != nil {
		return nil, err
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
	if opts.All && opts.PID != 0 {
		return nil, errors.New("tracing every process (-a) takes no process id or command")
	}
	var proc *procWatch
	if opts.PID != 0 {
		if err := checkPID(opts.PID); err != nil {
			return nil, err
		}
		var err error
		if proc, err = watchProcess(opts.PID); err != nil {
			return nil, err
		}
	}
	for _, p := range opts.Probes {
		if err := CheckProbe(p, opts.ProbesAnywhere); err != nil {
			return nil, err
		}
	}

	t := &Tracer{
		opts:        opts,
		proc:        proc,
		attached:    map[attachKey]bool{},
		known:       map[pidAddr]bool{},
		fnFile:      map[pidAddr]string{},
		stopped:     map[int]stopHold{},
		contByOther: map[int]bool{},
		lastCont:    map[int]uint64{},
		emptySeen:   map[cqGenKey]uint64{},
		countsSeen:  map[bpf.VerbsSqGenKey]bpf.VerbsSqQpCounters{},
		occSeen:     map[bpf.VerbsSqGenKey]trace.SQModel{},
		qpFinals:    map[bpf.VerbsSqGenKey]bpf.VerbsSqQpCounters{},
		cqSeen:      map[cqGenKey]bpf.VerbsSqCqStats{},
		cqFinals:    map[cqGenKey]bpf.VerbsSqCqStats{},
		ibvHooked:   map[fileID]bool{},
		exeHooked:   map[fileID]bool{},
		members:     map[uint32]bool{},
		hostSeen:    map[int]bool{},
		simExe:      map[fileID]bool{},
		syncDone:    make(chan struct{}),
		sentinel:    newSentinel(),
		hold:        newHoldID(),
	}
	if err := t.load(); err != nil {
		proc.close()
		return nil, err
	}
	if err := t.interrupted(); err != nil {
		t.Close()
		return nil, err
	}
	t.sweepHolds()
	if err := t.startWatchdog(); err != nil {
		t.warnings = append(t.warnings, fmt.Sprintf("%v: a process this tracer stops is continued by the next sqscope if this one is killed while it holds it", err))
	} else if t.watchdog != nil && t.watchdog.cmd.Process != nil {
		// this executable links libibverbs: its own watchdog is no
		// verbs process to trace host-wide
		t.hostSeen[t.watchdog.cmd.Process.Pid] = true
	}
	if opts.All {
		t.startHostScans()
	}
	err := t.attachAll()
	if ierr := t.interrupted(); ierr != nil {
		err = ierr // what failed after the interruption is its doing
	}
	if err != nil {
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
		{"follow", boolKnob(t.following())},
		{"stop_target_exec", boolKnob(t.opts.PID != 0 && t.opts.Child == nil)},
		{"stop_on_new", stopKnob},
		{"targ_mode", bpfMode(t.opts.Mode)},
		{"call_times", boolKnob(t.opts.CallTimes)},
		{"use_thread_slots", boolKnob(!t.opts.noThreadSlots)},
		{"max_wrs", bound(t.opts.MaxWRs, bpf.MaxWRs)},
		{"max_sges", bound(t.opts.MaxSGEs, bpf.MaxSGEs)},
		{"max_wcs", bound(t.opts.MaxWCs, bpf.MaxWCs)},
		{"wakeup_bytes", uint64(t.opts.RingBytes / 4)},
		{"hold_tracer", t.hold.tracer},
		{"self_start", t.hold.start},
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

	// the holds map every sqscope shares (holds.go), or this one's own
	var copts *ebpf.CollectionOptions
	if stop && t.opts.privateHolds {
		t.holdsPrivate = errors.New("private holds asked for")
	} else if stop {
		shared, err := openSharedHolds(spec.Maps[bpf.VerbsMapSqHoldsV1])
		if err != nil {
			t.holdsPrivate = err
		} else {
			defer shared.Close() // the collection holds a clone
			copts = &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{bpf.VerbsMapSqHoldsV1: shared}}
		}
	}
	t.uprobes.perfEvent = t.opts.perfEventUprobes
	loadAll := func() error {
		return t.uprobes.Load(spec, func() error { return spec.LoadAndAssign(&t.objs, copts) })
	}
	// The data-path probes keep per-thread state in task storage, which
	// uprobe programs may use on recent kernels only; elsewhere they keep
	// it in a hash by thread id (a few tens of ns more per call). The
	// error reported is the first one.
	// The hash by thread id holds no state while task storage does: it
	// gets its room (16,384 threads' state, megabytes) only with the
	// fallback.
	byTID := spec.Maps["threads_by_tid"]
	if byTID == nil {
		return errors.New("BPF object has no map threads_by_tid")
	}
	tidEntries := byTID.MaxEntries
	if t.opts.noTaskStorage {
		if err := hashThreadState(spec, tidEntries); err != nil {
			return err
		}
	} else {
		byTID.MaxEntries = 1
	}
	err = loadAll()
	if err != nil && !t.opts.noTaskStorage {
		if herr := hashThreadState(spec, tidEntries); herr != nil {
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
// storage to the hash by thread id, of tidEntries threads.
func hashThreadState(spec *ebpf.CollectionSpec, tidEntries uint32) error {
	vs, ok := spec.Variables["have_task_storage"]
	if !ok {
		return errors.New("BPF object has no knob have_task_storage")
	}
	if err := vs.Set(uint8(0)); err != nil {
		return fmt.Errorf("setting BPF knob have_task_storage: %w", err)
	}
	spec.Maps["threads_by_tid"].MaxEntries = tidEntries
	// unused now, but a map the kernel may not know must not fail the load
	m := spec.Maps["threads"]
	m.Type, m.Flags, m.MaxEntries = ebpf.Hash, 0, 1
	return nil
}

// bpfMode is the programs' targ_mode for a mode: the sentinel's
// escalation windows record as events mode does.
func bpfMode(m Mode) uint8 {
	if m == ModeCounters {
		return uint8(ModeCounters)
	}
	return uint8(ModeEvents)
}

// boolKnob is a flag as the BPF side's __u8 knobs take it.
func boolKnob(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
