package workload

/*
#include <stdlib.h>
#include "loop.h"
#include "../verbs/wrbuild.h"
*/
import "C"

import (
	"encoding/json"
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
	// App: the application's own counts (a real device): its polls,
	// empty polls, completions and the depth the provider gave; what
	// only the HCA knows is left out of the JSON rather than shown as 0.
	App bool `json:"-"`
}

// cqHCAOnly are the CQ counters only the simulated HCA can know.
var cqHCAOnly = []string{"modifies", "resizes", "mod_count", "mod_period_us", "overruns"}

// MarshalJSON writes the counters and whose truth they are.
func (c CQTruth) MarshalJSON() ([]byte, error) {
	type plain CQTruth
	return truthJSON(plain(c), c.App, cqHCAOnly)
}

// SRQTruth is a shared receive queue's ground truth.
type SRQTruth struct {
	Addr uint64 `json:"addr"`
	// Filled is the receives posted to it when it was created.
	Filled uint64 `json:"filled"`
	verbs.SRQCounters
	// App: the application's own counts (a real device).
	App bool `json:"-"`
}

// MarshalJSON writes the counters and whose truth they are.
func (s SRQTruth) MarshalJSON() ([]byte, error) {
	type plain SRQTruth
	return truthJSON(plain(s), s.App, nil)
}

// truthJSON is v's JSON object with "truth" set to whose it is; an
// application's leaves out the keys of hcaOnly.
func truthJSON(v any, app bool, hcaOnly []string) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["truth"] = "hca"
	if app {
		m["truth"] = "application"
		for _, k := range hcaOnly {
			delete(m, k)
		}
	}
	return json.Marshal(m)
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
		return nil, fmt.Errorf("--shared-cq and --srq are not supported on %s", dev.Name())
	}
	s.dev = sd
	for t := range threads {
		first, end := threadQPs(t, cfg.QPs, threads)
		if cfg.SharedCQ {
			cq, err := sd.NewCQ(sharedCQDepth(cfg, dev, end-first), cfg.CQEx)
			if err != nil {
				return nil, err
			}
			s.cqs = append(s.cqs, cq)
		}
		if cfg.SRQ {
			srq, err := sd.NewSRQ(srqDepth(cfg, dev, end-first), int(cfg.Size)*4+4096)
			if err != nil {
				return nil, err
			}
			s.srqs = append(s.srqs, srq)
		}
	}
	return s, nil
}

// sharedCQDepth is the entries asked for the send CQ n QPs share: room
// for every WR each SQ holds, as a CQ of its own has (--cq-depth sets it).
func sharedCQDepth(cfg Config, dev verbs.Device, n int) uint32 {
	if cfg.CQDepth != 0 {
		return cfg.CQDepth
	}
	if !dev.Simulated() {
		// device_endpoint.c's CQ of one QP: every WR a max_send_wr rounded up
		// holds, all signaled or all flushed
		return uint32(min(uint64(n)*(2*uint64(cfg.TxDepth)+16), 4194304))
	}
	return uint32(min(uint64(n)*(uint64(cfg.TxDepth)*4+16), 4194304))
}

// srqDepth is the receives of the SRQ the peers of n QPs share: one for
// every SEND their SQs hold, within the HCA's limits (fewer make SENDs
// wait on RNR retries, which the peers' senders repeat forever).
func srqDepth(cfg Config, dev verbs.Device, n int) uint32 {
	depth := uint64(n) * uint64(cfg.TxDepth)
	if ld, ok := dev.(verbs.LimitedDevice); ok {
		// the SRQ's CQ holds every receive, with 16 to spare
		lim := ld.Limits()
		return uint32(max(min(depth, uint64(lim.MaxSRQWR), uint64(max(lim.MaxCQE-16, 1))), 1))
	}
	return uint32(min(depth, 16383))
}

// checkLimits refuses, before anything is created, a run a real device
// cannot hold: one line naming the limit. Each QP has a peer QP, its send
// CQ (or the thread's), the peer's send CQ, and the peer's receive CQ (or
// the thread's SRQ's).
func checkLimits(cfg Config, dev verbs.Device, threads int) error {
	ld, ok := dev.(verbs.LimitedDevice)
	if !ok {
		return nil
	}
	lim, name := ld.Limits(), dev.Name()
	if qps := 2 * cfg.QPs; qps > lim.MaxQP {
		return fmt.Errorf("--qps %d needs %d QPs on %s (each QP and its receiving peer), over its max_qp %d", cfg.QPs, qps, name, lim.MaxQP)
	}
	sendCQs, recvCQs := cfg.QPs, cfg.QPs
	if cfg.SharedCQ {
		sendCQs = threads
	}
	if cfg.SRQ {
		recvCQs = threads
	}
	if cqs := sendCQs + cfg.QPs + recvCQs; cqs > lim.MaxCQ {
		return fmt.Errorf("--qps %d needs %d CQs on %s (send CQs %d, the peers' send CQs %d, their receive CQs %d), over its max_cq %d",
			cfg.QPs, cqs, name, sendCQs, cfg.QPs, recvCQs, lim.MaxCQ)
	}
	if cfg.SharedCQ {
		first, end := threadQPs(0, cfg.QPs, threads) // the first thread has the fewest
		for t := range threads {
			if f, e := threadQPs(t, cfg.QPs, threads); e-f > end-first {
				first, end = f, e
			}
		}
		if depth := sharedCQDepth(cfg, dev, end-first); int64(depth) > int64(lim.MaxCQE) {
			if cfg.CQDepth != 0 {
				return fmt.Errorf("--cq-depth %d is over %s's max_cqe %d", depth, name, lim.MaxCQE)
			}
			return fmt.Errorf("a send CQ shared by %d QPs of -t %d needs %d entries, over %s's max_cqe %d: use more --threads, a smaller -t or --cq-depth",
				end-first, cfg.TxDepth, depth, name, lim.MaxCQE)
		}
	}
	if cfg.SRQ && threads > lim.MaxSRQ {
		return fmt.Errorf("--srq needs %d SRQs on %s (one per thread), over its max_srq %d", threads, name, lim.MaxSRQ)
	}
	return nil
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

// sigSlots is how many signaled WRs outstanding the traffic loop's ring
// holds before it grows: a power of two above what mlx5 holds, the depth
// and a post list; a provider that holds more (rxe) has it grow.
var sigSlots = func(maxSendWR, postList uint32) uint64 {
	return uint64(1) << bits.Len64(uint64(maxSendWR)+uint64(postList))
}

// lane is one QP's part of a thread's run.
type lane struct {
	idx        int
	fault      Fault
	size, nsge uint32
	inline     bool
	params     C.struct_wl_params
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
	if cfg.API == "direct" {
		p.direct_post = (*[0]byte)(verbs.DirectPostSend())
	}
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
	p.sig_slots = C.uint64_t(sigSlots(ep.Caps.MaxSendWR, cfg.PostList))
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
	defer func() {
		C.free(unsafe.Pointer(cEPs))
		C.free(unsafe.Pointer(cParams))
		C.free(unsafe.Pointer(cRes))
	}()
	if cEPs == nil || cParams == nil || cRes == nil {
		return syscall.ENOMEM
	}
	for i := range n {
		idx := first + i
		lanes[i] = newLane(cfg, eps[idx], idx, healthy, shapes[idx])
		cEPs[i] = (*C.struct_sq_endpoint)(eps[idx].Ptr())
		cParams[i] = lanes[i].params
	}
	rc := C.wl_run_group(C.int(n), &cEPs[0], &cParams[0], &cRes[0], boolInt(cfg.SharedCQ))
	if rc != 0 {
		return fmt.Errorf("QPs %d..%d traffic loop: %w", first, end-1, syscall.Errno(rc))
	}
	for i := range n {
		out[first+i] = laneResult(cfg, dev, eps[first+i], &lanes[i], &cRes[i], shared)
	}
	if !dev.Simulated() {
		cq, srq := shared.of(threadOf(first, cfg.QPs, cfg.threadsOf()))
		appQueueTruth(eps[first:end], out[first:end], cq, srq)
	}
	return nil
}

// appQueueTruth gives a device run's QPs the truth of their send CQ and
// SRQ from the application's own counts: every call on a thread's CQs
// and SRQ is its loop's.
func appQueueTruth(eps []*verbs.Endpoint, out []QPResult, cq *verbs.CQ, srq *verbs.SRQ) {
	cqs := appCQCounts(out, cq != nil)
	var sc verbs.SRQCounters
	if srq != nil {
		sc = appSRQCounts(out, srq.Filled())
	}
	for i := range out {
		c := CQTruth{Addr: eps[i].CQAddr(), CQCounters: cqs[i], App: true}
		c.Depth = eps[i].CQDepth()
		out[i].CQ = &c
		if srq != nil {
			out[i].SRQ = &SRQTruth{Addr: srq.Addr, Filled: uint64(srq.Filled()), SRQCounters: sc, App: true}
		}
	}
}

// appCQCounts are the polls, empty polls and completions of each QP's
// send CQ as the application counted them, the QPs being one thread's:
// a CQ of its own is polled only for its QP; a CQ they share (shared)
// was polled the times it was polled for each, and returned the
// completions each was given.
func appCQCounts(out []QPResult, shared bool) []verbs.CQCounters {
	cqs := make([]verbs.CQCounters, len(out))
	var sum verbs.CQCounters
	for i := range out {
		a := &out[i].App
		cqs[i] = verbs.CQCounters{Polls: a.Polls, EmptyPolls: a.EmptyPolls, CQEs: a.CQEsPolled}
		sum.Polls += a.Polls
		sum.EmptyPolls += a.EmptyPolls
		sum.CQEs += a.CQEsPolled
	}
	if shared {
		for i := range cqs {
			cqs[i] = sum
		}
	}
	return cqs
}

// appSRQCounts is the SRQ one thread's QPs' peers share as the
// application counted it: the filled receives it was created with and
// those reposted as their completions were polled, less the completions
// polled.
func appSRQCounts(out []QPResult, filled uint32) verbs.SRQCounters {
	posted, polled := uint64(filled), uint64(0)
	for i := range out {
		posted += out[i].App.RecvsPosted
		polled += out[i].App.RecvCQEs
	}
	return verbs.SRQCounters{Posted: posted, Outstanding: posted - polled}
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
		MaxLatencyNS: uint64(r.lat_max_ns), RecvsPosted: uint64(r.recvs_posted), RecvCQEs: uint64(r.recv_cqes),
		Seconds: float64(r.end_ns-r.start_ns) / 1e9, CPUSeconds: float64(r.cpu_ns) / 1e9, Stalled: r.stalled != 0,
	}
	if app.Seconds > 0 {
		rate := float64(app.WRs) / app.Seconds
		app.WRsPerS = &rate
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
			q.SRQ = &SRQTruth{Addr: srq.Addr, Filled: uint64(srq.Filled()), SRQCounters: sc}
		}
	}
	return q
}
