package probe

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sqscope/sqscope/trace"
)

// The sentinel mode reads each QP's send-queue counters from its
// process's memory, where the provider keeps them and says where
// (sqLayoutSymbol): the target takes no trap and is not stopped
// (process_vm_readv copies the words while it runs). What it gives
// between windows is the occupancy the provider's SQ-full check sees, and
// every WR posted, traced or not (trace.SQSample).

const (
	// MemSampleEvery is how often the sentinel reads the counters.
	MemSampleEvery = 100 * time.Millisecond
	// memSampleMax bounds the QPs read per round; past it they are read
	// in turn, each less often (the samples' times say how often).
	memSampleMax = 512
	// sqLayoutSymbol names the provider's struct sqsim_sq_layout (see
	// verbs/sim.h): where a QP keeps its posted and retired counts.
	sqLayoutSymbol = "sqsim_sq_layout"
	sqLayoutMagic  = 0x5153534c
)

// sqLayout is where a provider's QP keeps its send queue's counters.
// With ring set (rxe), retired is not a counter: queue is the offset of
// the pointer to the ring the kernel maps (struct rxe_queue_buf, whose
// layout is the kernel's ABI), whose producer and consumer indices give
// the occupancy, and posted a count of WRs posted.
type sqLayout struct {
	posted, retired uint32 // offsets from the struct ibv_qp
	width           uint8  // bytes of each
	ring            bool
	queue           uint32
	// postedRefused: the provider counts a WR posted before its SQ-full
	// check, so the count includes the WRs a full queue refused
	postedRefused bool
	// cqErrors: the offset of the QP's count of its send CQ's overruns
	// (8 bytes), 0 where the provider keeps none
	cqErrors uint32
	// signaled, cqesPolled: the offsets of the QP's counts of signaled
	// WRs posted and of send completions polled (8 bytes each), 0 where
	// the provider keeps none
	signaled, cqesPolled uint32
	// cqRing: the send CQ is a ring read as the send queue's is (rxe,
	// memcq.go)
	cqRing bool
}

// rxeLayout is librxe's of rdma-core 44 (providers/rxe/rxe.h: struct
// rxe_qp's sq.queue and ssn, the send sequence number every WR posted
// takes, past a struct verbs_qp of that release's struct ibv_qp_ex).
// Another release may move them: each QP's ring is checked before it is
// read (readRing), and a QP whose check fails is not read. librxe takes
// the number in init_send_wqe, before its full-ring check.
var rxeLayout = sqLayout{posted: 0x1c0, width: 4, ring: true, queue: 0x1a8, postedRefused: true, cqRing: true}

// The ring's header (struct rxe_queue_buf, include/uapi/rdma/rdma_user_rxe.h).
const (
	rxeIndexMaskOff = 4
	rxeProducerOff  = 128
	rxeConsumerOff  = 256
)

// readSQLayout reads the layout a provider's file states in its
// sqLayoutSymbol; an error says why there is none.
func readSQLayout(path string) (sqLayout, error) {
	f, err := elf.Open(path)
	if err != nil {
		return sqLayout{}, err
	}
	defer f.Close()
	syms, _ := f.Symbols() // none is no error: .dynsym may have it
	dyn, _ := f.DynamicSymbols()
	for _, s := range append(syms, dyn...) {
		if s.Name != sqLayoutSymbol || int(s.Section) >= len(f.Sections) || s.Section == elf.SHN_UNDEF {
			continue
		}
		sec := f.Sections[s.Section]
		if s.Value < sec.Addr || s.Size < 20 {
			return sqLayout{}, fmt.Errorf("%s is %d bytes: not a layout this sqscope reads", sqLayoutSymbol, s.Size)
		}
		// 20 bytes, 24 with the CQ errors' offset, 32 with the signaled
		// counts'; more is a later layout's, whose first 32 bytes mean
		// the same
		b := make([]byte, min(s.Size, 32))
		if _, err := sec.ReadAt(b, int64(s.Value-sec.Addr)); err != nil {
			return sqLayout{}, fmt.Errorf("reading %s: %v", sqLayoutSymbol, err)
		}
		le := binary.LittleEndian
		l := sqLayout{posted: le.Uint32(b[8:]), retired: le.Uint32(b[12:]), width: uint8(le.Uint32(b[16:]))}
		if len(b) >= 24 && le.Uint32(b[4:]) >= 24 {
			l.cqErrors = le.Uint32(b[20:])
		}
		if len(b) >= 32 && le.Uint32(b[4:]) >= 32 {
			l.signaled, l.cqesPolled = le.Uint32(b[24:]), le.Uint32(b[28:])
		}
		if le.Uint32(b) != sqLayoutMagic || le.Uint32(b[4:]) < 20 || (l.width != 4 && l.width != 8) {
			return sqLayout{}, fmt.Errorf("%s holds no layout this sqscope reads", sqLayoutSymbol)
		}
		return l, nil
	}
	return sqLayout{}, errors.New("the provider states no layout of its send queue")
}

// memQP is a QP whose counters are read.
type memQP struct {
	num           uint32
	lib           string
	depth         uint32 // max_send_wr, 0 when not known
	posted, retir uint64 // last read, to send only what changed
	cqErrors      uint64
	sig           sigCounts
	sendCQ        uint64 // the address of its send CQ
	cqFill        uint32 // its send CQ's ring at the last read (rxe)
	read          bool
	rxeRing       // its ring (rxe); bad: it failed the check, not read
}

// memSampler reads the counters of the QPs the trace saw created or
// found.
type memSampler struct {
	mu      sync.Mutex
	qps     map[pidAddr]*memQP
	layouts map[string]*layoutResult
	next    int // where the next round starts, past memSampleMax
	// said: the processes and files whose QPs are not read, said once
	said map[pidFile]bool
	// cqs: the send CQs whose rings are read (memcq.go); rounds counts
	// the rounds, each CQ read once in one
	cqs    map[pidAddr]*memCQ
	rounds uint64
}

type pidFile struct {
	pid  uint32
	file string
}

type layoutResult struct {
	l   sqLayout
	err error
}

func newMemSampler() *memSampler {
	return &memSampler{qps: map[pidAddr]*memQP{}, layouts: map[string]*layoutResult{}, said: map[pidFile]bool{},
		cqs: map[pidAddr]*memCQ{}}
}

// note follows the QPs' lives from the events the tracer delivers.
func (m *memSampler) note(ev trace.Event) {
	switch e := ev.(type) {
	case *trace.QPCreate:
		lib := e.Lib
		if lib == "" && strings.HasPrefix(e.Via, "sqsim_") {
			// the simulated HCA's create, its post_send not located: the
			// HCA is in the executable (a QP of another provider is never
			// read with its layout)
			lib, _ = os.Readlink(ProcDir(int(e.PID)) + "/exe")
		}
		if lib != "" && e.QP != 0 {
			m.mu.Lock()
			m.qps[pidAddr{e.PID, e.QP}] = &memQP{num: e.QPNum, lib: lib, depth: e.Caps.MaxSendWR, sendCQ: e.SendCQ}
			m.mu.Unlock()
		}
	case *trace.QPDestroy:
		if e.Ret == 0 {
			m.mu.Lock()
			delete(m.qps, pidAddr{e.PID, e.QP})
			m.mu.Unlock()
		}
	case *trace.Exit:
		m.forget(e.PID)
	}
}

func (m *memSampler) forget(pid uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.qps {
		if k.pid == pid {
			delete(m.qps, k)
		}
	}
	for k := range m.said {
		if k.pid == pid {
			delete(m.said, k)
		}
	}
	for k := range m.cqs {
		if k.pid == pid {
			delete(m.cqs, k)
		}
	}
}

// layout is the layout of lib as process pid maps it, read once per file.
func (m *memSampler) layout(pid uint32, lib string) *layoutResult {
	if r := m.layouts[lib]; r != nil {
		return r
	}
	var l sqLayout
	var err error
	if strings.HasPrefix(filepath.Base(lib), "librxe-") {
		l = rxeLayout
	} else if l, err = readSQLayout(ProcDir(int(pid)) + "/root" + lib); errors.Is(err, os.ErrNotExist) {
		l, err = readSQLayout(lib)
	}
	r := &layoutResult{l: l, err: err}
	m.layouts[lib] = r
	return r
}

// round reads up to memSampleMax QPs and returns what changed since
// their last read, and the processes with a QP whose send CQ overran
// since, or was read full (to be traced in full).
func (m *memSampler) round() (out []trace.Event, overran []uint32) {
	m.rounds++
	type entry struct {
		k pidAddr
		q *memQP
	}
	m.mu.Lock()
	qps := make([]entry, 0, len(m.qps))
	for k, q := range m.qps {
		qps = append(qps, entry{k, q})
	}
	m.mu.Unlock()
	if len(qps) > memSampleMax {
		// in turn, in a set order
		sort.Slice(qps, func(i, j int) bool {
			a, b := qps[i].k, qps[j].k
			return a.pid < b.pid || a.pid == b.pid && a.addr < b.addr
		})
		start := m.next % len(qps)
		qps = append(qps[start:], qps[:start]...)[:memSampleMax]
		m.next = start + memSampleMax
	}
	gone := map[uint32]bool{}
	for _, e := range qps {
		k, q := e.k, e.q
		if gone[k.pid] || q.bad {
			continue
		}
		lr := m.layout(k.pid, q.lib)
		if lr.err != nil {
			out = m.notRead(out, k.pid, q.lib, lr.err.Error())
			continue
		}
		var posted, retired, cqErrors uint64
		var sig sigCounts
		var capacity uint32
		var err error
		if lr.l.ring {
			posted, retired, capacity, err = readRing(int(k.pid), k.addr, lr.l, q)
		} else {
			posted, retired, cqErrors, sig, err = readCountersHeld(int(k.pid), k.addr, lr.l, q.depth)
		}
		switch {
		case errors.Is(err, unix.ESRCH):
			gone[k.pid] = true
			m.forget(k.pid)
			continue
		case err != nil && q.bad: // its ring failed the check
			out = m.notRead(out, k.pid, q.lib, err.Error()+" (the layout sqscope carries is rdma-core 44's)")
			continue
		case err != nil: // the QP's memory went (a destroy not yet read)
			continue
		}
		var cq *memCQ
		if lr.l.cqRing && q.sendCQ != 0 {
			var full bool
			if cq, full = m.sendCQ(k.pid, q.sendCQ); full && !slices.Contains(overran, k.pid) {
				overran = append(overran, k.pid)
			}
			if cq.bad && cq.err != nil {
				out = m.notRead(out, k.pid, q.lib+" (send CQ)", cq.err.Error()+" (the layout sqscope carries is rdma-core 44's)")
			}
			if cq.bad || cq.err != nil {
				cq = nil
			}
		}
		var cqFill uint32
		if cq != nil {
			cqFill = cq.fill
		}
		if q.read && posted == q.posted && retired == q.retir && cqErrors == q.cqErrors && sig == q.sig && cqFill == q.cqFill {
			continue
		}
		if cqErrors > q.cqErrors && !slices.Contains(overran, k.pid) {
			overran = append(overran, k.pid)
		}
		q.read, q.posted, q.retir, q.cqErrors, q.sig, q.cqFill = true, posted, retired, cqErrors, sig, cqFill
		s := &trace.SQSample{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: k.pid},
			QP: k.addr, QPNum: q.num, Posted: posted, Retired: retired, Width: lr.l.width, Capacity: capacity,
			PostedCountsRefused: lr.l.postedRefused, CQErrors: cqErrors, CQErrorsRead: lr.l.cqErrors != 0,
			SignaledRead: sig.read, Signaled: sig.posted, SendCQEsPolled: sig.polled}
		if cq != nil {
			s.CQRingRead, s.CQFill, s.CQCapacity = true, cq.fill, cq.capacity
		}
		out = append(out, s)
	}
	return out, overran
}

// notRead appends, once per process and file, the record that its QPs
// of that provider file are not read, and why.
func (m *memSampler) notRead(out []trace.Event, pid uint32, lib, why string) []trace.Event {
	k := pidFile{pid, lib}
	m.mu.Lock()
	said := m.said[k]
	m.said[k] = true
	m.mu.Unlock()
	if said {
		return out
	}
	return append(out, &trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
		Func: trace.FuncMemoryRead, Path: lib, Err: why})
}

// word is n bytes (of a little-endian value) at address from of another
// process, to be read into to.
type word struct {
	to   unsafe.Pointer
	from uint64
	n    int
}

// readWords reads the words of process pid in their order, in one call.
func readWords(pid int, ws ...word) error {
	local, remote := make([]unix.Iovec, len(ws)), make([]unix.RemoteIovec, len(ws))
	total := 0
	for i, w := range ws {
		local[i] = unix.Iovec{Base: (*byte)(w.to), Len: uint64(w.n)}
		remote[i] = unix.RemoteIovec{Base: uintptr(w.from), Len: w.n}
		total += w.n
	}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err == nil && n != total {
		err = fmt.Errorf("read %d bytes of %d", n, total)
	}
	return err
}

// readCounters reads a QP's posted count, its retired count, then its
// posted count again (process_vm_readv copies them in that order), and
// its CQ errors where the layout has them. Both counts only grow: when
// the two posted counts are equal, posted less retired is what the queue
// held when retired was read; when the target posted in between, the
// first (before) less retired is a lower bound of it, the second an
// upper one.
func readCounters(pid int, qp uint64, l sqLayout) (before, posted, retired, cqErrors uint64, sig sigCounts, err error) {
	n := int(l.width)
	ws := []word{{unsafe.Pointer(&before), qp + uint64(l.posted), n}, {unsafe.Pointer(&retired), qp + uint64(l.retired), n},
		{unsafe.Pointer(&posted), qp + uint64(l.posted), n}}
	if l.cqErrors != 0 {
		ws = append(ws, word{unsafe.Pointer(&cqErrors), qp + uint64(l.cqErrors), 8})
	}
	if l.signaled != 0 && l.cqesPolled != 0 {
		// signaled before polled: both only grow, so their difference
		// is never above what was pending when signaled was read
		sig.read = true
		ws = append(ws, word{unsafe.Pointer(&sig.posted), qp + uint64(l.signaled), 8},
			word{unsafe.Pointer(&sig.polled), qp + uint64(l.cqesPolled), 8})
	}
	err = readWords(pid, ws...)
	return before, posted, retired, cqErrors, sig, err
}

// sigCounts is a QP's count of signaled WRs posted and of its send
// completions polled, where the provider keeps them (read).
type sigCounts struct {
	read           bool
	posted, polled uint64
}

// memReadTries bounds the reads of a QP's counters in one round: a read
// during which the target posted (the two posted counts differ), or whose
// counters differ by more than the depth (the reader was preempted in the
// copy), is read again; the analyzer leaves out one still over.
const memReadTries = 3

// readCountersHeld is readCounters, read again while the target posted
// during the copy or the counters differ by more than depth (when
// known). A read the target posted during, every time, gives its first
// posted count: the queue held no less, never a value it did not hold.
func readCountersHeld(pid int, qp uint64, l sqLayout, depth uint32) (posted, retired, cqErrors uint64, sig sigCounts, err error) {
	mask := ^uint64(0)
	if l.width < 8 {
		mask = 1<<(8*uint(l.width)) - 1
	}
	var before uint64
	for range memReadTries {
		before, posted, retired, cqErrors, sig, err = readCounters(pid, qp, l)
		if err != nil {
			return posted, retired, cqErrors, sig, err
		}
		if before == posted && (depth == 0 || (posted-retired)&mask <= uint64(depth)) {
			break
		}
	}
	if before != posted && (before-retired)&mask <= (posted-retired)&mask {
		posted = before
	}
	return posted, retired, cqErrors, sig, err
}

// readRing reads a QP's count of WRs posted and its ring's consumer and
// producer indices (in that order: the occupancy read is never below the
// ring's), and gives posted, posted less the occupancy, and what the ring
// holds (its index mask: one slot of a power of two is kept empty). The ring's
// pointer is checked once: it must be in a mapping of a uverbs device,
// with an index mask of a power of two less one, no less than the depth.
func readRing(pid int, qp uint64, l sqLayout, q *memQP) (posted, retired uint64, capacity uint32, err error) {
	var ring uint64
	var ssn uint32
	if err := readWords(pid, word{unsafe.Pointer(&ring), qp + uint64(l.queue), 8},
		word{unsafe.Pointer(&ssn), qp + uint64(l.posted), 4}); err != nil {
		return 0, 0, 0, err
	}
	// consumer first: the occupancy read is never below the ring's
	mask, prod, cons, err := q.indices(pid, ring, q.depth, false, "ring")
	if err != nil {
		return 0, 0, 0, err
	}
	occ := (prod - cons) & mask
	return uint64(ssn), uint64(ssn - occ), mask, nil
}

// rxeRing is a ring the kernel maps to user space (struct rxe_queue_buf,
// the kernel's ABI) as a provider structure points to it: the pointer is
// checked once (in a mapping of a uverbs device) and must not move, and
// each read's index mask must be a power of two less one, no less than
// the depth, both indices within it. A ring that fails is bad: not read
// again.
type rxeRing struct {
	ring uint64 // the pointer, once checked
	bad  bool
}

// indices checks ptr, the ring's pointer as just read, and reads the ring's
// index mask and its producer and consumer indices, the producer first
// when prodFirst (the fill read is then never above the ring's at any one
// time; else never below); what names the ring in errors.
func (r *rxeRing) indices(pid int, ptr uint64, depth uint32, prodFirst bool, what string) (mask, prod, cons uint32, err error) {
	if r.ring == 0 {
		if !inDeviceMapping(pid, ptr) {
			r.bad = true
			return 0, 0, 0, fmt.Errorf("the %s's pointer is not in a uverbs mapping", what)
		}
		r.ring = ptr
	} else if ptr != r.ring {
		r.bad = true
		return 0, 0, 0, fmt.Errorf("the %s's pointer moved", what)
	}
	first, second := word{unsafe.Pointer(&cons), ptr + rxeConsumerOff, 4}, word{unsafe.Pointer(&prod), ptr + rxeProducerOff, 4}
	if prodFirst {
		first, second = second, first
	}
	if err := readWords(pid, word{unsafe.Pointer(&mask), ptr + rxeIndexMaskOff, 4}, first, second); err != nil {
		return 0, 0, 0, err
	}
	if mask == 0 || mask&(mask+1) != 0 || mask < depth || prod > mask || cons > mask {
		r.bad = true
		return 0, 0, 0, fmt.Errorf("%s index mask %#x, producer %d, consumer %d: not a ring", what, mask, prod, cons)
	}
	return mask, prod, cons, nil
}

// inDeviceMapping says whether addr is in a mapping of a uverbs device of
// process pid (where the kernel maps a ring to user space).
func inDeviceMapping(pid int, addr uint64) bool {
	maps, err := readMaps(pid)
	if err != nil {
		return false
	}
	for _, m := range maps {
		if addr >= m.Start && addr < m.End {
			return strings.HasPrefix(m.Path, "/dev/infiniband/uverbs")
		}
	}
	return false
}

// runMemSampler reads the counters every MemSampleEvery until ctx ends,
// handing what changed to the reader.
func (t *Tracer) runMemSampler(ctx context.Context) {
	tick := time.NewTicker(MemSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		evs, overran := t.mem.round()
		if len(evs) > 0 {
			t.mu.Lock()
			t.after = append(t.after, evs...)
			t.haveUnsent.Store(true)
			t.mu.Unlock()
		}
		// a CQ overrun fails no post (the provider's error sites see
		// nothing): the process whose send CQ overran, or was read full
		// (rxe drops what comes on it then), is traced in full, as after
		// a failure
		for _, pid := range overran {
			t.Escalate(pid)
		}
	}
}
