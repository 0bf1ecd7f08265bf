/* What the simulated HCA's files share and nothing else sees: the
 * simulator's objects, the WQE geometry of mlx5, and the functions one
 * file calls in another. Those are hidden: they stay out of the dynamic
 * symbol table, as the static functions are, and every function keeps its
 * name in the binary's symbol table. The data-path functions the tracer
 * finds by name (sim_post_send, sim_poll_cq, the sim_wr_* builders, ...)
 * stay static in their files; each file installs its own (sim_send_ops,
 * sim_poll_ops, sim_recv_ops, sim_wr_ops). */
#ifndef SQSCOPE_SIM_INTERNAL_H
#define SQSCOPE_SIM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "sim.h"

#define SIM_HIDDEN __attribute__((visibility("hidden")))

#define WQEBB 64u
#define CTRL_SEG 16u
#define RADDR_SEG 16u
#define DATA_SEG 16u
#define INL_HDR 4u
#define DGRAM_SEG 48u
#define ATOMIC_SEG 16u
#define ATOMIC_LEN 8u /* an atomic's operand and response */
/* mlx5's UMR WQE of a memory-window bind or a local invalidate: control
 * segment, UMR control segment, mkey context, and for a bind the KLM of
 * the window (padded to 64 B). */
#define UMR_CTRL_SEG 48u
#define MKEY_SEG 64u
#define KLM_SEG 64u
#define MAX_WQE_BYTES 1024u /* 16 WQEBBs per WQE at most */

#define OVH_UD 64u

struct sim_ctx {
	struct ibv_context ibctx; /* first: ibv_context * converts */
	struct sqsim_config cfg;
	uint64_t manual_clock;
};

struct sim_wr {
	uint64_t wr_id;
	uint64_t done_ns;   /* CQE visible at (or the WR executed by) */
	uint32_t bytes;     /* payload bytes */
	uint16_t wqebbs;
	uint8_t opcode;
	uint8_t signaled;
	uint8_t inl;
	uint8_t sges;       /* non-empty data segments (DMA gathers) */
	uint8_t flush;      /* completes with IBV_WC_WR_FLUSH_ERR */
	uint8_t size16;     /* WQE size in 16 B units (the BlueFlame test) */
	uint8_t needs_recv; /* a SEND to a connected peer: takes one of its receives */
	uint8_t rnr_exc;    /* completes with IBV_WC_RNR_RETRY_EXC_ERR */
	uint64_t rnr_since; /* first RNR NAK (the peer had no receive), 0: none */
};

struct sim_cqe {
	struct ibv_wc wc;
	struct sim_qp *qp;
	uint64_t seq;
	int recv;            /* a receive completion: retires one RQ slot */
};

/* A receive a SEND consumed, its completion due at done_ns. */
struct sim_rcv {
	uint64_t wr_id, done_ns;
	uint32_t bytes;
};

/* A shared receive queue: receives posted by ibv_post_srq_recv, taken
 * in order by the SENDs to any QP created with it, a slot freed when the
 * completion of the receive in it is polled (as mlx5 frees an SRQ WQE). */
struct sim_srq {
	struct ibv_srq ibsrq; /* first */
	pthread_mutex_t lock;
	uint32_t max, max_gs;
	uint64_t head, cons, tail, mask;
	uint64_t *ids;
	uint64_t posted;      /* receives accepted */
	int nqps;             /* QPs created with it */
};

struct sim_cq {
	union {              /* first; an ibv_cq_ex starts as an ibv_cq */
		struct ibv_cq ibcq;
		struct ibv_cq_ex cqx;
	};
	pthread_mutex_t lock;
	struct sim_cqe cur;  /* extended polling: the completion polled last */
	uint16_t mod_count, mod_period;
	struct sim_cqe *ring;
	uint32_t cap;
	uint64_t prod, cons;
	/* the QPs whose sends complete here (shared by any number of QPs,
	 * each CQE carrying its QP's number), and those whose receives do */
	struct sim_qp **qps;
	int nqps, qps_cap;
	int err;             /* overrun: the CQ takes no more CQEs (cq_overrun) */
	struct sim_qp **rqps;
	int nrqps, rqps_cap;
	struct sqsim_cq_counters c;
};

struct sim_qp {
	struct ibv_qp_ex qpx; /* first: qpx.qp_base is the ibv_qp */
	struct sim_ctx *ctx;
	pthread_mutex_t lock;

	uint32_t ovh, wqe_size, max_post, max_gs, max_inline, wqe_cnt;
	/* mlx5's sq.qp_state_max_gs: max_gs from the move to RTS, -1 from
	 * create and from every move to RESET (other moves keep it), so the
	 * SGE check refuses every post to a QP not yet in RTS (rdma-core v40,
	 * providers/mlx5 set_qp_operational_state) */
	int state_max_gs;
	int sig_all;
	int has_qpx;
	uint64_t send_ops;

	uint64_t head, tail;   /* WR sequence numbers: posted, retired */
	uint64_t next_cqe;     /* first WR not yet turned into a CQE */
	struct sim_wr *wrs;
	uint64_t ring_mask;
	uint8_t *wqe_buf;      /* the SQ buffer inline data is copied into */
	uint64_t cur_post;     /* WQEBB producer index */
	uint64_t engine_free_ns;

	/* ibv_wr_* batch between wr_start and wr_complete/wr_abort */
	int batch_active;
	uint32_t batch_n;
	int batch_err;
	uint64_t *batch_err_counter;
	uint32_t cur_size;     /* bytes of the WQE being built */
	uint64_t batch_post;   /* cur_post at wr_start */
	struct sim_wr *cur;

	/* The receive side: the connected peer (sqsim_connect), the RQ's
	 * receives posted (rq_head), taken by the peer's SENDs (rq_cons) and
	 * retired by polls of their completions (rq_tail), and the
	 * completions due (rcv ring, rcv_head..rcv_tail). rnr_retry is the
	 * sender's IBV_QP_RNR_RETRY (7: forever), min_rnr_timer the
	 * receiver's IBV_QP_MIN_RNR_TIMER code. */
	struct sim_qp *peer;
	uint32_t rq_max, rq_max_gs;
	int rq_state_max_gs;
	uint64_t rq_head, rq_cons, rq_tail, rq_mask;
	uint64_t *rq_ids;
	struct sim_rcv *rcv;
	uint64_t rcv_head, rcv_tail;
	uint8_t rnr_retry, min_rnr_timer;
	struct sim_srq *srq;   /* receives come from it, not the RQ, when set */

	struct sqsim_counters c;
};

static inline struct sim_ctx *to_sctx(struct ibv_context *c) { return (struct sim_ctx *)c; }
static inline struct sim_qp *to_sqp(struct ibv_qp *q) { return (struct sim_qp *)q; }
static inline struct sim_qp *qpx_to_sqp(struct ibv_qp_ex *q) { return (struct sim_qp *)q; }
static inline struct sim_cq *to_scq(struct ibv_cq *c) { return (struct sim_cq *)c; }
static inline struct sim_srq *to_ssrq(struct ibv_srq *s) { return (struct sim_srq *)s; }

static inline uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

/* sim.c: the base */
SIM_HIDDEN uint64_t roundup_pow2(uint64_t v);
SIM_HIDDEN uint64_t sim_now(struct sim_ctx *ctx);

/* sim_post.c: the send data path */
SIM_HIDDEN int opcode_valid(struct sim_qp *qp, int opcode);
SIM_HIDDEN uint32_t op_overhead(struct sim_qp *qp, int opcode);
SIM_HIDDEN void copy_inline(struct sim_qp *qp, const void *src, uint32_t len);
SIM_HIDDEN void commit(struct sim_qp *qp, uint32_t n);
SIM_HIDDEN void sim_send_ops(struct ibv_context_ops *ops);

/* sim_wr_api.c: the ibv_wr_* API */
SIM_HIDDEN void sim_wr_ops(struct sim_qp *qp);

/* sim_cq.c: completions and the CQ calls */
SIM_HIDDEN void advance_qp(struct sim_cq *cq, struct sim_qp *qp, uint64_t now);
SIM_HIDDEN void sim_poll_ops(struct ibv_context_ops *ops);

/* sim_recv.c: the receive side */
SIM_HIDDEN int take_recv(struct sim_qp *qp, struct sim_wr *w, uint64_t now);
SIM_HIDDEN void sim_recv_ops(struct ibv_context_ops *ops);

#endif
