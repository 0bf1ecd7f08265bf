/* One sending QP and everything a traffic loop needs to post on it and reap
 * its completions. Filled by the simulator (sim*.c) or by the libibverbs
 * device backend (device*.c); used by the workload's traffic loop. */
#ifndef SQSCOPE_ENDPOINT_H
#define SQSCOPE_ENDPOINT_H

#include <stdint.h>
#include <stddef.h>
#include <infiniband/verbs.h>

/* sq_endpoint.cqx_mode: how an extended poll session ends. */
#define SQ_CQX_STANDARD 0      /* ibv_end_poll after the last ibv_next_poll */
#define SQ_CQX_ONE 1           /* one completion per session: no ibv_next_poll */
#define SQ_CQX_NEXT_ENDS 2     /* an ibv_next_poll that returns ENOENT ends the
                                * session itself: no ibv_end_poll after it */

struct sq_endpoint {
	struct ibv_qp *qp;       /* the sending QP */
	struct ibv_qp_ex *qpx;   /* its extended view, or NULL without wr API */
	struct ibv_cq *cq;       /* its send CQ */
	struct ibv_cq_ex *cqx;   /* the same CQ when created extended (polled with
	                          * ibv_start_poll..ibv_end_poll), else NULL */
	int cqx_mode;            /* how a session ends: SQ_CQX_* (see cqx_mode, device.c) */

	void *buf;               /* local payload buffer, registered */
	size_t buf_len;
	uint32_t lkey;

	/* RDMA WRITE target */
	uint64_t raddr;
	uint32_t rkey;

	/* UD addressing */
	struct ibv_ah *ah;
	uint32_t remote_qpn;
	uint32_t remote_qkey;

	/* Receiving side of a real connection (device backend, SEND opcode):
	 * the loop keeps rq_depth receives posted on peer_qp and reaps peer_rcq.
	 * NULL on the simulator, whose wire has no receiver. */
	struct ibv_qp *peer_qp;
	struct ibv_cq *peer_rcq;
	struct ibv_srq *peer_srq; /* peer_qp takes its receives from this SRQ
	                           * (shared with other endpoints' peers, as is
	                           * peer_rcq then), or NULL: its own RQ */
	void *rbuf;
	size_t rbuf_len;
	uint32_t rlkey;
	uint32_t rq_depth;
	uint32_t recv_size;      /* bytes per receive buffer slot */
};

#endif
