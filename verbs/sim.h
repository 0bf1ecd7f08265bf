/* The simulated mlx5-like HCA.
 *
 * Objects are real <infiniband/verbs.h> structs: the context's ops table
 * holds the simulator's post_send/poll_cq/post_recv, so an application calls
 * the unmodified static inline ibv_post_send()/ibv_poll_cq() of verbs.h, and
 * a QP's struct ibv_qp_ex holds the simulator's wr_* functions.
 *
 * The sqsim_create_qp, sqsim_create_qp_ex, sqsim_qp_to_qp_ex,
 * sqsim_modify_qp and sqsim_destroy_qp entry points play the role of
 * libibverbs' exported ibv_create_qp, ibv_create_qp_ex (through
 * verbs_context), ibv_qp_to_qp_ex, ibv_modify_qp and ibv_destroy_qp for
 * simulated QPs. Their names and signatures are stable: the tracer hooks them
 * to discover the data-path functions through the ops table, exactly as it
 * does for a stripped provider. */
#ifndef SQSCOPE_SIM_H
#define SQSCOPE_SIM_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* The NIC model; see verbs/nicmodel (nicmodel.Model) for the meaning and
 * defaults of each parameter. */
struct sqsim_config {
	int deterministic;      /* CQE visible at the doorbell, no clock reads */
	int prefer_bf;          /* MLX5_POST_SEND_PREFER_BF */
	int shut_up_bf;         /* MLX5_SHUT_UP_BF */
	uint32_t bf_buf_size;   /* BlueFlame buffer bytes (256) */
	double link_gbps;       /* wire rate */
	uint32_t wqe_ns;        /* NIC engine time per WQE */
	uint32_t dma_read_ns;   /* one PCIe DMA read round trip */
	uint32_t rtt_ns;        /* RC: until the responder's ACK */
	uint32_t max_qp_wr;     /* device limit on max_send_wr */
	uint32_t max_sge;       /* device limit on max_send_sge */
};

/* Ground truth per QP; mirrored by verbs.Counters. */
struct sqsim_counters {
	uint32_t qp_num;
	uint32_t max_send_wr;
	uint32_t max_inline_data;
	uint32_t pad;
	uint64_t wrs;
	uint64_t post_calls;
	uint64_t inline_wrs;
	uint64_t signaled;
	uint64_t doorbells;
	uint64_t bf_writes;
	uint64_t wqebbs;
	uint64_t dma_reads_wqe;
	uint64_t dma_reads_payload;
	uint64_t cqe_writes;
	uint64_t enomem_sq_full;
	uint64_t enomem_inline;
	uint64_t enomem_sge;
	uint64_t einval;
	uint64_t peak_outstanding;
	uint64_t cqes_polled;
	uint64_t mmio_bytes;
	uint64_t dma_bytes_wqe;
	uint64_t dma_bytes_payload;
	uint64_t inline_bytes;
	uint64_t flushed_cqes;
	uint64_t post_recvs;
	uint64_t outstanding;
	/* READ and atomic responses the HCA writes by DMA into the local
	 * buffer: a READ's, one per non-empty data segment, its length; an
	 * atomic's, one of 8 bytes */
	uint64_t dma_writes_resp;
	uint64_t dma_bytes_resp;
	/* post calls refused because the SQ is not in RTS: ENOMEM through
	 * ibv_post_send's SGE check (not in enomem_sge), EINVAL through
	 * ibv_wr_complete (in einval too) */
	uint64_t not_rts;
	uint64_t cq_overrun_errs; /* times its send CQ's overrun moved it to error */
	/* The receive side (a QP connected with sqsim_connect): */
	uint64_t recvs_consumed;   /* its receives the peer's SENDs took */
	uint64_t recv_cqes_polled; /* receive completions of it polled */
	uint64_t rnr_waits;        /* its SENDs that found the peer's RQ empty (RNR NAK) */
	uint64_t rnr_retry_exc;    /* ... and ran out of RNR retries */
};

/* Per-CQ ground truth. An extended poll session (ibv_start_poll ..
 * ibv_end_poll) is one poll, empty when ibv_start_poll found nothing. */
struct sqsim_cq_counters {
	uint64_t polls;
	uint64_t empty_polls;
	uint64_t cqes;
	uint64_t modifies;  /* ibv_modify_cq calls that set moderation */
	uint64_t resizes;   /* ibv_resize_cq calls that succeeded */
	uint64_t overruns;  /* a CQE due on the full CQ: the CQ went to error */
	int32_t cqe;        /* the depth now */
	uint16_t mod_count, mod_period;
};

struct ibv_context *sqsim_open_device(const struct sqsim_config *cfg);
void sqsim_default_config(struct sqsim_config *cfg);
int sqsim_close_device(struct ibv_context *ctx);

struct ibv_pd *sqsim_alloc_pd(struct ibv_context *ctx);
int sqsim_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *sqsim_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
int sqsim_dereg_mr(struct ibv_mr *mr);
struct ibv_cq *sqsim_create_cq(struct ibv_context *ctx, int cqe);
int sqsim_destroy_cq(struct ibv_cq *cq);
/* The CQ calls the tracer hooks: sqsim_create_cq_ex plays ibv_create_cq_ex
 * (its CQ is polled with ibv_start_poll, ibv_next_poll and ibv_end_poll,
 * static inline in verbs.h), sqsim_modify_cq ibv_modify_cq (moderation),
 * sqsim_resize_cq ibv_resize_cq; sqsim_create_cq and sqsim_destroy_cq are
 * hooked as ibv_create_cq and ibv_destroy_cq. */
struct ibv_cq_ex *sqsim_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr);
int sqsim_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
int sqsim_resize_cq(struct ibv_cq *cq, int cqe);
struct ibv_ah *sqsim_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int sqsim_destroy_ah(struct ibv_ah *ah);

/* The exported entry points the tracer hooks. */
struct ibv_qp *sqsim_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
void sqsim_limits(struct ibv_context *ctx, int qp_type, uint64_t ops, int with_ops,
		  uint32_t *max_wr, uint32_t *max_sge, uint32_t *max_inline);
struct ibv_qp *sqsim_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
struct ibv_qp_ex *sqsim_qp_to_qp_ex(struct ibv_qp *qp);
int sqsim_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int sqsim_destroy_qp(struct ibv_qp *qp);
/* The simulated wire: a and b (RC) become the two ends of one connection,
 * each one's SENDs taking the other's receives. */
int sqsim_connect(struct ibv_qp *a, struct ibv_qp *b);

/* A shared receive queue (sqsim_create_srq plays ibv_create_srq, hooked
 * as it; ibv_post_srq_recv goes through the context's ops table): the QPs
 * created with it take its receives in order. sqsim_srq_posted is its
 * ground truth: receives accepted, and those not yet completed and polled. */
struct ibv_srq *sqsim_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
int sqsim_destroy_srq(struct ibv_srq *srq);
int sqsim_srq_posted(struct ibv_srq *srq, uint64_t *posted, uint64_t *outstanding);

/* Where a QP (the struct ibv_qp a create returns) keeps its send
 * queue's counters, for a tracer that reads them from this process's
 * memory without stopping it: the WRs posted, and those retired by
 * polled completions, each `width` bytes, little-endian; posted -
 * retired is what the SQ-full check of ibv_post_send compares with the
 * depth. sqsim_sq_layout is the layout of this build. */
#define SQSIM_SQ_LAYOUT_MAGIC 0x5153534cu /* "LSSQ" */
struct sqsim_sq_layout {
	uint32_t magic;
	uint32_t size;    /* sizeof(struct sqsim_sq_layout) */
	uint32_t posted;  /* offsets from the struct ibv_qp */
	uint32_t retired;
	uint32_t width;
	/* the count of the times the QP's send CQ overran (8 bytes): the CQ
	 * error mlx5 raises as an asynchronous event, which the simulated
	 * HCA keeps in the QP; 0 in a layout of 20 bytes, which has none */
	uint32_t cq_errors;
	/* the counts of the QP's signaled WRs posted and of its send
	 * completions polled (8 bytes each): the one less the other is what
	 * it has pending on its send CQ, posted and not yet polled; 0 in a
	 * layout under 32 bytes, which has none */
	uint32_t signaled;
	uint32_t cqes_polled;
};
extern const struct sqsim_sq_layout sqsim_sq_layout;

/* sqsim_dv_post_send posts as ibv_post_send does, building the WQEs and
 * ringing the doorbell itself, without the context's ops table: the way an
 * application on mlx5's direct verbs (mlx5dv: UCX's rc_mlx5 and dc_mlx5,
 * DPDK's mlx5 driver) posts, never calling ibv_post_send. EOPNOTSUPP for a
 * QP of another device. */
int sqsim_dv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);

int sqsim_qp_counters(struct ibv_qp *qp, struct sqsim_counters *out);
int sqsim_cq_counters(struct ibv_cq *cq, struct sqsim_cq_counters *out);

/* Tests: a manual clock. When set (ns != 0) the simulator reads time from
 * it instead of CLOCK_MONOTONIC. */
void sqsim_set_clock(struct ibv_context *ctx, uint64_t ns);

#endif
