package verbs

/*
#include <stdlib.h>
#include "sim.h"
#include "device.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// createCQ creates a CQ of depth entries on the simulated HCA, extended
// (cqx set, and cq its ibv_cq) when ex; cq is nil on failure.
func (s *Sim) createCQ(depth uint32, ex bool) (cq *C.struct_ibv_cq, cqx *C.struct_ibv_cq_ex, err error) {
	if ex {
		var ca C.struct_ibv_cq_init_attr_ex
		ca.cqe = C.uint32_t(depth)
		cqx, err = C.sqsim_create_cq_ex(s.ctx, &ca)
		return (*C.struct_ibv_cq)(unsafe.Pointer(cqx)), cqx, err
	}
	cq, err = C.sqsim_create_cq(s.ctx, C.int(depth))
	return cq, nil, err
}

// NewCQ creates a send CQ of depth entries to share between endpoints,
// extended (polled with ibv_start_poll..ibv_end_poll) when ex.
func (s *Sim) NewCQ(depth uint32, ex bool) (*CQ, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return nil, errors.New("simulated HCA is closed")
	}
	cq := &CQ{}
	var err error
	cq.c, cq.cqx, err = s.createCQ(depth, ex)
	if cq.c == nil {
		return nil, fmt.Errorf("creating a shared CQ of %d entries on sim: %w", depth, err)
	}
	cq.Addr = uint64(uintptr(unsafe.Pointer(cq.c)))
	s.cqs = append(s.cqs, cq)
	return cq, nil
}

// NewSRQ creates a shared receive queue of depth receives, each of
// bufSize bytes (at least 64), its CQ, and fills it.
func (s *Sim) NewSRQ(depth uint32, bufSize int) (*SRQ, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return nil, errors.New("simulated HCA is closed")
	}
	q := &SRQ{recvSize: uint32(max(bufSize, 64))}
	s.srqs = append(s.srqs, q)
	var attr C.struct_ibv_srq_init_attr
	attr.attr.max_wr = C.uint32_t(depth)
	attr.attr.max_sge = 1
	srq, err := C.sqsim_create_srq(s.pd, &attr)
	if srq == nil {
		return nil, fmt.Errorf("creating an SRQ of %d receives on sim: %w", depth, err)
	}
	q.srq = srq
	q.depth = uint32(attr.attr.max_wr)
	q.Addr = uint64(uintptr(unsafe.Pointer(srq)))
	rcq, err := C.sqsim_create_cq(s.ctx, C.int(q.depth+16))
	if rcq == nil {
		return nil, fmt.Errorf("creating the SRQ's CQ on sim: %w", err)
	}
	q.rcq = rcq
	size := C.size_t(q.depth) * C.size_t(q.recvSize)
	q.rbuf = C.calloc(1, size)
	if q.rbuf == nil {
		return nil, fmt.Errorf("allocating the SRQ's receive buffer: %w", syscall.ENOMEM)
	}
	mr, err := C.sqsim_reg_mr(s.pd, q.rbuf, size, C.IBV_ACCESS_LOCAL_WRITE)
	if mr == nil {
		return nil, fmt.Errorf("registering the SRQ's receive buffer on sim: %w", err)
	}
	q.mr = mr
	if rc := C.sqd_fill_srq(srq, q.rbuf, mr.lkey, C.uint32_t(q.depth), C.uint32_t(q.recvSize)); rc != 0 {
		return nil, fmt.Errorf("posting the SRQ's %d receives: %w", q.depth, syscall.Errno(rc))
	}
	return q, nil
}

// SharedCQCounters returns a shared CQ's poll counters.
func (s *Sim) SharedCQCounters(cq *CQ) (CQCounters, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cqCounters(cq.c)
}

// SRQCounters returns an SRQ's ground truth.
func (s *Sim) SRQCounters(q *SRQ) (SRQCounters, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var posted, out C.uint64_t
	if q.srq == nil || C.sqsim_srq_posted(q.srq, &posted, &out) != 0 {
		return SRQCounters{}, false
	}
	return SRQCounters{Posted: uint64(posted), Outstanding: uint64(out)}, true
}

// fill makes the peer QP's receives come from q: the endpoint's
// traffic loop reposts to the SRQ and reaps the SRQ's CQ.
func (q *SRQ) fill(c *C.struct_sq_endpoint) {
	c.peer_srq = q.srq
	c.peer_rcq = q.rcq
	c.rbuf = q.rbuf
	c.rbuf_len = C.size_t(q.depth) * C.size_t(q.recvSize)
	c.rlkey = q.mr.lkey
	c.rq_depth = C.uint32_t(q.depth)
	c.recv_size = C.uint32_t(q.recvSize)
}

// freeShared destroys the shared CQs and SRQs (after every endpoint).
func (s *Sim) freeShared() {
	for _, q := range s.srqs {
		if q.srq != nil {
			C.sqsim_destroy_srq(q.srq)
		}
		if q.rcq != nil {
			C.sqsim_destroy_cq(q.rcq)
		}
		if q.mr != nil {
			C.sqsim_dereg_mr(q.mr)
		}
		if q.rbuf != nil {
			C.free(q.rbuf)
		}
	}
	for _, cq := range s.cqs {
		C.sqsim_destroy_cq(cq.c)
	}
	s.srqs, s.cqs = nil, nil
}
