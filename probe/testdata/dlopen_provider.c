/* A fake verbs provider built as a shared library and dlopen()ed by
 * testdata/dlopen_target.c after the target has started. Its data path
 * (post_send, poll_cq, post_recv) is static: the only way to it is the
 * context's ops table, filled here, so a tracer can only find it through
 * the pointers a QP creation reveals, in a file it had never heard of when
 * it attached. Only the sqfake_provider table is exported.
 *
 * The fake SQ holds max_send_wr WRs; a WR is retired when its CQE is
 * polled, or at once when it is unsignaled. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlopen_provider.h"

#define EXPORT __attribute__((visibility("default")))
#define CQ_DEPTH 4096

struct fqp {
	struct ibv_qp qp;
	uint32_t max_post;
	uint64_t head, tail; /* posted, retired */
};

struct fcq {
	struct ibv_cq cq;
	pthread_mutex_t lock;
	struct ibv_wc ring[CQ_DEPTH];
	struct fqp *owner[CQ_DEPTH];
	unsigned head, tail;
};

static int prov_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fqp *qp = (struct fqp *)ibqp;
	struct fcq *cq = (struct fcq *)ibqp->send_cq;

	for (; wr; wr = wr->next) {
		if (qp->head - qp->tail >= qp->max_post) {
			*bad = wr;
			return ENOMEM;
		}
		qp->head++;
		if (!(wr->send_flags & IBV_SEND_SIGNALED)) {
			qp->tail++;
			continue;
		}
		pthread_mutex_lock(&cq->lock);
		struct ibv_wc *wc = &cq->ring[cq->head % CQ_DEPTH];
		memset(wc, 0, sizeof(*wc));
		wc->wr_id = wr->wr_id;
		wc->status = IBV_WC_SUCCESS;
		wc->opcode = IBV_WC_SEND;
		wc->qp_num = ibqp->qp_num;
		cq->owner[cq->head % CQ_DEPTH] = qp;
		cq->head++;
		pthread_mutex_unlock(&cq->lock);
	}
	return 0;
}

static int prov_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct fcq *cq = (struct fcq *)ibcq;
	int n = 0;

	pthread_mutex_lock(&cq->lock);
	while (n < num && cq->tail != cq->head) {
		cq->owner[cq->tail % CQ_DEPTH]->tail++;
		wc[n++] = cq->ring[cq->tail++ % CQ_DEPTH];
	}
	pthread_mutex_unlock(&cq->lock);
	return n;
}

static int prov_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	(void)wr;
	(void)bad;
	return 0;
}

static struct ibv_context *prov_open(void)
{
	struct ibv_context *ctx = calloc(1, sizeof(*ctx));

	/* a plain ibv_context: abi_compat is not __VERBS_ABI_IS_EXTENDED */
	ctx->ops.post_send = prov_post_send;
	ctx->ops.poll_cq = prov_poll_cq;
	ctx->ops.post_recv = prov_post_recv;
	return ctx;
}

static struct ibv_cq *prov_create_cq(struct ibv_context *ctx)
{
	struct fcq *cq = calloc(1, sizeof(*cq));

	cq->cq.context = ctx;
	cq->cq.cqe = CQ_DEPTH;
	pthread_mutex_init(&cq->lock, NULL);
	return &cq->cq;
}

static uint32_t next_qpn = 0x300;

static struct ibv_qp *prov_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct fqp *qp = calloc(1, sizeof(*qp));

	qp->qp.context = pd->context;
	qp->qp.pd = pd;
	qp->qp.send_cq = attr->send_cq;
	qp->qp.recv_cq = attr->recv_cq;
	qp->qp.qp_num = __atomic_fetch_add(&next_qpn, 1, __ATOMIC_RELAXED);
	qp->qp.qp_type = attr->qp_type;
	qp->qp.state = IBV_QPS_RESET;
	/* like a real provider, round the SQ up */
	attr->cap.max_send_wr = (attr->cap.max_send_wr + 15) & ~15u;
	qp->max_post = attr->cap.max_send_wr;
	return &qp->qp;
}

static int prov_destroy_qp(struct ibv_qp *qp)
{
	free(qp);
	return 0;
}

static void prov_close(struct ibv_context *ctx, struct ibv_cq *cq)
{
	free(cq);
	free(ctx);
}

EXPORT const struct sqfake_provider sqfake_provider = {
	.open = prov_open,
	.create_cq = prov_create_cq,
	.create_qp = prov_create_qp,
	.destroy_qp = prov_destroy_qp,
	.close = prov_close,
};
