package verbs

/*
#include <stdlib.h>
#include "sim.h"
#include "endpoint.h"

// post_receives fills the peer's RQ through ibv_post_recv (the ops table's
// post_recv), 64 receives per call, as the device backend does.
static int post_receives(struct sq_endpoint *ep)
{
	struct ibv_recv_wr wr[64], *bad;
	struct ibv_sge sge[64];
	uint32_t i = 0, n, k;
	int ret;

	while (i < ep->rq_depth) {
		n = ep->rq_depth - i < 64 ? ep->rq_depth - i : 64;
		for (k = 0; k < n; k++) {
			sge[k].addr = (uintptr_t)ep->rbuf + (uint64_t)(i + k) * ep->recv_size;
			sge[k].length = ep->recv_size;
			sge[k].lkey = ep->rlkey;
			wr[k].wr_id = i + k;
			wr[k].sg_list = &sge[k];
			wr[k].num_sge = 1;
			wr[k].next = k + 1 < n ? &wr[k + 1] : NULL;
		}
		if ((ret = ibv_post_recv(ep->peer_qp, wr, &bad)))
			return ret;
		i += n;
	}
	return 0;
}
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"
)

// simPeer is the receiving end of a simulated RC connection: its QP, the
// CQ its receives complete on, and the registered receive buffer.
type simPeer struct {
	qp   *C.struct_ibv_qp
	rcq  *C.struct_ibv_cq
	mr   *C.struct_ibv_mr
	rbuf unsafe.Pointer
}

// peerRecvMinRNRTimer is the receiver's IBV_QP_MIN_RNR_TIMER code: 12,
// 0.64 ms between the sender's RNR retries (the device backend's value).
const peerRecvMinRNRTimer = 12

// addPeer gives a sending RC endpoint a receiving peer QP, cabled to it
// with sqsim_connect, brought to RTS, its RQ of cfg.MaxRecvWR receives
// filled, and its fields in the endpoint for the traffic loop (which
// reposts a receive per receive completion, as on a device).
func (s *Sim) addPeer(se *simEndpoint, c *C.struct_sq_endpoint, cfg QPConfig) error {
	if cfg.Type != RC || cfg.MaxRecvWR == 0 {
		return fmt.Errorf("a simulated receiver needs an RC QP with max_recv_wr > 0")
	}
	p := &simPeer{}
	se.peer = p
	var attr C.struct_ibv_qp_init_attr
	attr.qp_type = C.IBV_QPT_RC
	attr.cap.max_send_wr = 1
	attr.cap.max_send_sge = 1
	attr.cap.max_recv_sge = 1
	if q := cfg.SRQ; q != nil {
		// its receives come from the SRQ and complete on the SRQ's CQ
		attr.send_cq, attr.recv_cq, attr.srq = q.rcq, q.rcq, q.srq
	} else {
		if err := p.ownRQ(s, cfg, &attr); err != nil {
			return err
		}
	}
	qp, err := C.sqsim_create_qp(s.pd, &attr)
	if qp == nil {
		return fmt.Errorf("creating the receiving QP on sim: %w", err)
	}
	p.qp = qp
	if rc := C.sqsim_connect(se.qp, qp); rc != 0 {
		return fmt.Errorf("connecting sim QPs: %w", syscall.Errno(rc))
	}
	for _, st := range []C.enum_ibv_qp_state{C.IBV_QPS_INIT, C.IBV_QPS_RTR, C.IBV_QPS_RTS} {
		var a C.struct_ibv_qp_attr
		a.qp_state = st
		mask := C.int(C.IBV_QP_STATE)
		if st == C.IBV_QPS_RTR {
			a.min_rnr_timer = peerRecvMinRNRTimer
			mask |= C.IBV_QP_MIN_RNR_TIMER
		}
		if rc := C.sqsim_modify_qp(qp, &a, mask); rc != 0 {
			return fmt.Errorf("moving the receiving sim QP to state %d: %w", st, syscall.Errno(rc))
		}
	}
	c.peer_qp = qp
	if cfg.SRQ != nil {
		cfg.SRQ.fill(c)
		return nil
	}
	recvSize := C.uint32_t(max(cfg.BufSize, 64))
	c.peer_rcq = p.rcq
	c.rbuf = p.rbuf
	c.rbuf_len = C.size_t(cfg.MaxRecvWR) * C.size_t(recvSize)
	c.rlkey = p.mr.lkey
	c.rq_depth = attr.cap.max_recv_wr
	c.recv_size = recvSize
	if rc := C.post_receives(c); rc != 0 {
		return fmt.Errorf("posting the receiver's %d receives: %w", c.rq_depth, syscall.Errno(rc))
	}
	return nil
}

// ownRQ gives the peer QP an RQ of cfg.MaxRecvWR receives, its own CQ and
// receive buffer.
func (p *simPeer) ownRQ(s *Sim, cfg QPConfig, attr *C.struct_ibv_qp_init_attr) error {
	rcq, err := C.sqsim_create_cq(s.ctx, C.int(cfg.MaxRecvWR+16))
	if rcq == nil {
		return fmt.Errorf("creating the receiver's CQ on sim: %w", err)
	}
	p.rcq = rcq
	recvSize := C.uint32_t(max(cfg.BufSize, 64))
	rq := C.uint32_t(cfg.MaxRecvWR)
	p.rbuf = C.calloc(C.size_t(rq), C.size_t(recvSize))
	if p.rbuf == nil {
		return fmt.Errorf("allocating the receive buffer: %w", syscall.ENOMEM)
	}
	mr, err := C.sqsim_reg_mr(s.pd, p.rbuf, C.size_t(rq)*C.size_t(recvSize), C.IBV_ACCESS_LOCAL_WRITE)
	if mr == nil {
		return fmt.Errorf("registering the receive buffer on sim: %w", err)
	}
	p.mr = mr
	attr.send_cq, attr.recv_cq = rcq, rcq
	attr.cap.max_recv_wr = rq
	return nil
}

func (s *Sim) freePeer(se *simEndpoint) {
	p := se.peer
	if p == nil {
		return
	}
	if p.qp != nil {
		C.sqsim_destroy_qp(p.qp)
	}
	if p.rcq != nil {
		C.sqsim_destroy_cq(p.rcq)
	}
	if p.mr != nil {
		C.sqsim_dereg_mr(p.mr)
	}
	if p.rbuf != nil {
		C.free(p.rbuf)
	}
	se.peer = nil
}

// PeerCounters returns the ground truth of the endpoint's receiving peer
// QP, ok=false when it has none.
func (s *Sim) PeerCounters(e *Endpoint) (Counters, bool) {
	s.mu.Lock()
	se := s.find(e)
	s.mu.Unlock()
	if se == nil || se.peer == nil {
		return Counters{}, false
	}
	var c C.struct_sqsim_counters
	if C.sqsim_qp_counters(se.peer.qp, &c) != 0 {
		return Counters{}, false
	}
	return simCounters(&c), true
}
