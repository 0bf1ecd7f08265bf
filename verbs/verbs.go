// Package verbs holds the two devices sqscope's workload can drive: the
// simulated mlx5-like HCA ("sim", sim*.c) and real libibverbs devices
// (device*.c). Both hand out Endpoints, a sending QP with its CQ and
// buffers, on which the workload posts through the unmodified static inline
// ibv_post_send()/ibv_poll_cq()/ibv_wr_*() of <infiniband/verbs.h>. The
// verbs values Go code needs are in package ibv. Nothing here knows about
// tracing.
package verbs

/*
#cgo CFLAGS: -O2 -g -Wall -Wno-unused-function
#cgo LDFLAGS: -libverbs -rdynamic
// -rdynamic puts the sqsim_* entry points in .dynsym, so a tracer finds
// them even in a stripped binary; the data-path functions stay static and
// are found only through the ops table, as in a stripped provider.
#include "endpoint.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/sqscope/sqscope/ibv"
)

// QPType is the transport of a QP.
type QPType int

const (
	RC QPType = ibv.QPTRC
	UD QPType = ibv.QPTUD
)

func (t QPType) String() string {
	if t == RC || t == UD {
		return ibv.QPTypeName(uint8(t))
	}
	return fmt.Sprintf("qptype(%d)", int(t))
}

// ParseQPType accepts RC or UD (any case).
func ParseQPType(s string) (QPType, error) {
	switch s {
	case "RC", "rc":
		return RC, nil
	case "UD", "ud":
		return UD, nil
	}
	return 0, fmt.Errorf("unknown connection type %q (want RC or UD)", s)
}

// Opcodes and flags the workload uses (package ibv has them all).
const (
	OpRDMAWrite = ibv.WRRDMAWrite
	OpSend      = ibv.WRSend

	SendFenceFlag    = ibv.SendFence
	SendSignaledFlag = ibv.SendSignaled
	SendSolicited    = ibv.SendSolicited
	SendInlineFlag   = ibv.SendInline
)

// QPConfig is what the application asks for when it creates a QP.
type QPConfig struct {
	Type       QPType
	MaxSendWR  uint32 // the SQ depth asked for (perftest -t)
	MaxRecvWR  uint32
	MaxSendSGE uint32
	MaxInline  uint32 // max_inline_data asked for (perftest -I)
	SigAll     bool   // sq_sig_all
	// WRAPI creates the QP with ibv_create_qp_ex and IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
	// so the ibv_wr_* API can post on it. SendOps lists the opcodes it will
	// use (IBV_QP_EX_WITH_*); on the simulator a QP limited to SEND and
	// RDMA_WRITE gets the smaller WQE overhead, as on mlx5.
	WRAPI   bool
	SendOps uint64
	// CQEx creates the send CQ with ibv_create_cq_ex, to be polled with
	// ibv_start_poll, ibv_next_poll and ibv_end_poll.
	CQEx bool
	// RemoteAtomic lets the peer (on a device) take atomics.
	RemoteAtomic bool
	// CQDepth is the number of entries asked for the send CQ; 0 gives
	// room for every WR the SQ can hold, signaled or flushed.
	CQDepth uint32
	// StopAtRTR leaves the sending QP in RTR instead of moving it to RTS:
	// an application that posts before its QP is ready.
	StopAtRTR bool
	// Receiver gives a simulated RC QP a receiving peer whose receives its
	// SENDs take (a device's endpoint always has one), with MaxRecvWR
	// receives; RNRRetry is then the sender's rnr_retry (7: forever).
	Receiver bool
	RNRRetry uint8
	BufSize  int // payload buffer bytes
	// SendCQ, when set, is the send CQ the QP shares with others
	// (SharedDevice.NewCQ); CQEx and CQDepth are then the CQ's.
	SendCQ *CQ
	// SRQ, when set (with Receiver on the simulator; a device's peer
	// always receives, on RC), is the SRQ the receiving peer takes its
	// receives from (SharedDevice.NewSRQ), completing them on the SRQ's CQ.
	SRQ *SRQ
}

// Caps are what the QP reports after creation; always use these, not the
// requested ones.
type Caps struct {
	MaxSendWR     uint32 `json:"max_send_wr"`
	MaxRecvWR     uint32 `json:"max_recv_wr"`
	MaxSendSGE    uint32 `json:"max_send_sge"`
	MaxRecvSGE    uint32 `json:"max_recv_sge"`
	MaxInlineData uint32 `json:"max_inline_data"`
}

// Endpoint is one sending QP with its CQ, registered buffer and remote
// addressing; see endpoint.h. It is owned by the Device that made it.
type Endpoint struct {
	c      *C.struct_sq_endpoint
	QPNum  uint32
	Type   QPType
	Caps   Caps
	SigAll bool
}

// Ptr is the struct sq_endpoint * for the workload's C traffic loop.
func (e *Endpoint) Ptr() unsafe.Pointer { return unsafe.Pointer(e.c) }

// Device is a verbs device the workload can drive.
type Device interface {
	// Name is the device name ("sim", "rxe0", "mlx5_0").
	Name() string
	// Simulated reports whether Counters are the HCA's ground truth.
	Simulated() bool
	// NewEndpoint creates a QP (and, on a real device, its connected peer),
	// brings it to RTS and registers its buffers.
	NewEndpoint(cfg QPConfig) (*Endpoint, error)
	// Counters returns the device's own counters for an endpoint's QP, or
	// ok=false when the device keeps none (real hardware).
	Counters(e *Endpoint) (c Counters, ok bool)
	// SetError moves the endpoint's QP to the error state (flushing it).
	SetError(e *Endpoint) error
	// Close destroys every endpoint and releases the device.
	Close() error
}

// LimitError is a QP cap the HCA does not accept: Msg names it and the
// limit, Err is the provider's error.
type LimitError struct {
	Msg string
	Err error
}

func (e *LimitError) Error() string { return e.Msg }
func (e *LimitError) Unwrap() error { return e.Err }
