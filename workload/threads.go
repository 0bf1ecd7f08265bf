package workload

/*
#include <stdlib.h>
#include "loop.h"
#include "../verbs/wrbuild.h"
*/
import "C"

import (
	"fmt"
	"math/bits"
	"syscall"
	"unsafe"

	"github.com/sqscope/sqscope/verbs"
)

// MaxQPs is the most QPs one run creates (--qps).
const MaxQPs = 4096

// CQTruth is a send CQ's ground truth, on the QPs that complete on it: its
// address in the process (as a trace names the CQ) and its counters.
type CQTruth struct {
	Addr uint64 `json:"addr"`
	verbs.CQCounters
}

// SRQTruth is a shared receive queue's ground truth.
type SRQTruth struct {
	Addr uint64 `json:"addr"`
	verbs.SRQCounters
}

// threadsOf is the threads the run uses: one per QP unless --threads.
func (c *Config) threadsOf() int {
	if c.Threads == 0 {
		return c.QPs
	}
	return c.Threads
}

// threadQPs is the QP indexes [first, end) thread t of threads posts to:
// the QPs spread evenly, in blocks.
func threadQPs(t, qps, threads int) (first, end int) {
	return t * qps / threads, (t + 1) * qps / threads
}

// threadOf is the thread QP index i belongs to.
func threadOf(i, qps, threads int) int {
	for t := range threads {
		if _, end := threadQPs(t, qps, threads); i < end {
			return t
		}
	}
	return threads - 1
}

// sharedObjs are each thread's shared send CQ and SRQ, when asked for.
type sharedObjs struct {
	dev  verbs.SharedDevice
	cqs  []*verbs.CQ
	srqs []*verbs.SRQ
}

func newShared(cfg Config, dev verbs.Device, threads int) (*sharedObjs, error) {
	s := &sharedObjs{}
	if !cfg.SharedCQ && !cfg.SRQ {
		return s, nil
	}
	sd, ok := dev.(verbs.SharedDevice)
	if !ok {
		return nil, fmt.Errorf("--shared-cq and --srq are supported on the simulated HCA only; the %s backend creates a CQ and an RQ per QP", dev.Name())
	}
	s.dev = sd
	for t := range threads {
		first, end := threadQPs(t, cfg.QPs, threads)
		n := uint64(end - first)
		if cfg.SharedCQ {
			// room for every WR each SQ holds, as a CQ of its own has
			depth := uint64(cfg.CQDepth)
			if depth == 0 {
				depth = min(n*(uint64(cfg.TxDepth)*4+16), 4194304)
			}
			cq, err := sd.NewCQ(uint32(depth), cfg.CQEx)
			if err != nil {
				return nil, err
			}
			s.cqs = append(s.cqs, cq)
		}
		if cfg.SRQ {
			// a receive for every SEND the thread's SQs hold, within
			// the HCA's limit
			srq, err := sd.NewSRQ(uint32(min(n*uint64(cfg.TxDepth), 16383)), int(cfg.Size)*4+4096)
			if err != nil {
				return nil, err
			}
			s.srqs = append(s.srqs, srq)
		}
	}
	return s, nil
}

// of is thread t's shared CQ and SRQ (nil when not shared).
func (s *sharedObjs) of(t int) (*verbs.CQ, *verbs.SRQ) {
	var cq *verbs.CQ
	var srq *verbs.SRQ
	if t < len(s.cqs) {
		cq = s.cqs[t]
	}
	if t < len(s.srqs) {
		srq = s.srqs[t]
	}
	return cq, srq
}

// lane is one QP's part of a thread's run.
type lane struct {
	idx          int
	fault        Fault
	size, nsge   uint32
	inline       bool
	params       C.struct_wl_params
	stampsLen    uint64
	stampsMemory unsafe.Pointer
}

// newLane sets QP idx's traffic parameters; what the application posts
// in the end is the fault shape when the fault runs from the start.
func newLane(cfg Config, ep *verbs.Endpoint, idx int, healthy, faulty shape) lane {
	l := lane{idx: idx, fault: cfg.Fault}
	if cfg.FaultQP >= 0 && cfg.FaultQP != idx {
		l.fault = FaultNone
	}
	l.size, l.inline, l.nsge = healthy.size, healthy.inline, healthy.sge
	if l.fault != FaultNone && cfg.FaultAfter == 0 {
		l.size, l.inline, l.nsge = faulty.size, faulty.inline, faulty.sge
	}
	p := &l.params
	p.api_wr = boolInt(cfg.API == "wr")
	for i, op := range cfg.Opcodes {
		p.opcodes[i] = C.int(op)
	}
	p.n_opcodes = C.uint32_t(len(cfg.Opcodes))
	p.size = C.uint32_t(healthy.size)
	p.use_inline = boolInt(healthy.inline)
	p.num_sge = C.uint32_t(healthy.sge)
	p.f_size = C.uint32_t(faulty.size)
	p.f_inline = boolInt(faulty.inline)
	p.f_num_sge = C.uint32_t(faulty.sge)
	p.fault_after_ns = C.uint64_t(cfg.FaultAfter.Nanoseconds())
	p.cq_mod = C.uint32_t(cfg.CQMod)
	p.post_list = C.uint32_t(cfg.PostList)
	p.iters = C.uint64_t(cfg.Iters)
	p.duration_ns = C.uint64_t(cfg.Duration.Nanoseconds())
	p.poll_batch = C.uint32_t(cfg.PollBatch)
	p.rate = C.uint64_t(cfg.Rate)
	p.fault = C.int(l.fault)
	p.lazy_poll = C.uint32_t(cfg.LazyPoll)
	p.drain_ns = C.uint64_t(cfg.DrainTimeout.Nanoseconds())
	// never-signal and lazy-poll drop this limit while active: the buggy
	// application trusts its SQ to never fill
	p.tx_depth = C.uint32_t(min(cfg.TxDepth, ep.Caps.MaxSendWR))
	l.stampsLen = uint64(1) << bits.Len64(uint64(ep.Caps.MaxSendWR)+uint64(cfg.PostList))
	p.stamp_mask = C.uint64_t(l.stampsLen - 1)
	return l
}

// runThread runs QPs [first, end) on one thread (wl_run_group) and fills
// their results.
func runThread(cfg Config, dev verbs.Device, eps []*verbs.Endpoint, shapes []shape, healthy shape,
	first, end int, shared *sharedObjs, out []QPResult) error {
	n := end - first
	lanes := make([]lane, n)
	cEPs := (*[MaxQPs]*C.struct_sq_endpoint)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
	cParams := (*[MaxQPs]C.struct_wl_params)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_wl_params{}))))
	cRes := (*[MaxQPs]C.struct_wl_result)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_wl_result{}))))
	cStamps := (*[MaxQPs]*C.uint64_t)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer func() {
		for i := range n {
			C.free(unsafe.Pointer(cStamps[i]))
		}
		C.free(unsafe.Pointer(cEPs))
		C.free(unsafe.Pointer(cParams))
		C.free(unsafe.Pointer(cRes))
		C.free(unsafe.Pointer(cStamps))
	}()
	if cEPs == nil || cParams == nil || cRes == nil || cStamps == nil {
		return syscall.ENOMEM
	}
	for i := range n {
		idx := first + i
		lanes[i] = newLane(cfg, eps[idx], idx, healthy, shapes[idx])
		cEPs[i] = (*C.struct_sq_endpoint)(eps[idx].Ptr())
		cParams[i] = lanes[i].params
		cStamps[i] = (*C.uint64_t)(C.calloc(C.size_t(lanes[i].stampsLen), 8))
		if cStamps[i] == nil {
			return syscall.ENOMEM
		}
	}
	rc := C.wl_run_group(C.int(n), &cEPs[0], &cParams[0], &cRes[0], &cStamps[0], boolInt(cfg.SharedCQ))
	if rc != 0 {
		return fmt.Errorf("QPs %d..%d traffic loop: %w", first, end-1, syscall.Errno(rc))
	}
	for i := range n {
		out[first+i] = laneResult(cfg, dev, eps[first+i], &lanes[i], &cRes[i], shared)
	}
	return nil
}

// laneResult is a QP's outcome from its loop's counts and the device's.
func laneResult(cfg Config, dev verbs.Device, ep *verbs.Endpoint, l *lane, r *C.struct_wl_result, shared *sharedObjs) QPResult {
	app := AppCounters{
		Attempts: uint64(r.attempts), WRs: uint64(r.wrs), PostCalls: uint64(r.post_calls),
		Doorbells: uint64(r.doorbells), Inline: uint64(r.inline_wrs), Signaled: uint64(r.signaled),
		CQEsPolled: uint64(r.cqes), CQEErrors: uint64(r.cqe_errors), Polls: uint64(r.polls),
		EmptyPolls: uint64(r.empty_polls), ENOMEM: uint64(r.enomem), EINVAL: uint64(r.einval),
		OtherErrors: uint64(r.other_errors), FirstErrno: int(r.first_errno), FirstErrorAt: uint64(r.first_error_at),
		PeakOutstanding: uint64(r.peak_outstanding), Undrained: uint64(r.undrained), StalledUnsignaled: uint64(r.stalled_unsignaled),
		MaxLatencyNS: uint64(r.lat_max_ns), RecvsPosted: uint64(r.recvs_posted),
		Seconds: float64(r.end_ns-r.start_ns) / 1e9, CPUSeconds: float64(r.cpu_ns) / 1e9, Stalled: r.stalled != 0,
	}
	if r.fault_start_ns != 0 {
		app.FaultStartSeconds = float64(r.fault_start_ns-r.start_ns) / 1e9
		app.FaultStartWR = uint64(r.fault_attempt)
	}
	if r.post_calls > 0 {
		app.AvgPostNS = float64(r.post_ns) / float64(r.post_calls)
	}
	if r.lat_n > 0 {
		app.AvgLatencyNS = float64(r.lat_sum_ns) / float64(r.lat_n)
	}
	if l.fault != FaultNone {
		app.Fault = l.fault.String()
	}
	q := QPResult{Index: l.idx, Caps: ep.Caps, Type: ep.Type, App: app, WRSize: l.size, InlineOn: l.inline, NumSGE: l.nsge}
	q.WRSize, q.SizesVary = localSize(cfg.Opcodes, l.size)
	c, ok := dev.Counters(ep)
	if !ok {
		q.Counters = appSideCounters(ep, app, l.fault, l.size, l.nsge)
		return q
	}
	q.Counters = c
	q.HCATruth = true
	s, ok := dev.(*verbs.Sim)
	if !ok {
		return q
	}
	if p, ok := s.PeerCounters(ep); ok {
		q.Receiver = &p
	}
	if cq, ok := s.CQCounters(ep); ok {
		q.CQ = &CQTruth{Addr: ep.CQAddr(), CQCounters: cq}
	}
	if _, srq := shared.of(threadOf(l.idx, cfg.QPs, cfg.threadsOf())); srq != nil {
		if sc, ok := s.SRQCounters(srq); ok {
			q.SRQ = &SRQTruth{Addr: srq.Addr, SRQCounters: sc}
		}
	}
	return q
}
