/* The simulated HCA's QP calls, the ones the tracer hooks as libibverbs'
 * (create, create_ex, qp_to_qp_ex, modify, destroy): mlx5's WQE and SQ
 * sizing, the limits they imply (sqsim_limits), the state machine with
 * its flush, and the ground-truth counters of a QP. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#include <stddef.h>

__attribute__((used)) const struct sqsim_sq_layout sqsim_sq_layout = {
	.magic = SQSIM_SQ_LAYOUT_MAGIC,
	.size = sizeof(struct sqsim_sq_layout),
	.posted = offsetof(struct sim_qp, head),
	.retired = offsetof(struct sim_qp, tail),
	.width = sizeof(((struct sim_qp *)0)->head),
	.cq_errors = offsetof(struct sim_qp, c.cq_overrun_errs),
	.signaled = offsetof(struct sim_qp, c.signaled),
	.cqes_polled = offsetof(struct sim_qp, c.cqes_polled),
};

static uint32_t next_qpn = 0x1c0;
static pthread_mutex_t qpn_lock = PTHREAD_MUTEX_INITIALIZER;

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

	sim_wr_ops(qp);

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
