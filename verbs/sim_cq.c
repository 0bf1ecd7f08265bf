/* The simulated HCA's completions: the NIC writing CQEs for executed WRs
 * and for the receives SENDs took (in order, a CQ overrun as the IB spec's CQ error), ibv_poll_cq and
 * extended polling (ibv_start_poll .. ibv_end_poll), and the CQ calls
 * (create, create_ex, modify, resize, destroy) with their counters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

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

/* Turn executed WRs of qp into CQEs on cq (caller holds cq->lock). */
SIM_HIDDEN void advance_qp(struct sim_cq *cq, struct sim_qp *qp, uint64_t now)
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

static int sim_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return EOPNOTSUPP;
}

/* sim_poll_ops installs the CQ data path in a context's ops table. */
SIM_HIDDEN void sim_poll_ops(struct ibv_context_ops *ops)
{
	ops->poll_cq = sim_poll_cq;
	ops->req_notify_cq = sim_req_notify_cq;
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
