/* The simulated HCA's receive side: a SEND takes one of its connected
 * peer's receives (from its RQ or its SRQ) or meets an RNR NAK and
 * retries (its completion written by sim_cq.c), ibv_post_recv and
 * ibv_post_srq_recv as mlx5's, the simulated wire (sqsim_connect) and the
 * SRQ calls. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

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
SIM_HIDDEN int take_recv(struct sim_qp *qp, struct sim_wr *w, uint64_t now)
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

/* sim_recv_ops installs the receive data path in a context's ops table. */
SIM_HIDDEN void sim_recv_ops(struct ibv_context_ops *ops)
{
	ops->post_recv = sim_post_recv;
	ops->post_srq_recv = sim_post_srq_recv;
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
