/* The simulated mlx5-like HCA: send-queue semantics of rdma-core's
 * providers/mlx5 (qp.c, cq.c, verbs.c) as docs/design.md states them, a NIC
 * model that executes WQEs in order, and ground-truth counters per QP.
 * See sim.h for the entry points and sim.go for the model's parameters. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

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

static struct ibv_device sim_ibdev = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "sim",
	.dev_name = "sim",
};

static uint32_t next_qpn = 0x1c0;
static pthread_mutex_t qpn_lock = PTHREAD_MUTEX_INITIALIZER;

static inline struct sim_ctx *to_sctx(struct ibv_context *c) { return (struct sim_ctx *)c; }
static inline struct sim_qp *to_sqp(struct ibv_qp *q) { return (struct sim_qp *)q; }
static inline struct sim_qp *qpx_to_sqp(struct ibv_qp_ex *q) { return (struct sim_qp *)q; }
static inline struct sim_cq *to_scq(struct ibv_cq *c) { return (struct sim_cq *)c; }
static inline struct sim_srq *to_ssrq(struct ibv_srq *s) { return (struct sim_srq *)s; }

static int needs_recv(int opcode);

static inline uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

static uint64_t roundup_pow2(uint64_t v)
{
	uint64_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

static uint64_t sim_now(struct sim_ctx *ctx)
{
	struct timespec ts;

	if (ctx->cfg.deterministic)
		return 0;
	if (ctx->manual_clock)
		return ctx->manual_clock;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int env_flag(const char *name, int dflt)
{
	const char *v = getenv(name);

	if (!v)
		return dflt;
	return strcmp(v, "0") ? 1 : 0;
}

void sqsim_default_config(struct sqsim_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->prefer_bf = env_flag("MLX5_POST_SEND_PREFER_BF", 1);
	cfg->shut_up_bf = env_flag("MLX5_SHUT_UP_BF", 0);
	cfg->bf_buf_size = 256;
	cfg->link_gbps = 100.0;
	cfg->wqe_ns = 10;
	cfg->dma_read_ns = 450;
	cfg->rtt_ns = 1500;
	cfg->max_qp_wr = 32768;
	cfg->max_sge = 30;
}

/* ---------------------------------------------------------------- data path */

static int opcode_valid(struct sim_qp *qp, int opcode)
{
	int rc = qp->qpx.qp_base.qp_type == IBV_QPT_RC;

	switch (opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return 1;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
	case IBV_WR_ATOMIC_WRITE:
		return rc;
	}
	return 0;
}

static uint32_t op_overhead(struct sim_qp *qp, int opcode)
{
	uint32_t size = CTRL_SEG;

	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD)
		size += DGRAM_SEG;
	switch (opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		size += RADDR_SEG;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	/* mlx5 (rdma-core 44) has no atomic write: the simulator builds it
	 * as an atomic, its 8 bytes in the atomic segment */
	case IBV_WR_ATOMIC_WRITE:
		size += RADDR_SEG + ATOMIC_SEG;
		break;
	case IBV_WR_LOCAL_INV:
		size += UMR_CTRL_SEG + MKEY_SEG;
		break;
	case IBV_WR_BIND_MW:
		/* a bind of a window of non-zero length (an unbind takes no KLM) */
		size += UMR_CTRL_SEG + MKEY_SEG + KLM_SEG;
		break;
	}
	return size;
}

/* sq_overhead is mlx5's: the largest WQE, before data, of the opcodes the
 * QP may post (send_ops_flags, or every opcode of its type without them),
 * plus the transport segment. */
static uint32_t sq_overhead(int qp_type, uint64_t ops)
{
	uint32_t size = CTRL_SEG;

	if (qp_type == IBV_QPT_UD)
		return OVH_UD;
	if (ops & (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		   IBV_QP_EX_WITH_RDMA_READ))
		size = CTRL_SEG + RADDR_SEG;
	if (ops & (IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
		   IBV_QP_EX_WITH_ATOMIC_WRITE))
		size = CTRL_SEG + RADDR_SEG + ATOMIC_SEG;
	if (ops & (IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV))
		size = CTRL_SEG + UMR_CTRL_SEG + MKEY_SEG + KLM_SEG;
	return size;
}

/* wc_opcode is the completion opcode of a send opcode. */
static enum ibv_wc_opcode wc_opcode(int opcode)
{
	switch (opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	}
	return IBV_WC_SEND;
}

/* responds reports whether an opcode's local SGEs receive a response the
 * HCA writes (READ, compare-and-swap, fetch-and-add) rather than hold a
 * payload it reads. */
static int responds(int opcode)
{
	return opcode == IBV_WR_RDMA_READ || opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Copy inline payload into the SQ buffer the way the CPU does on mlx5 (so
 * inline costs what it costs), wrapping at the end of the ring. */
static void copy_inline(struct sim_qp *qp, const void *src, uint32_t len)
{
	uint64_t ring = (uint64_t)qp->wqe_cnt * WQEBB;
	uint64_t off = (qp->cur_post * WQEBB + CTRL_SEG + INL_HDR) % ring;
	uint64_t first = len;

	if (!src || !len)
		return;
	if (off + first > ring)
		first = ring - off;
	memcpy(qp->wqe_buf + off, src, first);
	if (first < len)
		memcpy(qp->wqe_buf, (const uint8_t *)src + first, len - first);
}

static void update_peak(struct sim_qp *qp)
{
	uint64_t out = qp->head - qp->tail;

	if (out > qp->c.peak_outstanding)
		qp->c.peak_outstanding = out;
}

/* Ring one doorbell for the n WRs starting at head (already described in
 * qp->wrs), count them and schedule their execution on the NIC. The
 * BlueFlame test looks at the last WQE, as mlx5's post_send_db does. */
static void commit(struct sim_qp *qp, uint32_t n)
{
	struct sim_ctx *ctx = qp->ctx;
	const struct sqsim_config *cfg = &ctx->cfg;
	int err_state = qp->qpx.qp_base.state == IBV_QPS_ERR;
	uint64_t now, batch_bytes = 0;
	int bf;
	uint32_t i;

	uint32_t size16;
	int inl;

	if (!n)
		return;
	inl = qp->wrs[(qp->head + n - 1) & qp->ring_mask].inl;
	size16 = qp->wrs[(qp->head + n - 1) & qp->ring_mask].size16;
	bf = !cfg->shut_up_bf && cfg->bf_buf_size && n == 1 && (inl || cfg->prefer_bf) &&
	     size16 > 1 && size16 <= cfg->bf_buf_size / 16;
	qp->c.doorbells++;
	if (bf) {
		qp->c.bf_writes++;
		qp->c.mmio_bytes += align_up(size16 * 16, 64);
	} else {
		qp->c.mmio_bytes += 8;
		qp->c.dma_reads_wqe++;
	}

	now = sim_now(ctx);
	for (i = 0; i < n; i++) {
		struct sim_wr *w = &qp->wrs[(qp->head + i) & qp->ring_mask];

		qp->c.wrs++;
		qp->c.wqebbs += w->wqebbs;
		batch_bytes += (uint64_t)w->wqebbs * WQEBB;
		if (w->signaled)
			qp->c.signaled++;
		if (w->inl) {
			qp->c.inline_wrs++;
			qp->c.inline_bytes += w->bytes;
		} else if (responds(w->opcode)) {
			/* the local SGEs receive the response: the HCA writes
			 * them when it arrives, it reads nothing from them. A
			 * READ's fills each; an atomic's 8 bytes fill the first
			 * (mlx5 gives every data segment of an atomic 8 bytes). */
			if (w->opcode == IBV_WR_RDMA_READ) {
				qp->c.dma_writes_resp += w->sges;
				qp->c.dma_bytes_resp += w->bytes;
			} else if (w->sges) {
				qp->c.dma_writes_resp++;
				qp->c.dma_bytes_resp += ATOMIC_LEN;
			}
		} else {
			qp->c.dma_reads_payload += w->sges;
			qp->c.dma_bytes_payload += w->bytes;
		}
		w->flush = err_state;
		w->rnr_exc = 0;
		w->rnr_since = 0;
		w->needs_recv = qp->peer && needs_recv(w->opcode);
		if (cfg->deterministic || err_state) {
			w->done_ns = now;
		} else {
			/* Latencies overlap (pipelined); engine occupancy does not. */
			uint64_t lat = now + (bf ? 0 : cfg->dma_read_ns) +
				       ((w->inl || !w->sges) ? 0 : cfg->dma_read_ns);
			uint64_t occ = cfg->wqe_ns +
				       (uint64_t)((double)w->bytes * 8.0 / cfg->link_gbps);
			uint64_t done = lat + occ;

			if (qp->engine_free_ns + occ > done)
				done = qp->engine_free_ns + occ;
			qp->engine_free_ns = done;
			if (qp->qpx.qp_base.qp_type == IBV_QPT_RC)
				done += cfg->rtt_ns;
			w->done_ns = done;
		}
		qp->cur_post += w->wqebbs;
	}
	if (!bf)
		qp->c.dma_bytes_wqe += batch_bytes;
	qp->head += n;
	update_peak(qp);
}

static int sim_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr)
{
	struct sim_qp *qp = to_sqp(ibqp);
	uint32_t nreq = 0;
	uint64_t saved_post;
	int err = 0, inl;

	pthread_mutex_lock(&qp->lock);
	qp->c.post_calls++;
	saved_post = qp->cur_post;
	for (; wr; wr = wr->next, nreq++) {
		struct sim_wr *w;
		uint32_t size, total = 0;
		int i;

		if (!opcode_valid(qp, wr->opcode)) {
			qp->c.einval++;
			err = EINVAL;
			break;
		}
		if (qp->head - qp->tail + nreq >= qp->max_post) {
			qp->c.enomem_sq_full++;
			err = ENOMEM;
			break;
		}
		if (wr->num_sge > qp->state_max_gs) {
			/* one check, two causes: the QP's state or its SGEs */
			if (qp->state_max_gs < 0)
				qp->c.not_rts++;
			else
				qp->c.enomem_sge++;
			err = ENOMEM;
			break;
		}
		w = &qp->wrs[(qp->head + nreq) & qp->ring_mask];
		size = op_overhead(qp, wr->opcode);
		for (i = 0; i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		inl = 0;
		w->sges = 0;
		if (wr->send_flags & IBV_SEND_INLINE) {
			if (total > qp->max_inline) {
				qp->c.enomem_inline++;
				err = ENOMEM;
				break;
			}
			/* the CPU copies the payload into the WQE */
			for (i = 0; i < wr->num_sge; i++)
				copy_inline(qp, (void *)(uintptr_t)wr->sg_list[i].addr,
					    wr->sg_list[i].length);
			if (total)
				size += align_up(INL_HDR + total, 16);
			inl = 1;
		} else {
			for (i = 0; i < wr->num_sge; i++)
				if (wr->sg_list[i].length) {
					size += DATA_SEG;
					w->sges++;
				}
		}
		w->wr_id = wr->wr_id;
		w->opcode = wr->opcode;
		w->bytes = total;
		w->inl = inl;
		w->signaled = qp->sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
		w->wqebbs = (size + WQEBB - 1) / WQEBB;
		w->flush = 0;
		w->size16 = (uint8_t)((size + 15) / 16);
		/* later WQEs of this list go after this one */
		qp->cur_post += w->wqebbs;
	}
	qp->cur_post = saved_post; /* commit() advances it for real */
	commit(qp, nreq);
	if (err)
		*bad_wr = wr;
	pthread_mutex_unlock(&qp->lock);
	return err;
}

/* cq_overrun: a CQE is due on a full CQ. mlx5 CQs are created without
 * overrun-ignore, so as the IB spec's CQ error (an affiliated asynchronous
 * error) says: the CQ goes to error and takes no CQE from then on (the
 * ones queued stay to be polled), and every QP reporting to it goes to the
 * error state; their WRs never complete, flush errors included, since no
 * CQE can be written. Returns 1 (caller holds cq->lock and the lock of the
 * QP it is advancing). */
static int cq_overrun(struct sim_cq *cq, uint64_t now)
{
	int i;

	(void)now;
	cq->err = 1;
	cq->c.overruns++;
	for (i = 0; i < cq->nqps; i++) {
		__atomic_store_n(&cq->qps[i]->qpx.qp_base.state, IBV_QPS_ERR, __ATOMIC_RELAXED);
		__atomic_fetch_add(&cq->qps[i]->c.cq_overrun_errs, 1, __ATOMIC_RELAXED);
	}
	return 1;
}

/* ------------------------------------------------------ the receive side */

/* The IB spec's RNR NAK timer (min_rnr_timer codes 0..31), in us. */
static const uint32_t rnr_timer_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
};

/* take_recv gives the SEND w of qp (executed by now) one of its peer's
 * receives: 1 when it got one; else the responder answers RNR NAK and the
 * sender retries every min_rnr_timer: 0 while it may still retry (w
 * waits, and every WR after it), 1 with w->rnr_exc set once rnr_retry
 * retries (7: forever) found no receive, as on RC: the WR completes in
 * error, the QP goes to error and the WRs after it are flushed. Caller
 * holds qp->lock; the peer's lock is taken after it (never the reverse). */
static int take_recv(struct sim_qp *qp, struct sim_wr *w, uint64_t now)
{
	struct sim_qp *r = qp->peer;
	uint64_t wait_ns, s;

	if (!r) {
		w->needs_recv = 0; /* the peer was destroyed */
		return 1;
	}
	pthread_mutex_lock(&r->lock);
	if (r->srq && r->rcv_head - r->rcv_tail <= r->rq_mask) {
		struct sim_srq *q = r->srq;
		int took = 0;

		pthread_mutex_lock(&q->lock);
		if (q->cons < q->head) {
			struct sim_rcv *c = &r->rcv[r->rcv_head & r->rq_mask];

			c->wr_id = q->ids[q->cons & q->mask];
			c->bytes = w->bytes;
			c->done_ns = now > w->done_ns ? now : w->done_ns;
			q->cons++;
			r->rcv_head++;
			r->c.recvs_consumed++;
			took = 1;
		}
		pthread_mutex_unlock(&q->lock);
		if (took) {
			pthread_mutex_unlock(&r->lock);
			w->needs_recv = 0;
			return 1;
		}
	} else if (!r->srq && r->rq_cons < r->rq_head && r->rcv_head - r->rcv_tail <= r->rq_mask) {
		struct sim_rcv *c = &r->rcv[r->rcv_head & r->rq_mask];

		c->wr_id = r->rq_ids[r->rq_cons & r->rq_mask];
		c->bytes = w->bytes;
		c->done_ns = now > w->done_ns ? now : w->done_ns;
		r->rcv_head++;
		r->rq_cons++;
		r->c.recvs_consumed++;
		pthread_mutex_unlock(&r->lock);
		w->needs_recv = 0;
		return 1;
	}
	wait_ns = (uint64_t)rnr_timer_us[r->min_rnr_timer & 31] * 1000;
	pthread_mutex_unlock(&r->lock);
	if (!w->rnr_since) {
		w->rnr_since = w->done_ns ? w->done_ns : 1;
		qp->c.rnr_waits++;
	}
	if (qp->rnr_retry >= 7 || now < w->rnr_since ||
	    now - w->rnr_since <= (uint64_t)qp->rnr_retry * wait_ns)
		return 0;
	w->rnr_exc = 1;
	w->needs_recv = 0;
	qp->c.rnr_retry_exc++;
	qp->qpx.qp_base.state = IBV_QPS_ERR;
	for (s = qp->next_cqe + 1; s < qp->head; s++) {
		struct sim_wr *x = &qp->wrs[s & qp->ring_mask];

		x->flush = 1;
		x->done_ns = now;
	}
	return 1;
}

/* advance_recv writes the receive completions of r due by now on cq (its
 * recv CQ; caller holds cq->lock). */
static void advance_recv(struct sim_cq *cq, struct sim_qp *r, uint64_t now)
{
	pthread_mutex_lock(&r->lock);
	while (r->rcv_tail < r->rcv_head) {
		struct sim_rcv *c = &r->rcv[r->rcv_tail & r->rq_mask];
		struct sim_cqe *e;

		if (c->done_ns > now)
			break;
		if (cq->err || (cq->prod - cq->cons >= cq->cap && cq_overrun(cq, now)))
			break;
		e = &cq->ring[cq->prod % cq->cap];
		memset(&e->wc, 0, sizeof(e->wc));
		e->wc.wr_id = c->wr_id;
		e->wc.qp_num = r->qpx.qp_base.qp_num;
		e->wc.byte_len = c->bytes;
		e->wc.status = IBV_WC_SUCCESS;
		e->wc.opcode = IBV_WC_RECV;
		e->qp = r;
		e->seq = r->rcv_tail;
		e->recv = 1;
		cq->prod++;
		r->rcv_tail++;
	}
	pthread_mutex_unlock(&r->lock);
}

/* retire_cqe applies a polled completion to its QP: a send CQE retires its
 * WR and every earlier one (mlx5), a receive CQE one RQ slot. */
static void retire_cqe(struct sim_cqe *e)
{
	pthread_mutex_lock(&e->qp->lock);
	if (e->recv) {
		if (e->qp->srq) {
			pthread_mutex_lock(&e->qp->srq->lock);
			e->qp->srq->tail++;
			pthread_mutex_unlock(&e->qp->srq->lock);
		} else {
			e->qp->rq_tail++;
		}
		e->qp->c.recv_cqes_polled++;
	} else {
		e->qp->tail = e->seq + 1;
		e->qp->c.cqes_polled++;
	}
	pthread_mutex_unlock(&e->qp->lock);
}

/* needs_recv: the opcodes that take a receive at the responder. */
static int needs_recv(int opcode)
{
	return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
	       opcode == IBV_WR_SEND_WITH_INV || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* sqsim_connect makes a and b the two ends of one RC connection: each
 * one's SENDs take the other's receives. Not a verbs call: the simulated
 * wire's cabling, done before the QPs move to RTR. */
int sqsim_connect(struct ibv_qp *a, struct ibv_qp *b)
{
	struct sim_qp *x = to_sqp(a), *y = to_sqp(b);

	if (!x || !y || a->qp_type != IBV_QPT_RC || b->qp_type != IBV_QPT_RC)
		return EINVAL;
	pthread_mutex_lock(&x->lock);
	x->peer = y;
	pthread_mutex_unlock(&x->lock);
	pthread_mutex_lock(&y->lock);
	y->peer = x;
	pthread_mutex_unlock(&y->lock);
	return 0;
}

/* Turn executed WRs of qp into CQEs on cq (caller holds cq->lock). */
static void advance_qp(struct sim_cq *cq, struct sim_qp *qp, uint64_t now)
{
	pthread_mutex_lock(&qp->lock);
	while (qp->next_cqe < qp->head) {
		struct sim_wr *w = &qp->wrs[qp->next_cqe & qp->ring_mask];
		struct sim_cqe *e;

		if (w->done_ns > now)
			break; /* in order: later WRs are not done either */
		if (w->needs_recv && !w->flush && !take_recv(qp, w, now))
			break; /* RNR: the peer has no receive; later WRs wait too */
		if (w->signaled || w->flush || w->rnr_exc) {
			if (cq->err || (cq->prod - cq->cons >= cq->cap && cq_overrun(cq, now)))
				break; /* the CQ is in error: no CQE is written */
			e = &cq->ring[cq->prod % cq->cap];
			memset(&e->wc, 0, sizeof(e->wc));
			e->wc.wr_id = w->wr_id;
			e->wc.qp_num = qp->qpx.qp_base.qp_num;
			e->wc.byte_len = w->bytes;
			if (w->rnr_exc) {
				e->wc.status = IBV_WC_RNR_RETRY_EXC_ERR;
			} else if (w->flush) {
				e->wc.status = IBV_WC_WR_FLUSH_ERR;
				qp->c.flushed_cqes++;
			} else {
				e->wc.status = IBV_WC_SUCCESS;
			}
			e->wc.opcode = wc_opcode(w->opcode);
			e->qp = qp;
			e->seq = qp->next_cqe;
			e->recv = 0;
			cq->prod++;
			qp->c.cqe_writes++;
		}
		qp->next_cqe++;
	}
	pthread_mutex_unlock(&qp->lock);
}

static void advance_cq(struct sim_cq *cq, uint64_t now)
{
	int i;

	for (i = 0; i < cq->nqps; i++)
		advance_qp(cq, cq->qps[i], now);
	for (i = 0; i < cq->nrqps; i++)
		advance_recv(cq, cq->rqps[i], now);
}

static int sim_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct sim_cq *cq = to_scq(ibcq);
	struct sim_ctx *ctx = to_sctx(ibcq->context);
	int n = 0;

	if (num_entries < 0)
		return -EINVAL;
	pthread_mutex_lock(&cq->lock);
	cq->c.polls++;
	if (cq->prod - cq->cons < (uint64_t)num_entries)
		advance_cq(cq, sim_now(ctx));
	while (n < num_entries && cq->cons < cq->prod) {
		struct sim_cqe *e = &cq->ring[cq->cons % cq->cap];

		cq->cons++;
		if (!e->qp)
			continue; /* its QP was destroyed */
		wc[n++] = e->wc;
		retire_cqe(e);
	}
	if (n == 0)
		cq->c.empty_polls++;
	cq->c.cqes += n;
	pthread_mutex_unlock(&cq->lock);
	return n;
}

/* ----------------------------------------------- extended CQ polling */

/* pop_cqe takes the next completion off cq into cq->cur, retiring its WR
 * and the earlier ones; -1 when there is none (caller holds cq->lock). */
static int pop_cqe(struct sim_cq *cq)
{
	if (cq->prod == cq->cons)
		advance_cq(cq, sim_now(to_sctx(cq->ibcq.context)));
	while (cq->cons < cq->prod) {
		struct sim_cqe *e = &cq->ring[cq->cons % cq->cap];

		cq->cons++;
		if (!e->qp)
			continue; /* its QP was destroyed */
		cq->cur = *e;
		retire_cqe(e);
		cq->c.cqes++;
		cq->cqx.status = e->wc.status;
		cq->cqx.wr_id = e->wc.wr_id;
		return 0;
	}
	return -1;
}

/* As mlx5: the CQ stays locked from a start_poll that found a completion
 * to the end_poll. */
static int sim_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct sim_cq *cq = (struct sim_cq *)cqx;

	if (attr && attr->comp_mask)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	cq->c.polls++;
	if (pop_cqe(cq)) {
		cq->c.empty_polls++;
		pthread_mutex_unlock(&cq->lock);
		return ENOENT;
	}
	return 0;
}

static int sim_next_poll(struct ibv_cq_ex *cqx)
{
	return pop_cqe((struct sim_cq *)cqx) ? ENOENT : 0;
}

static void sim_end_poll(struct ibv_cq_ex *cqx)
{
	pthread_mutex_unlock(&((struct sim_cq *)cqx)->lock);
}

static enum ibv_wc_opcode sim_read_opcode(struct ibv_cq_ex *cqx)
{
	return ((struct sim_cq *)cqx)->cur.wc.opcode;
}

static uint32_t sim_read_byte_len(struct ibv_cq_ex *cqx)
{
	return ((struct sim_cq *)cqx)->cur.wc.byte_len;
}

static uint32_t sim_read_qp_num(struct ibv_cq_ex *cqx)
{
	return ((struct sim_cq *)cqx)->cur.wc.qp_num;
}

static unsigned int sim_read_wc_flags(struct ibv_cq_ex *cqx)
{
	(void)cqx;
	return 0;
}

static uint32_t sim_read_zero32(struct ibv_cq_ex *cqx)
{
	(void)cqx;
	return 0;
}

/* As mlx5's post_recv: the RQ full is ENOMEM (a slot is freed by the poll
 * of its completion), a QP not yet in INIT (rq.qp_state_max_gs -1) or too
 * many SGEs EINVAL; *bad_wr is the WR refused. */
static int sim_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	struct sim_qp *qp = to_sqp(ibqp);
	int err = 0;

	pthread_mutex_lock(&qp->lock);
	for (; wr; wr = wr->next) {
		if (qp->rq_head - qp->rq_tail >= qp->rq_max) {
			err = ENOMEM;
			break;
		}
		if (wr->num_sge > qp->rq_state_max_gs) {
			err = EINVAL;
			break;
		}
		qp->rq_ids[qp->rq_head & qp->rq_mask] = wr->wr_id;
		qp->rq_head++;
		qp->c.post_recvs++;
	}
	if (err)
		*bad_wr = wr;
	pthread_mutex_unlock(&qp->lock);
	return err;
}

/* As mlx5's post_srq_recv: the SRQ full is ENOMEM, too many SGEs EINVAL;
 * *bad_wr is the WR refused. */
static int sim_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr)
{
	struct sim_srq *q = to_ssrq(ibsrq);
	int err = 0;

	pthread_mutex_lock(&q->lock);
	for (; wr; wr = wr->next) {
		if (q->head - q->tail >= q->max) {
			err = ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > q->max_gs) {
			err = EINVAL;
			break;
		}
		q->ids[q->head & q->mask] = wr->wr_id;
		q->head++;
		q->posted++;
	}
	if (err)
		*bad_wr = wr;
	pthread_mutex_unlock(&q->lock);
	return err;
}

static int sim_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return EOPNOTSUPP;
}

/* ------------------------------------------------------- the ibv_wr_* API */

static void finish_cur(struct sim_qp *qp)
{
	if (!qp->cur)
		return;
	qp->cur->wqebbs = (qp->cur_size + WQEBB - 1) / WQEBB;
	qp->cur->size16 = (uint8_t)((qp->cur_size + 15) / 16);
	qp->cur_post += qp->cur->wqebbs;
	qp->cur = NULL;
}

static void batch_fail(struct sim_qp *qp, int err, uint64_t *counter)
{
	if (qp->batch_err)
		return;
	qp->batch_err = err;
	qp->batch_err_counter = counter;
}

static void wr_begin(struct ibv_qp_ex *qpx, int opcode)
{
	struct sim_qp *qp = qpx_to_sqp(qpx);
	struct sim_wr *w;

	finish_cur(qp);
	if (qp->batch_err)
		return;
	if (!opcode_valid(qp, opcode)) {
		batch_fail(qp, EINVAL, &qp->c.einval);
		return;
	}
	if (qp->head - qp->tail + qp->batch_n >= qp->max_post) {
		batch_fail(qp, ENOMEM, &qp->c.enomem_sq_full);
		return;
	}
	w = &qp->wrs[(qp->head + qp->batch_n) & qp->ring_mask];
	memset(w, 0, sizeof(*w));
	w->wr_id = qpx->wr_id;
	w->opcode = opcode;
	w->signaled = qp->sig_all || (qpx->wr_flags & IBV_SEND_SIGNALED);
	qp->cur = w;
	qp->cur_size = op_overhead(qp, opcode);
	qp->batch_n++;
}

static void sim_wr_send(struct ibv_qp_ex *qpx) { wr_begin(qpx, IBV_WR_SEND); }

static void sim_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	(void)imm;
	wr_begin(qpx, IBV_WR_SEND_WITH_IMM);
}

static void sim_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
	(void)rkey;
	(void)raddr;
	wr_begin(qpx, IBV_WR_RDMA_WRITE);
}

static void sim_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr,
				  __be32 imm)
{
	(void)rkey;
	(void)raddr;
	(void)imm;
	wr_begin(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);
}

static void sim_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
	(void)rkey;
	(void)raddr;
	wr_begin(qpx, IBV_WR_RDMA_READ);
}

static void sim_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	(void)invalidate_rkey;
	wr_begin(qpx, IBV_WR_SEND_WITH_INV);
}

static void sim_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr,
				  uint64_t compare, uint64_t swap)
{
	(void)rkey;
	(void)raddr;
	(void)compare;
	(void)swap;
	wr_begin(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);
}

static void sim_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr,
				    uint64_t add)
{
	(void)rkey;
	(void)raddr;
	(void)add;
	wr_begin(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);
}

/* The builders below make a whole WQE: no setter follows. */
static void sim_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr,
				const void *atomic_wr)
{
	(void)rkey;
	(void)raddr;
	(void)atomic_wr;
	wr_begin(qpx, IBV_WR_ATOMIC_WRITE);
}

static void sim_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	(void)invalidate_rkey;
	wr_begin(qpx, IBV_WR_LOCAL_INV);
}

static void sim_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
			   const struct ibv_mw_bind_info *info)
{
	(void)mw;
	(void)rkey;
	(void)info;
	wr_begin(qpx, IBV_WR_BIND_MW);
}

static void sim_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t qpn,
			       uint32_t qkey)
{
	(void)qpx;
	(void)ah;
	(void)qpn;
	(void)qkey;
}

static void set_inline(struct sim_qp *qp, size_t num, const struct ibv_data_buf *bufs)
{
	uint64_t total = 0;
	size_t i;

	if (qp->batch_err || !qp->cur)
		return;
	for (i = 0; i < num; i++)
		total += bufs[i].length;
	if (total > qp->max_inline) {
		batch_fail(qp, ENOMEM, &qp->c.enomem_inline);
		return;
	}
	for (i = 0; i < num; i++)
		copy_inline(qp, bufs[i].addr, bufs[i].length);
	if (total)
		qp->cur_size += align_up(INL_HDR + (uint32_t)total, 16);
	qp->cur->inl = 1;
	qp->cur->bytes = (uint32_t)total;
}

static void sim_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };

	set_inline(qpx_to_sqp(qpx), 1, &b);
}

static void sim_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num,
					const struct ibv_data_buf *bufs)
{
	set_inline(qpx_to_sqp(qpx), num, bufs);
}

static void set_sges(struct sim_qp *qp, size_t num, const struct ibv_sge *sg)
{
	size_t i;

	if (qp->batch_err || !qp->cur)
		return;
	if (num > qp->max_gs) {
		batch_fail(qp, ENOMEM, &qp->c.enomem_sge);
		return;
	}
	qp->cur->inl = 0;
	qp->cur->bytes = 0;
	qp->cur->sges = 0;
	for (i = 0; i < num; i++) {
		qp->cur->bytes += sg[i].length;
		if (sg[i].length) {
			qp->cur_size += DATA_SEG;
			qp->cur->sges++;
		}
	}
}

static void sim_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
			   uint32_t length)
{
	struct ibv_sge s = { .addr = addr, .length = length, .lkey = lkey };

	set_sges(qpx_to_sqp(qpx), 1, &s);
}

static void sim_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num, const struct ibv_sge *sg)
{
	set_sges(qpx_to_sqp(qpx), num, sg);
}

static void sim_wr_start(struct ibv_qp_ex *qpx)
{
	struct sim_qp *qp = qpx_to_sqp(qpx);

	pthread_mutex_lock(&qp->lock); /* held until wr_complete/wr_abort, as mlx5 */
	qp->batch_active = 1;
	qp->batch_n = 0;
	qp->batch_err = 0;
	qp->batch_err_counter = NULL;
	qp->cur = NULL;
	qp->cur_size = 0;
	qp->batch_post = qp->cur_post;
}

static int sim_wr_complete(struct ibv_qp_ex *qpx)
{
	struct sim_qp *qp = qpx_to_sqp(qpx);
	int err;

	if (!qp->batch_active)
		return EINVAL;
	finish_cur(qp);
	qp->cur_post = qp->batch_post; /* commit() advances it for real */
	qp->c.post_calls++;
	err = qp->batch_err;
	if (!err && qp->state_max_gs < 0) {
		/* mlx5's wr_complete outside RTS: EINVAL, the batch rolled back */
		err = EINVAL;
		qp->batch_err_counter = &qp->c.einval;
		qp->c.not_rts++;
	}
	if (err)
		(*qp->batch_err_counter)++; /* mlx5 drops the whole batch */
	else
		commit(qp, qp->batch_n);
	qp->batch_active = 0;
	qp->batch_n = 0;
	pthread_mutex_unlock(&qp->lock);
	return err;
}

static void sim_wr_abort(struct ibv_qp_ex *qpx)
{
	struct sim_qp *qp = qpx_to_sqp(qpx);

	if (!qp->batch_active)
		return;
	qp->cur = NULL;
	qp->cur_post = qp->batch_post;
	qp->batch_active = 0;
	qp->batch_n = 0;
	pthread_mutex_unlock(&qp->lock);
}

/* -------------------------------------------------------- control path */

struct ibv_context *sqsim_open_device(const struct sqsim_config *cfg)
{
	struct sim_ctx *ctx = calloc(1, sizeof(*ctx));

	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	if (cfg)
		ctx->cfg = *cfg;
	else
		sqsim_default_config(&ctx->cfg);
	if (ctx->cfg.link_gbps <= 0)
		ctx->cfg.link_gbps = 100.0;
	if (!ctx->cfg.max_qp_wr)
		ctx->cfg.max_qp_wr = 32768;
	if (!ctx->cfg.max_sge)
		ctx->cfg.max_sge = 30;
	ctx->ibctx.device = &sim_ibdev;
	ctx->ibctx.cmd_fd = -1;
	ctx->ibctx.async_fd = -1;
	ctx->ibctx.num_comp_vectors = 1;
	pthread_mutex_init(&ctx->ibctx.mutex, NULL);
	ctx->ibctx.ops.poll_cq = sim_poll_cq;
	ctx->ibctx.ops.req_notify_cq = sim_req_notify_cq;
	ctx->ibctx.ops.post_send = sim_post_send;
	ctx->ibctx.ops.post_recv = sim_post_recv;
	ctx->ibctx.ops.post_srq_recv = sim_post_srq_recv;
	return &ctx->ibctx;
}

int sqsim_close_device(struct ibv_context *ctx)
{
	if (!ctx)
		return EINVAL;
	pthread_mutex_destroy(&ctx->mutex);
	free(ctx);
	return 0;
}

void sqsim_set_clock(struct ibv_context *ctx, uint64_t ns)
{
	to_sctx(ctx)->manual_clock = ns;
}

struct ibv_pd *sqsim_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = ctx;
	return pd;
}

int sqsim_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

static uint32_t next_key = 0x1000;

struct ibv_mr *sqsim_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct ibv_mr *mr = calloc(1, sizeof(*mr));

	(void)access;
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	pthread_mutex_lock(&qpn_lock);
	mr->lkey = mr->rkey = next_key++;
	pthread_mutex_unlock(&qpn_lock);
	return mr;
}

int sqsim_dereg_mr(struct ibv_mr *mr)
{
	free(mr);
	return 0;
}

static struct sim_cq *new_cq(struct ibv_context *ctx, int cqe)
{
	struct sim_cq *cq;

	if (cqe < 1 || cqe > 4194304) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->cap = (uint32_t)roundup_pow2((uint64_t)cqe + 1) - 1;
	cq->ring = calloc(cq->cap, sizeof(*cq->ring));
	if (!cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&cq->lock, NULL);
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	cq->ibcq.context = ctx;
	cq->ibcq.cqe = (int)cq->cap;
	return cq;
}

struct ibv_cq *sqsim_create_cq(struct ibv_context *ctx, int cqe)
{
	struct sim_cq *cq = new_cq(ctx, cqe);

	return cq ? &cq->ibcq : NULL;
}

struct ibv_cq_ex *sqsim_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr)
{
	struct sim_cq *cq;

	if (!attr || attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	cq = new_cq(ctx, (int)attr->cqe);
	if (!cq)
		return NULL;
	cq->cqx.start_poll = sim_start_poll;
	cq->cqx.next_poll = sim_next_poll;
	cq->cqx.end_poll = sim_end_poll;
	cq->cqx.read_opcode = sim_read_opcode;
	cq->cqx.read_vendor_err = sim_read_zero32;
	cq->cqx.read_byte_len = sim_read_byte_len;
	cq->cqx.read_qp_num = sim_read_qp_num;
	cq->cqx.read_src_qp = sim_read_zero32;
	cq->cqx.read_wc_flags = sim_read_wc_flags;
	return &cq->cqx;
}

int sqsim_modify_cq(struct ibv_cq *ibcq, struct ibv_modify_cq_attr *attr)
{
	struct sim_cq *cq = to_scq(ibcq);

	if (!cq || !attr || (attr->attr_mask & ~(uint32_t)IBV_CQ_ATTR_MODERATE))
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	if (attr->attr_mask & IBV_CQ_ATTR_MODERATE) {
		cq->mod_count = attr->moderate.cq_count;
		cq->mod_period = attr->moderate.cq_period;
		cq->c.modifies++;
	}
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* sqsim_resize_cq keeps the queued completions, in order; a depth below
 * what is queued is EINVAL, as on mlx5. */
int sqsim_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sim_cq *cq = to_scq(ibcq);
	struct sim_cqe *ring;
	uint32_t cap;
	uint64_t k, n;

	if (!cq || cqe < 1 || cqe > 4194304)
		return EINVAL;
	cap = (uint32_t)roundup_pow2((uint64_t)cqe + 1) - 1;
	pthread_mutex_lock(&cq->lock);
	n = cq->prod - cq->cons;
	if (n > cap) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	ring = calloc(cap, sizeof(*ring));
	if (!ring) {
		pthread_mutex_unlock(&cq->lock);
		return ENOMEM;
	}
	for (k = 0; k < n; k++)
		ring[k] = cq->ring[(cq->cons + k) % cq->cap];
	free(cq->ring);
	cq->ring = ring;
	cq->cap = cap;
	cq->cons = 0;
	cq->prod = n;
	cq->ibcq.cqe = (int)cap;
	cq->c.resizes++;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

int sqsim_destroy_cq(struct ibv_cq *ibcq)
{
	struct sim_cq *cq = to_scq(ibcq);

	if (!cq)
		return EINVAL;
	if (cq->nqps || cq->nrqps)
		return EBUSY;
	pthread_mutex_destroy(&cq->lock);
	free(cq->qps);
	free(cq->rqps);
	free(cq->ring);
	free(cq);
	return 0;
}

struct ibv_ah *sqsim_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah *ah = calloc(1, sizeof(*ah));

	(void)attr;
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->context = pd->context;
	ah->pd = pd;
	return ah;
}

int sqsim_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}

/* The wr_* opcodes the simulator builds (no TSO: it has no raw packet
 * QPs; no XRC). */
#define SIM_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		      IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
		      IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		      IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | \
		      IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV | \
		      IBV_QP_EX_WITH_ATOMIC_WRITE)
/* What an RC QP created without send_ops_flags may post (mlx5's list). */
#define LEGACY_RC_OPS (SIM_SEND_OPS & ~(uint64_t)IBV_QP_EX_WITH_ATOMIC_WRITE)

/* sqsim_limits says what sqsim_create_qp(_ex) accepts at most for a QP of
 * qp_type posting ops (with_ops: given as send_ops_flags, else the legacy
 * verbs' set): max_send_wr, max_send_sge and max_inline_data, for error
 * messages that name the limit. */
void sqsim_limits(struct ibv_context *ctx, int qp_type, uint64_t ops, int with_ops,
		  uint32_t *max_wr, uint32_t *max_sge, uint32_t *max_inline)
{
	struct sim_ctx *c = to_sctx(ctx);
	uint32_t ovh = sq_overhead(qp_type, with_ops ? ops : LEGACY_RC_OPS);

	*max_wr = c->cfg.max_qp_wr;
	*max_sge = c->cfg.max_sge;
	if ((MAX_WQE_BYTES - ovh) / DATA_SEG < *max_sge)
		*max_sge = (MAX_WQE_BYTES - ovh) / DATA_SEG;
	/* ovh + align(INL_HDR + inline, 16) fits MAX_WQE_BYTES */
	*max_inline = MAX_WQE_BYTES - ovh - INL_HDR;
}


/* cq_add appends qp to a CQ's list of QPs, growing it; 0 without memory. */
static int cq_add(struct sim_qp ***list, int *n, int *cap, struct sim_qp *qp)
{
	if (*n == *cap) {
		int ncap = *cap ? *cap * 2 : 8;
		struct sim_qp **l = realloc(*list, (size_t)ncap * sizeof(*l));

		if (!l)
			return 0;
		*list = l;
		*cap = ncap;
	}
	(*list)[(*n)++] = qp;
	return 1;
}

static void free_qp(struct sim_qp *qp)
{
	pthread_mutex_destroy(&qp->lock);
	free(qp->wrs);
	free(qp->wqe_buf);
	free(qp->rq_ids);
	free(qp->rcv);
	free(qp);
}

static struct ibv_qp *create_qp(struct ibv_context *ibctx, struct ibv_qp_init_attr_ex *attr)
{
	struct sim_ctx *ctx = to_sctx(ibctx);
	struct sim_qp *qp;
	uint32_t ovh, wqe, inl;
	uint64_t wq_size, ring;
	int with_ops = !!(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS);

	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!attr->send_cq || !attr->recv_cq || !attr->pd || attr->cap.max_send_wr == 0 ||
	    attr->cap.max_send_wr > ctx->cfg.max_qp_wr ||
	    attr->cap.max_recv_wr > ctx->cfg.max_qp_wr ||
	    attr->cap.max_send_sge > ctx->cfg.max_sge ||
	    attr->cap.max_recv_sge > ctx->cfg.max_sge ||
	    (with_ops && (attr->send_ops_flags & ~(uint64_t)SIM_SEND_OPS))) {
		errno = EINVAL;
		return NULL;
	}

	/* mlx5 sq_overhead / calc_send_wqe / calc_sq_size */
	ovh = sq_overhead(attr->qp_type, with_ops ? attr->send_ops_flags : LEGACY_RC_OPS);
	wqe = ovh + attr->cap.max_send_sge * DATA_SEG;
	if (attr->cap.max_inline_data) {
		inl = ovh + align_up(INL_HDR + attr->cap.max_inline_data, 16);
		if (inl > wqe)
			wqe = inl;
	}
	wqe = align_up(wqe, WQEBB);
	if (wqe > MAX_WQE_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	wq_size = roundup_pow2((uint64_t)attr->cap.max_send_wr * wqe);

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->ctx = ctx;
	qp->ovh = ovh;
	qp->wqe_size = wqe;
	qp->wqe_cnt = (uint32_t)(wq_size / WQEBB);
	qp->max_post = (uint32_t)(wq_size / wqe);
	qp->max_gs = attr->cap.max_send_sge;
	qp->state_max_gs = -1;
	qp->max_inline = wqe - ovh - INL_HDR;
	qp->sig_all = attr->sq_sig_all;
	qp->has_qpx = with_ops;
	qp->send_ops = attr->send_ops_flags;
	ring = roundup_pow2(qp->max_post);
	qp->ring_mask = ring - 1;
	qp->wrs = calloc(ring, sizeof(*qp->wrs));
	qp->wqe_buf = calloc(qp->wqe_cnt, WQEBB);
	/* the RQ: max_recv_wr rounded up to a power of two, as mlx5 */
	qp->rq_max = attr->cap.max_recv_wr ? (uint32_t)roundup_pow2(attr->cap.max_recv_wr) : 0;
	qp->rq_max_gs = attr->cap.max_recv_sge;
	qp->rq_state_max_gs = -1;
	qp->rq_mask = qp->rq_max ? qp->rq_max - 1 : 0;
	if (attr->srq) {
		/* no RQ of its own: its receives come from the SRQ, any of
		 * whose receives it may hold completed at once */
		qp->srq = to_ssrq(attr->srq);
		qp->rq_max = 0;
		qp->rq_mask = qp->srq->mask;
	}
	qp->rq_ids = calloc(qp->rq_mask + 1, sizeof(*qp->rq_ids));
	qp->rcv = calloc(qp->rq_mask + 1, sizeof(*qp->rcv));
	qp->rnr_retry = 7;
	if (!qp->wrs || !qp->wqe_buf || !qp->rq_ids || !qp->rcv) {
		free(qp->wrs);
		free(qp->wqe_buf);
		free(qp->rq_ids);
		free(qp->rcv);
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&qp->lock, NULL);

	struct ibv_qp *b = &qp->qpx.qp_base;
	b->context = ibctx;
	b->qp_context = attr->qp_context;
	b->pd = attr->pd;
	b->send_cq = attr->send_cq;
	b->recv_cq = attr->recv_cq;
	b->srq = attr->srq;
	b->state = IBV_QPS_RESET;
	b->qp_type = attr->qp_type;
	pthread_mutex_init(&b->mutex, NULL);
	pthread_cond_init(&b->cond, NULL);
	pthread_mutex_lock(&qpn_lock);
	b->qp_num = next_qpn++;
	b->handle = b->qp_num;
	pthread_mutex_unlock(&qpn_lock);

	qp->qpx.wr_send = sim_wr_send;
	qp->qpx.wr_send_imm = sim_wr_send_imm;
	qp->qpx.wr_rdma_write = sim_wr_rdma_write;
	qp->qpx.wr_rdma_write_imm = sim_wr_rdma_write_imm;
	qp->qpx.wr_rdma_read = sim_wr_rdma_read;
	qp->qpx.wr_set_ud_addr = sim_wr_set_ud_addr;
	qp->qpx.wr_set_inline_data = sim_wr_set_inline_data;
	qp->qpx.wr_set_inline_data_list = sim_wr_set_inline_data_list;
	qp->qpx.wr_set_sge = sim_wr_set_sge;
	qp->qpx.wr_set_sge_list = sim_wr_set_sge_list;
	qp->qpx.wr_start = sim_wr_start;
	qp->qpx.wr_complete = sim_wr_complete;
	qp->qpx.wr_abort = sim_wr_abort;
	/* the other opcodes, each only when asked for, as mlx5 fills them */
	if (qp->send_ops & IBV_QP_EX_WITH_SEND_WITH_INV)
		qp->qpx.wr_send_inv = sim_wr_send_inv;
	if (qp->send_ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		qp->qpx.wr_atomic_cmp_swp = sim_wr_atomic_cmp_swp;
	if (qp->send_ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		qp->qpx.wr_atomic_fetch_add = sim_wr_atomic_fetch_add;
	if (qp->send_ops & IBV_QP_EX_WITH_ATOMIC_WRITE)
		qp->qpx.wr_atomic_write = sim_wr_atomic_write;
	if (qp->send_ops & IBV_QP_EX_WITH_LOCAL_INV)
		qp->qpx.wr_local_inv = sim_wr_local_inv;
	if (qp->send_ops & IBV_QP_EX_WITH_BIND_MW)
		qp->qpx.wr_bind_mw = sim_wr_bind_mw;

	qp->c.qp_num = b->qp_num;
	qp->c.max_send_wr = qp->max_post;
	qp->c.max_inline_data = qp->max_inline;

	/* report the caps the QP has, as mlx5 does */
	attr->cap.max_send_wr = qp->max_post;
	attr->cap.max_inline_data = qp->max_inline;
	if (attr->cap.max_recv_wr)
		attr->cap.max_recv_wr = (uint32_t)roundup_pow2(attr->cap.max_recv_wr);

	{
		struct sim_cq *scq = to_scq(attr->send_cq);
		int ok;

		pthread_mutex_lock(&scq->lock);
		ok = cq_add(&scq->qps, &scq->nqps, &scq->qps_cap, qp);
		pthread_mutex_unlock(&scq->lock);
		if (!ok) {
			free_qp(qp);
			errno = ENOMEM;
			return NULL;
		}
	}
	if (qp->rq_max || qp->srq) {
		struct sim_cq *rcq = to_scq(attr->recv_cq);

		pthread_mutex_lock(&rcq->lock);
		if (!cq_add(&rcq->rqps, &rcq->nrqps, &rcq->rqps_cap, qp))
			qp->rq_max = 0; /* no room to complete its receives: none taken */
		pthread_mutex_unlock(&rcq->lock);
	}
	if (qp->srq) {
		pthread_mutex_lock(&qp->srq->lock);
		qp->srq->nqps++;
		pthread_mutex_unlock(&qp->srq->lock);
	}
	return b;
}

struct ibv_qp *sqsim_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct ibv_qp *qp;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ex, 0, sizeof(ex));
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	qp = create_qp(pd->context, &ex);
	if (qp)
		attr->cap = ex.cap;
	return qp;
}

struct ibv_qp *sqsim_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	if (!ctx || !attr || !(attr->comp_mask & IBV_QP_INIT_ATTR_PD)) {
		errno = EINVAL;
		return NULL;
	}
	return create_qp(ctx, attr);
}

struct ibv_qp_ex *sqsim_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct sim_qp *qp = to_sqp(ibqp);

	if (!qp || !qp->has_qpx) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return &qp->qpx;
}

int sqsim_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct sim_qp *qp = to_sqp(ibqp);
	uint64_t now, s;

	if (!qp || !attr)
		return EINVAL;
	if (!(attr_mask & IBV_QP_STATE))
		return 0;
	if (attr->qp_state > IBV_QPS_ERR)
		return EINVAL;
	pthread_mutex_lock(&qp->lock);
	if (attr->qp_state == IBV_QPS_ERR && ibqp->state != IBV_QPS_ERR) {
		/* flush: every WR the NIC has not executed yet completes in error */
		now = sim_now(qp->ctx);
		for (s = qp->next_cqe; s < qp->head; s++) {
			struct sim_wr *w = &qp->wrs[s & qp->ring_mask];

			if (w->done_ns > now) {
				w->flush = 1;
				w->done_ns = now;
			}
		}
	}
	if (attr->qp_state == IBV_QPS_RESET) {
		qp->state_max_gs = -1;
		qp->rq_state_max_gs = -1;
		qp->rq_head = qp->rq_cons = qp->rq_tail = 0;
		qp->rcv_head = qp->rcv_tail = 0;
	} else if (attr->qp_state == IBV_QPS_INIT) {
		qp->rq_state_max_gs = (int)qp->rq_max_gs;
	} else if (attr->qp_state == IBV_QPS_RTS) {
		qp->state_max_gs = (int)qp->max_gs;
	}
	if (attr_mask & IBV_QP_RNR_RETRY)
		qp->rnr_retry = attr->rnr_retry;
	if (attr_mask & IBV_QP_MIN_RNR_TIMER)
		qp->min_rnr_timer = attr->min_rnr_timer;
	if (attr->qp_state == IBV_QPS_RESET) {
		qp->head = qp->tail = qp->next_cqe = 0;
		qp->cur_post = 0;
		qp->engine_free_ns = 0;
	}
	ibqp->state = attr->qp_state;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

int sqsim_destroy_qp(struct ibv_qp *ibqp)
{
	struct sim_qp *qp = to_sqp(ibqp);
	struct sim_cq *cq;
	int i;

	if (!qp)
		return EINVAL;
	cq = to_scq(ibqp->send_cq);
	pthread_mutex_lock(&cq->lock);
	for (i = 0; i < cq->nqps; i++)
		if (cq->qps[i] == qp) {
			cq->qps[i] = cq->qps[--cq->nqps];
			break;
		}
	/* drop its CQEs still queued on the CQ */
	for (uint64_t k = cq->cons; k < cq->prod; k++)
		if (cq->ring[k % cq->cap].qp == qp)
			cq->ring[k % cq->cap].qp = NULL;
	pthread_mutex_unlock(&cq->lock);
	cq = to_scq(ibqp->recv_cq);
	pthread_mutex_lock(&cq->lock);
	for (i = 0; i < cq->nrqps; i++)
		if (cq->rqps[i] == qp) {
			cq->rqps[i] = cq->rqps[--cq->nrqps];
			break;
		}
	for (uint64_t k = cq->cons; k < cq->prod; k++)
		if (cq->ring[k % cq->cap].qp == qp)
			cq->ring[k % cq->cap].qp = NULL;
	pthread_mutex_unlock(&cq->lock);
	if (qp->peer) {
		/* the peer's SENDs complete without a receive from now on */
		pthread_mutex_lock(&qp->peer->lock);
		qp->peer->peer = NULL;
		pthread_mutex_unlock(&qp->peer->lock);
	}
	if (qp->srq) {
		pthread_mutex_lock(&qp->srq->lock);
		qp->srq->nqps--;
		pthread_mutex_unlock(&qp->srq->lock);
	}
	free_qp(qp);
	return 0;
}

struct ibv_srq *sqsim_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct sim_ctx *ctx;
	struct sim_srq *q;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	ctx = to_sctx(pd->context);
	if (attr->attr.max_wr == 0 || attr->attr.max_wr > ctx->cfg.max_qp_wr ||
	    attr->attr.max_sge == 0 || attr->attr.max_sge > ctx->cfg.max_sge) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	/* mlx5: max_wr + 1 rounded up to a power of two, one kept empty */
	q->mask = roundup_pow2((uint64_t)attr->attr.max_wr + 1) - 1;
	q->max = (uint32_t)q->mask;
	q->max_gs = attr->attr.max_sge;
	q->ids = calloc(q->mask + 1, sizeof(*q->ids));
	if (!q->ids) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	q->ibsrq.context = pd->context;
	q->ibsrq.pd = pd;
	q->ibsrq.srq_context = attr->srq_context;
	pthread_mutex_init(&q->ibsrq.mutex, NULL);
	pthread_cond_init(&q->ibsrq.cond, NULL);
	attr->attr.max_wr = q->max;
	return &q->ibsrq;
}

int sqsim_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sim_srq *q = to_ssrq(ibsrq);

	if (!q)
		return EINVAL;
	if (q->nqps)
		return EBUSY;
	pthread_mutex_destroy(&q->lock);
	free(q->ids);
	free(q);
	return 0;
}

int sqsim_srq_posted(struct ibv_srq *ibsrq, uint64_t *posted, uint64_t *outstanding)
{
	struct sim_srq *q = to_ssrq(ibsrq);

	if (!q)
		return EINVAL;
	pthread_mutex_lock(&q->lock);
	*posted = q->posted;
	*outstanding = q->head - q->tail;
	pthread_mutex_unlock(&q->lock);
	return 0;
}

int sqsim_qp_counters(struct ibv_qp *ibqp, struct sqsim_counters *out)
{
	struct sim_qp *qp = to_sqp(ibqp);
	struct sim_cq *cq;

	if (!qp || !out)
		return EINVAL;
	/* let the NIC write what it has executed by now */
	cq = to_scq(ibqp->send_cq);
	pthread_mutex_lock(&cq->lock);
	advance_qp(cq, qp, sim_now(qp->ctx));
	pthread_mutex_unlock(&cq->lock);
	pthread_mutex_lock(&qp->lock);
	*out = qp->c;
	out->outstanding = qp->head - qp->tail;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

int sqsim_cq_counters(struct ibv_cq *ibcq, struct sqsim_cq_counters *out)
{
	struct sim_cq *cq = to_scq(ibcq);

	if (!cq || !out)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	*out = cq->c;
	out->cqe = cq->ibcq.cqe;
	out->mod_count = cq->mod_count;
	out->mod_period = cq->mod_period;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}
