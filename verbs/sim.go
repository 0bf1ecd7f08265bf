package verbs

/*
#include <stdlib.h>
#include "sim.h"
#include "endpoint.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"github.com/sqscope/sqscope/verbs/nicmodel"
)

// SimName is the device name of the simulated HCA.
const SimName = "sim"

// NICModel is the simulated NIC's timing model (nicmodel.Model): the
// simulator runs it, and advise replays recordings through it without cgo.
type NICModel = nicmodel.Model

// DefaultNICModel returns the defaults, with the BlueFlame knobs read from
// the environment as libmlx5 reads them.
func DefaultNICModel() NICModel {
	var c C.struct_sqsim_config
	C.sqsim_default_config(&c)
	return NICModel{
		LinkGbps:  float64(c.link_gbps),
		WQENS:     uint32(c.wqe_ns),
		DMAReadNS: uint32(c.dma_read_ns),
		RTTNS:     uint32(c.rtt_ns),
		BFBufSize: uint32(c.bf_buf_size),
		PreferBF:  c.prefer_bf != 0,
		ShutUpBF:  c.shut_up_bf != 0,
	}
}

// Sim is the simulated HCA device.
type Sim struct {
	mu    sync.Mutex
	ctx   *C.struct_ibv_context
	pd    *C.struct_ibv_pd
	model NICModel
	eps   []*simEndpoint
	// shared CQs and SRQs (sim_shared.go), freed after the endpoints
	cqs  []*CQ
	srqs []*SRQ
}

type simEndpoint struct {
	ep *Endpoint
	qp *C.struct_ibv_qp
	cq *C.struct_ibv_cq
	// sharedCQ: cq is a CQ of the device's (NewCQ), not the endpoint's own
	sharedCQ bool
	mr       *C.struct_ibv_mr
	ah       *C.struct_ibv_ah
	buf      unsafe.Pointer
	// peer is the receiving end of the connection (QPConfig.Receiver)
	peer *simPeer
}

// OpenSim opens a simulated HCA with the given NIC model.
func OpenSim(m NICModel) (*Sim, error) {
	var c C.struct_sqsim_config
	C.sqsim_default_config(&c)
	c.deterministic = simFlag(m.Deterministic)
	c.prefer_bf = simFlag(m.PreferBF)
	c.shut_up_bf = simFlag(m.ShutUpBF)
	if m.BFBufSize != 0 {
		c.bf_buf_size = C.uint32_t(m.BFBufSize)
	}
	if m.LinkGbps > 0 {
		c.link_gbps = C.double(m.LinkGbps)
	}
	c.wqe_ns = C.uint32_t(m.WQENS)
	c.dma_read_ns = C.uint32_t(m.DMAReadNS)
	c.rtt_ns = C.uint32_t(m.RTTNS)
	ctx, err := C.sqsim_open_device(&c)
	if ctx == nil {
		return nil, fmt.Errorf("opening simulated HCA: %w", err)
	}
	pd, err := C.sqsim_alloc_pd(ctx)
	if pd == nil {
		C.sqsim_close_device(ctx)
		return nil, fmt.Errorf("allocating PD on sim: %w", err)
	}
	return &Sim{ctx: ctx, pd: pd, model: m}, nil
}

func (s *Sim) Name() string    { return SimName }
func (s *Sim) Simulated() bool { return true }

// Model returns the NIC model the device runs.
func (s *Sim) Model() NICModel { return s.model }

// NewEndpoint creates a QP (through sqsim_create_qp, or sqsim_create_qp_ex
// for the wr API), its CQ and a registered buffer, and moves the QP to RTS.
func (s *Sim) NewEndpoint(cfg QPConfig) (*Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return nil, errors.New("simulated HCA is closed")
	}
	if cfg.Type != RC && cfg.Type != UD {
		return nil, fmt.Errorf("creating QP on sim: unsupported QP type %v", cfg.Type)
	}
	if cfg.MaxSendSGE == 0 {
		cfg.MaxSendSGE = 1
	}
	bufSize := cfg.BufSize
	if bufSize < 4096 {
		bufSize = 4096
	}
	se := &simEndpoint{}
	ok := false
	defer func() {
		if !ok {
			s.freeEndpoint(se)
		}
	}()
	se.buf = C.calloc(1, C.size_t(bufSize))
	if se.buf == nil {
		return nil, fmt.Errorf("allocating %d B buffer: %w", bufSize, syscall.ENOMEM)
	}
	mr, err := C.sqsim_reg_mr(s.pd, se.buf, C.size_t(bufSize), C.IBV_ACCESS_LOCAL_WRITE|C.IBV_ACCESS_REMOTE_WRITE)
	if mr == nil {
		return nil, fmt.Errorf("registering buffer on sim: %w", err)
	}
	se.mr = mr
	// The CQ holds every CQE the SQ can have outstanding, unless the
	// caller asked for a depth.
	cqDepth := cfg.MaxSendWR*4 + 16
	if cfg.CQDepth != 0 {
		cqDepth = cfg.CQDepth
	}
	var cq *C.struct_ibv_cq
	var cqx *C.struct_ibv_cq_ex
	if cfg.SendCQ != nil {
		cq, cqx = cfg.SendCQ.c, cfg.SendCQ.cqx
		se.sharedCQ = true
	} else {
		cq, cqx, err = s.createCQ(uint32(cqDepth), cfg.CQEx)
	}
	if cq == nil {
		return nil, fmt.Errorf("creating CQ on sim: %w", err)
	}
	se.cq = cq

	var qp *C.struct_ibv_qp
	var caps C.struct_ibv_qp_cap
	caps.max_send_wr = C.uint32_t(cfg.MaxSendWR)
	caps.max_recv_wr = C.uint32_t(cfg.MaxRecvWR)
	caps.max_send_sge = C.uint32_t(cfg.MaxSendSGE)
	caps.max_recv_sge = 1
	caps.max_inline_data = C.uint32_t(cfg.MaxInline)
	if cfg.WRAPI || cfg.SendOps != 0 {
		var attr C.struct_ibv_qp_init_attr_ex
		attr.send_cq = cq
		attr.recv_cq = cq
		attr.cap = caps
		attr.qp_type = C.enum_ibv_qp_type(cfg.Type)
		attr.sq_sig_all = simFlag(cfg.SigAll)
		attr.comp_mask = C.IBV_QP_INIT_ATTR_PD | C.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
		attr.pd = s.pd
		ops := cfg.SendOps
		if ops == 0 {
			ops = C.IBV_QP_EX_WITH_SEND | C.IBV_QP_EX_WITH_RDMA_WRITE
		}
		attr.send_ops_flags = C.uint64_t(ops)
		qp, err = C.sqsim_create_qp_ex(s.ctx, &attr)
		caps = attr.cap
	} else {
		var attr C.struct_ibv_qp_init_attr
		attr.send_cq = cq
		attr.recv_cq = cq
		attr.cap = caps
		attr.qp_type = C.enum_ibv_qp_type(cfg.Type)
		attr.sq_sig_all = simFlag(cfg.SigAll)
		qp, err = C.sqsim_create_qp(s.pd, &attr)
		caps = attr.cap
	}
	if qp == nil {
		err = fmt.Errorf("creating %v QP on sim (max_send_wr %d, max_inline %d, max_send_sge %d): %w",
			cfg.Type, cfg.MaxSendWR, cfg.MaxInline, cfg.MaxSendSGE, err)
		if errors.Is(err, syscall.EINVAL) {
			err = s.limitError(cfg, err)
		}
		return nil, err
	}
	se.qp = qp
	for _, st := range []C.enum_ibv_qp_state{C.IBV_QPS_INIT, C.IBV_QPS_RTR, C.IBV_QPS_RTS} {
		if st == C.IBV_QPS_RTS && cfg.StopAtRTR {
			break
		}
		var a C.struct_ibv_qp_attr
		a.qp_state = st
		mask := C.int(C.IBV_QP_STATE)
		if st == C.IBV_QPS_RTS && cfg.Receiver {
			a.rnr_retry = C.uint8_t(cfg.RNRRetry)
			mask |= C.IBV_QP_RNR_RETRY
		}
		if rc := C.sqsim_modify_qp(qp, &a, mask); rc != 0 {
			return nil, fmt.Errorf("moving sim QP to state %d: %w", st, syscall.Errno(rc))
		}
	}
	c := (*C.struct_sq_endpoint)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_sq_endpoint{}))))
	if c == nil {
		return nil, fmt.Errorf("allocating endpoint: %w", syscall.ENOMEM)
	}
	c.qp = qp
	c.cq = cq
	c.cqx = cqx
	if cfg.WRAPI {
		c.qpx = C.sqsim_qp_to_qp_ex(qp)
	}
	c.buf = se.buf
	c.buf_len = C.size_t(bufSize)
	c.lkey = mr.lkey
	c.raddr = C.uint64_t(uintptr(se.buf))
	c.rkey = mr.rkey
	if cfg.Type == UD {
		var ah C.struct_ibv_ah_attr
		se.ah = C.sqsim_create_ah(s.pd, &ah)
		c.ah = se.ah
		c.remote_qpn = qp.qp_num
		c.remote_qkey = 0x11111111
	}
	ep := &Endpoint{
		c:      c,
		QPNum:  uint32(qp.qp_num),
		Type:   cfg.Type,
		SigAll: cfg.SigAll,
		Caps: Caps{
			MaxSendWR:     uint32(caps.max_send_wr),
			MaxRecvWR:     uint32(caps.max_recv_wr),
			MaxSendSGE:    uint32(caps.max_send_sge),
			MaxRecvSGE:    uint32(caps.max_recv_sge),
			MaxInlineData: uint32(caps.max_inline_data),
		},
	}
	se.ep = ep
	if cfg.Receiver {
		if err := s.addPeer(se, c, cfg); err != nil {
			return nil, err
		}
	}
	s.eps = append(s.eps, se)
	ok = true
	return ep, nil
}

func (s *Sim) freeEndpoint(se *simEndpoint) {
	s.freePeer(se)
	if se.ep != nil && se.ep.c != nil {
		C.free(unsafe.Pointer(se.ep.c))
		se.ep.c = nil
	}
	if se.ah != nil {
		C.sqsim_destroy_ah(se.ah)
	}
	if se.qp != nil {
		C.sqsim_destroy_qp(se.qp)
	}
	if se.cq != nil && !se.sharedCQ {
		C.sqsim_destroy_cq(se.cq)
	}
	if se.mr != nil {
		C.sqsim_dereg_mr(se.mr)
	}
	if se.buf != nil {
		C.free(se.buf)
	}
}

func (s *Sim) find(e *Endpoint) *simEndpoint {
	for _, se := range s.eps {
		if se.ep == e {
			return se
		}
	}
	return nil
}

// Counters returns the ground truth for the endpoint's QP.
func (s *Sim) Counters(e *Endpoint) (Counters, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.find(e)
	if se == nil {
		return Counters{}, false
	}
	var c C.struct_sqsim_counters
	if C.sqsim_qp_counters(se.qp, &c) != 0 {
		return Counters{}, false
	}
	return simCounters(&c), true
}

// simCounters converts the simulator's counters of a QP.
func simCounters(c *C.struct_sqsim_counters) Counters {
	return Counters{
		QPNum:           uint32(c.qp_num),
		MaxSendWR:       uint32(c.max_send_wr),
		MaxInlineData:   uint32(c.max_inline_data),
		WRs:             uint64(c.wrs),
		PostCalls:       uint64(c.post_calls),
		Inline:          uint64(c.inline_wrs),
		Signaled:        uint64(c.signaled),
		Doorbells:       uint64(c.doorbells),
		BFWrites:        uint64(c.bf_writes),
		WQEBBs:          uint64(c.wqebbs),
		DMAReadsWQE:     uint64(c.dma_reads_wqe),
		DMAReadsPayload: uint64(c.dma_reads_payload),
		CQEWrites:       uint64(c.cqe_writes),
		ENOMEMSQFull:    uint64(c.enomem_sq_full),
		ENOMEMInline:    uint64(c.enomem_inline),
		ENOMEMSGE:       uint64(c.enomem_sge),
		EINVAL:          uint64(c.einval),
		PeakOutstanding: uint64(c.peak_outstanding),
		CQEsPolled:      uint64(c.cqes_polled),
		MMIOBytes:       uint64(c.mmio_bytes),
		DMABytesWQE:     uint64(c.dma_bytes_wqe),
		DMABytesPayload: uint64(c.dma_bytes_payload),
		InlineBytes:     uint64(c.inline_bytes),
		FlushedCQEs:     uint64(c.flushed_cqes),
		PostRecvs:       uint64(c.post_recvs),
		Outstanding:     uint64(c.outstanding),

		DMAWritesResponse: uint64(c.dma_writes_resp),
		DMABytesResponse:  uint64(c.dma_bytes_resp),
		NotRTS:            uint64(c.not_rts),
		CQOverrunErrs:     uint64(c.cq_overrun_errs),
		RecvsConsumed:     uint64(c.recvs_consumed),
		RecvCQEsPolled:    uint64(c.recv_cqes_polled),
		RNRWaits:          uint64(c.rnr_waits),
		RNRRetryExc:       uint64(c.rnr_retry_exc),
	}
}

// CQCounters are the simulator's poll counters for an endpoint's CQ (an
// extended poll session counts as one poll), and what its control calls
// left: its depth, moderation, and how often it was modified and resized.
type CQCounters struct {
	Polls      uint64 `json:"polls"`
	EmptyPolls uint64 `json:"empty_polls"`
	CQEs       uint64 `json:"cqes"`
	Depth      int32  `json:"cqe"`
	Modifies   uint64 `json:"modifies"`
	Resizes    uint64 `json:"resizes"`
	ModCount   uint16 `json:"mod_count"`
	ModPeriod  uint16 `json:"mod_period_us"`
	// Overruns: a CQE was due on the full CQ, which went to error.
	Overruns uint64 `json:"overruns"`
}

// CQCounters returns the poll counters of the endpoint's send CQ.
func (s *Sim) CQCounters(e *Endpoint) (CQCounters, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.find(e)
	if se == nil {
		return CQCounters{}, false
	}
	return cqCounters(se.cq)
}

// CQAddr is the address of the endpoint's send CQ, as a tracer names it.
func (e *Endpoint) CQAddr() uint64 { return uint64(uintptr(unsafe.Pointer(e.c.cq))) }

func cqCounters(cq *C.struct_ibv_cq) (CQCounters, bool) {
	var c C.struct_sqsim_cq_counters
	if C.sqsim_cq_counters(cq, &c) != 0 {
		return CQCounters{}, false
	}
	return CQCounters{Polls: uint64(c.polls), EmptyPolls: uint64(c.empty_polls), CQEs: uint64(c.cqes),
		Depth: int32(c.cqe), Modifies: uint64(c.modifies), Resizes: uint64(c.resizes),
		ModCount: uint16(c.mod_count), ModPeriod: uint16(c.mod_period), Overruns: uint64(c.overruns)}, true
}

// ModerateCQ sets the moderation of the endpoint's CQ (sqsim_modify_cq,
// the simulator's ibv_modify_cq): count completions or period_us.
func (s *Sim) ModerateCQ(e *Endpoint, count, periodUS uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.find(e)
	if se == nil {
		return errors.New("endpoint not on this device")
	}
	var a C.struct_ibv_modify_cq_attr
	a.attr_mask = C.IBV_CQ_ATTR_MODERATE
	a.moderate.cq_count = C.uint16_t(count)
	a.moderate.cq_period = C.uint16_t(periodUS)
	if rc := C.sqsim_modify_cq(se.cq, &a); rc != 0 {
		return fmt.Errorf("modifying sim CQ: %w", syscall.Errno(rc))
	}
	return nil
}

// ResizeCQ resizes the endpoint's CQ (sqsim_resize_cq, the simulator's
// ibv_resize_cq) to at least cqe entries.
func (s *Sim) ResizeCQ(e *Endpoint, cqe int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.find(e)
	if se == nil {
		return errors.New("endpoint not on this device")
	}
	if rc := C.sqsim_resize_cq(se.cq, C.int(cqe)); rc != 0 {
		return fmt.Errorf("resizing sim CQ to %d: %w", cqe, syscall.Errno(rc))
	}
	return nil
}

// SetError moves the QP to the error state; the NIC flushes every WR it has
// not executed with an IBV_WC_WR_FLUSH_ERR CQE.
func (s *Sim) SetError(e *Endpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.find(e)
	if se == nil {
		return errors.New("endpoint not on this device")
	}
	var a C.struct_ibv_qp_attr
	a.qp_state = C.IBV_QPS_ERR
	if rc := C.sqsim_modify_qp(se.qp, &a, C.IBV_QP_STATE); rc != 0 {
		return fmt.Errorf("moving sim QP %d to error: %w", e.QPNum, syscall.Errno(rc))
	}
	return nil
}

// SetClock switches the simulator to a manual clock (tests): ns is the
// current time; 0 returns to CLOCK_MONOTONIC.
func (s *Sim) SetClock(ns uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	C.sqsim_set_clock(s.ctx, C.uint64_t(ns))
}

// Close destroys every endpoint and the device.
func (s *Sim) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return nil
	}
	for _, se := range s.eps {
		s.freeEndpoint(se)
	}
	s.eps = nil
	s.freeShared()
	C.sqsim_dealloc_pd(s.pd)
	C.sqsim_close_device(s.ctx)
	s.ctx = nil
	return nil
}

func simFlag(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// limitError names the cap the simulated HCA refused, and its limit.
func (s *Sim) limitError(cfg QPConfig, err error) error {
	ops, withOps := uint64(cfg.SendOps), cfg.WRAPI || cfg.SendOps != 0
	if withOps && ops == 0 {
		ops = C.IBV_QP_EX_WITH_SEND | C.IBV_QP_EX_WITH_RDMA_WRITE
	}
	var maxWR, maxSGE, maxInline C.uint32_t
	C.sqsim_limits(s.ctx, C.int(cfg.Type), C.uint64_t(ops), simFlag(withOps), &maxWR, &maxSGE, &maxInline)
	switch {
	case cfg.MaxSendWR == 0 || cfg.MaxSendWR > uint32(maxWR):
		return &LimitError{fmt.Sprintf("-t/--tx-depth %d: the simulated HCA takes 1 to %d", cfg.MaxSendWR, maxWR), err}
	case cfg.MaxSendSGE > uint32(maxSGE):
		return &LimitError{fmt.Sprintf("%d SGEs per WR: the simulated HCA takes at most %d on this %v QP", cfg.MaxSendSGE, maxSGE, cfg.Type), err}
	case cfg.MaxInline > uint32(maxInline):
		return &LimitError{fmt.Sprintf("-I/--inline_size %d: the simulated HCA takes at most %d on this %v QP (WQEs of at most 1024 B)", cfg.MaxInline, maxInline, cfg.Type), err}
	}
	return err
}

// DirectPostSend is the simulated HCA's direct post path
// (sqsim_dv_post_send), a C function pointer for a C caller: it posts as
// ibv_post_send does without calling it, as applications on direct
// verbs (mlx5dv) do.
func DirectPostSend() unsafe.Pointer { return C.sqsim_dv_post_send }
