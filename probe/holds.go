package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// Holds shared between tracers. Every sqscope of the host that stops a
// process for its probes (stop_self in bpf/output.bpf.h) first adds a hold,
// keyed by (held pid, holder tgid, tracer id), to one hash map pinned by
// name under bpffs, so that all of them load the same map. Two tracers of
// one process stop it at the same call, and both holds are in the map
// before the process stops (both uprobes run in the calling thread before
// it returns to user space, where the stop takes effect). A tracer whose
// probes are placed deletes its hold, then looks for the others' on that
// process: only when no valid one is left does it send SIGCONT. Delete
// before look: of two tracers finishing together, at least one sees no
// hold but its own gone and continues the process (two SIGCONTs do no
// harm). A hold is valid while its holder lives (same pid, same start time)
// and for holdMax at most, so a tracer killed, crashed or hung never keeps
// a process stopped: the next release of that process, a tracer's periodic
// sweep or the next sqscope to start drops the stale hold and continues it.
//
// Without bpffs (or with a map of another definition at the pin path) the
// map is this tracer's own and a release always continues the process, as
// before; heldcheck.go then says when another tracer's SIGCONT came first.

const (
	// bpffsRoot is where bpffs is mounted, and mounted by sqscope when it
	// is not; holdsDir is sqscope's directory in it.
	bpffsRoot = "/sys/fs/bpf"
	holdsDir  = bpffsRoot + "/sqscope"
	// holdMax: a tracer places the probes a record revealed within
	// milliseconds; a hold older than this is of a tracer that is not
	// reading (suspended, hung), and the process is not kept for it.
	holdMax = 5 * time.Second
)

// holdSeq numbers the tracers of this process, so that each has its own
// holds.
var holdSeq atomic.Uint64

// holdID is one tracer's identity in the holds map.
type holdID struct {
	tgid   uint32
	tracer uint64
	start  uint64 // this process's start time (/proc/PID/stat)
}

func newHoldID() holdID {
	self := os.Getpid()
	start, _ := procStart(self)
	return holdID{tgid: uint32(self), tracer: holdSeq.Add(1), start: start}
}

// openSharedHolds opens the pinned holds map, creating (and pinning) it
// when no sqscope has yet, after mounting bpffs if it is not mounted.
func openSharedHolds(spec *ebpf.MapSpec) (*ebpf.Map, error) {
	if err := ensureBpffs(); err != nil {
		return nil, err
	}
	if err := os.Mkdir(holdsDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", holdsDir, err)
	}
	if st, err := os.Lstat(holdsDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", holdsDir)
	}
	s := spec.Copy()
	s.Pinning = ebpf.PinByName
	var err error
	for range 2 { // a second try when another sqscope pinned it meanwhile
		var m *ebpf.Map
		m, err = ebpf.NewMapWithOptions(s, ebpf.MapOptions{PinPath: holdsDir})
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, os.ErrExist) {
			break
		}
	}
	return nil, fmt.Errorf("the shared holds map %s: %w", filepath.Join(holdsDir, s.Name), err)
}

// ensureBpffs mounts bpffs at bpffsRoot unless one is there. It mounts
// only on an empty directory, so that it hides nothing.
func ensureBpffs() error {
	var st unix.Statfs_t
	if err := unix.Statfs(bpffsRoot, &st); err != nil {
		return fmt.Errorf("%s: %w", bpffsRoot, err)
	}
	if st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	ents, err := os.ReadDir(bpffsRoot)
	if err != nil {
		return fmt.Errorf("%s: %w", bpffsRoot, err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not a bpf filesystem and not empty: not mounting one there", bpffsRoot)
	}
	if err := unix.Mount("bpf", bpffsRoot, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mounting bpffs at %s: %w", bpffsRoot, err)
	}
	return nil
}

// statFields are the fields of /proc/PID/stat from field 3, the state, on
// (the command name before them may hold spaces and parentheses).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return f, nil
}

// procStart is field 22 of /proc/PID/stat, the process's start time in
// clock ticks after boot: with the pid, it names one process for good.
func procStart(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// holdValid says whether a hold still keeps its process: its holder is the
// same process as when it took it, and it is younger than holdMax.
func holdValid(k bpf.VerbsSqHoldKey, v bpf.VerbsSqHold, now uint64) bool {
	if now > v.Ts && now-v.Ts > uint64(holdMax) {
		return false
	}
	start, err := procStart(int(k.Holder))
	if err != nil {
		return false // gone
	}
	st, _ := statState(fmt.Sprintf("/proc/%d/stat", k.Holder))
	if st == 'Z' || st == 'X' {
		return false
	}
	return v.HolderStart == 0 || start == v.HolderStart
}

// holdEntry is one entry of the holds map.
type holdEntry struct {
	k bpf.VerbsSqHoldKey
	v bpf.VerbsSqHold
}

// holdEntries reads the holds map whole (it is small: a hold lasts
// milliseconds).
func holdEntries(m *ebpf.Map) []holdEntry {
	var out []holdEntry
	var e holdEntry
	it := m.Iterate()
	for it.Next(&e.k, &e.v) {
		out = append(out, e)
	}
	return out
}

// settle waits, until deadline at most, for the thread that stopped pid
// (tid) to be stopped. Every tracer's probe at the call that stopped it has
// then run, and so every tracer's hold is in: a thread preempted between
// two tracers' programs would otherwise let the first tracer find no other
// hold. Usually it is stopped long before and this is one read.
func settle(pid, tid int, deadline time.Time) {
	path := fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid)
	for {
		st, err := statState(path)
		if err != nil || st == 'T' || st == 't' || st == 'Z' || st == 'X' || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// scanHold marks the holds of a tracer's memory scans in the key's tracer
// field: a hold of their own, beside the one its programs take when a
// record stops the same process, so that neither release continues the
// process while the other still holds it.
const scanHold = uint64(1) << 63

// takeScanHold adds this tracer's scan hold on pid before it stops pid
// itself (the memory scan of a running process), so that no other release
// (another tracer's, or this one's of a record's stop) continues pid while
// the scan's probes are being placed; dropScanHold takes it back when the
// stop was not sent, releaseScanHold once they are placed.
func (t *Tracer) takeScanHold(pid int) {
	if m := t.objs.SqHoldsV1; m != nil {
		m.Put(t.scanHoldKey(pid), bpf.VerbsSqHold{HolderStart: t.hold.start, Ts: trace.MonotonicNS()})
	}
}

func (t *Tracer) dropScanHold(pid int) {
	if m := t.objs.SqHoldsV1; m != nil {
		m.Delete(t.scanHoldKey(pid))
	}
}

func (t *Tracer) releaseScanHold(pid int) bool { return t.release(pid, t.scanHoldKey(pid)) }

// scanHoldKey is this tracer's scan hold on pid.
func (t *Tracer) scanHoldKey(pid int) bpf.VerbsSqHoldKey {
	k := t.holdKey(pid)
	k.Tracer |= scanHold
	return k
}

// holdOf reports whether k is a hold of the tracer (tgid, tracer): its
// programs' or its scans'.
func holdOf(k bpf.VerbsSqHoldKey, tgid uint32, tracer uint64) bool {
	return k.Holder == tgid && k.Tracer&^scanHold == tracer
}

// holdIn reports whether this tracer's hold on pid (its programs') is in
// the holds map: only a release past holdMax takes it out before this
// tracer releases it.
func (t *Tracer) holdIn(pid int) bool {
	m := t.objs.SqHoldsV1
	if m == nil {
		return true
	}
	var v bpf.VerbsSqHold
	return m.Lookup(t.holdKey(pid), &v) == nil
}

// holdKey is this tracer's hold on pid.
func (t *Tracer) holdKey(pid int) bpf.VerbsSqHoldKey {
	return bpf.VerbsSqHoldKey{Pid: uint32(pid), Holder: t.hold.tgid, Tracer: t.hold.tracer}
}

// releaseHold ends this tracer's hold on pid and continues pid unless
// another tracer's valid hold is left (dropping the stale ones it finds).
// It reports whether pid was continued.
func (t *Tracer) releaseHold(pid int) bool { return t.release(pid, t.holdKey(pid)) }

// release ends the hold k on pid and continues pid unless another valid
// hold is left; it reports whether pid was continued.
func (t *Tracer) release(pid int, k bpf.VerbsSqHoldKey) bool {
	m := t.objs.SqHoldsV1
	if m == nil {
		syscall.Kill(pid, syscall.SIGCONT)
		return true
	}
	m.Delete(k)
	if heldByOther(m, pid) {
		return false
	}
	syscall.Kill(pid, syscall.SIGCONT)
	return true
}

// heldByOther says whether pid has a valid hold in m; it deletes the
// stale ones it finds.
func heldByOther(m *ebpf.Map, pid int) bool {
	now := trace.MonotonicNS()
	held := false
	for _, e := range holdEntries(m) {
		if e.k.Pid != uint32(pid) {
			continue
		}
		if holdValid(e.k, e.v, now) {
			held = true
		} else {
			m.Delete(e.k)
		}
	}
	return held
}

// sweepHolds drops the stale holds of the map (of every tracer) and
// continues each process that has no valid hold left: a tracer killed
// while it held a process leaves it stopped only until another sqscope
// starts or sweeps. A held process that has ended takes its holds with it.
func (t *Tracer) sweepHolds() {
	m := t.objs.SqHoldsV1
	if m == nil {
		return
	}
	now := trace.MonotonicNS()
	entries := holdEntries(m)
	stale := map[uint32]bool{}
	for _, e := range entries {
		if holdOf(e.k, t.hold.tgid, t.hold.tracer) {
			continue // this tracer's own: released when handled
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", e.k.Pid)); err != nil {
			m.Delete(e.k)
			continue
		}
		if !holdValid(e.k, e.v, now) {
			m.Delete(e.k)
			stale[e.k.Pid] = true
		}
	}
	for pid := range stale {
		if !heldByOther(m, int(pid)) {
			syscall.Kill(int(pid), syscall.SIGCONT)
		}
	}
}

// releaseAllHolds releases every hold this tracer still has (closing).
func (t *Tracer) releaseAllHolds() {
	m := t.objs.SqHoldsV1
	if m == nil {
		return
	}
	for _, e := range holdEntries(m) {
		if holdOf(e.k, t.hold.tgid, t.hold.tracer) {
			t.release(int(e.k.Pid), e.k)
		}
	}
}
