package verbs

/*
#include "device.h"
*/
import "C"

import "unsafe"

// CQ is a send CQ several endpoints share (QPConfig.SendCQ): each CQE
// carries its QP's number, and one poll may return completions of many
// QPs.
type CQ struct {
	c   *C.struct_ibv_cq
	cqx *C.struct_ibv_cq_ex
	dev *C.struct_sqd_cq // a device's, nil on the simulator
	// Addr is the CQ's address in the process, as a tracer names it.
	Addr uint64
}

// Depth is the entries the provider gave the CQ (struct ibv_cq's cqe).
func (cq *CQ) Depth() int32 { return int32(cq.c.cqe) }

// SRQ is a shared receive queue the receiving peers of several endpoints
// take their receives from (QPConfig.SRQ), with the one CQ those
// receives complete on and their registered buffer.
type SRQ struct {
	srq      *C.struct_ibv_srq
	rcq      *C.struct_ibv_cq
	mr       *C.struct_ibv_mr
	rbuf     unsafe.Pointer
	depth    uint32
	recvSize uint32
	dev      *C.struct_sqd_srq // a device's, nil on the simulator
	// Addr is the SRQ's address in the process, as a tracer names it.
	Addr uint64
}

// Filled is the receives posted to the SRQ when it was created.
func (q *SRQ) Filled() uint32 { return q.depth }

// SRQCounters is an SRQ's ground truth.
type SRQCounters struct {
	Posted      uint64 `json:"posted"`      // receives ibv_post_srq_recv accepted
	Outstanding uint64 `json:"outstanding"` // posted and not yet completed and polled
}

// SharedDevice is a device whose endpoints can share a send CQ and whose
// receiving peers can share an SRQ.
type SharedDevice interface {
	Device
	NewCQ(depth uint32, ex bool) (*CQ, error)
	NewSRQ(depth uint32, bufSize int) (*SRQ, error)
}

// Limits are a real device's limits (ibv_query_device) on the objects a
// run creates; the simulated HCA checks each object as it is created.
type Limits struct {
	MaxQP    int // QPs
	MaxCQ    int // CQs
	MaxCQE   int // entries of one CQ
	MaxSRQ   int // SRQs
	MaxSRQWR int // receives one SRQ holds
}

// LimitedDevice is a device whose Limits a run checks before creating
// anything, so that a run it cannot hold is refused at once.
type LimitedDevice interface {
	Device
	Limits() Limits
}

// CQDepth is the entries the provider gave the endpoint's send CQ.
func (e *Endpoint) CQDepth() int32 { return int32(e.c.cq.cqe) }
