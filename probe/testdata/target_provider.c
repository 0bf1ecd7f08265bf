/* The probe tests' target, its fake provider: data-path functions static,
 * reachable only through the ops table and the ibv_qp_ex as a provider
 * library's are, and the simulated HCA's exported control path. See
 * target.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

/* ---- fake provider ------------------------------------------------------ */

/* libibverbs' struct verbs_qp (driver.h, not installed): the ibv_qp_ex, then
 * a comp_mask whose VERBS_QP_EX bit ibv_qp_to_qp_ex() tests. */
#define VERBS_QP_EX (1 << 1)

struct fqp {
	struct ibv_qp_ex qpx; /* qp_base first: qpx == qp */
	uint32_t comp_mask;
	struct fcq *cq;
	uint32_t max_post, max_sge, max_inline;
	int sig_all;
	uint64_t head, tail;
	/* wr API batch */
	int batch_n, batch_err, cur_inline;
	uint64_t batch_ids[64];
	int batch_sig[64];
};

static struct fqp *to_fqp(struct ibv_qp *qp) { return (struct fqp *)qp; }

static void push_cqe(struct fcq *cq, uint64_t wr_id, uint32_t qpn, uint32_t len)
{
	struct ibv_wc *wc;

	pthread_mutex_lock(&cq->lock);
	wc = &cq->ring[cq->head++ % 8192];
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = wr_id;
	wc->status = IBV_WC_SUCCESS;
	wc->opcode = IBV_WC_SEND;
	wc->byte_len = len;
	wc->qp_num = qpn;
	pthread_mutex_unlock(&cq->lock);
}

static int fake_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fqp *qp = to_fqp(ibqp);

	for (; wr; wr = wr->next) {
		uint32_t len = 0;
		int i;

		for (i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_RDMA_WRITE) {
			*bad = wr;
			return EINVAL;
		}
		if (qp->head - qp->tail >= qp->max_post || (uint32_t)wr->num_sge > qp->max_sge ||
		    ((wr->send_flags & IBV_SEND_INLINE) && len > qp->max_inline)) {
			*bad = wr;
			return ENOMEM;
		}
		qp->head++;
		if (qp->sig_all || (wr->send_flags & IBV_SEND_SIGNALED))
			push_cqe(qp->cq, wr->wr_id, ibqp->qp_num, len);
		else
			qp->tail++; /* retired without a CQE, for this fake */
	}
	return 0;
}

static int fake_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct fcq *cq = (struct fcq *)ibcq;
	int n = 0;

	pthread_mutex_lock(&cq->lock);
	while (n < num && cq->tail != cq->head) {
		wc[n++] = cq->ring[cq->tail++ % 8192];
	}
	pthread_mutex_unlock(&cq->lock);
	return n;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	(void)wr;
	(void)bad;
	return 0;
}

/* the fake retires signaled WRs when their CQE is polled */
void retire(struct ibv_qp *qp, int n) { to_fqp(qp)->tail += n; }

static void fake_wr_start(struct ibv_qp_ex *qpx)
{
	struct fqp *qp = (struct fqp *)qpx;

	qp->batch_n = 0;
	qp->batch_err = 0;
}

static void wr_begin(struct ibv_qp_ex *qpx)
{
	struct fqp *qp = (struct fqp *)qpx;

	if (qp->batch_n >= 64 || qp->head - qp->tail + qp->batch_n >= qp->max_post) {
		qp->batch_err = ENOMEM;
		return;
	}
	qp->batch_ids[qp->batch_n] = qpx->wr_id;
	qp->batch_sig[qp->batch_n] = qp->sig_all || (qpx->wr_flags & IBV_SEND_SIGNALED);
	qp->batch_n++;
}

static void fake_wr_send(struct ibv_qp_ex *qpx) { wr_begin(qpx); }
static void fake_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
	(void)rkey;
	(void)raddr;
	wr_begin(qpx);
}

static void fake_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t len)
{
	struct fqp *qp = (struct fqp *)qpx;

	(void)addr;
	if (len > qp->max_inline)
		qp->batch_err = ENOMEM;
}

static void fake_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t len)
{
	(void)qpx;
	(void)lkey;
	(void)addr;
	(void)len;
}

static void fake_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg)
{
	(void)qpx;
	(void)n;
	(void)sg;
}

static void fake_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *b)
{
	(void)qpx;
	(void)n;
	(void)b;
}

static int fake_wr_complete(struct ibv_qp_ex *qpx)
{
	struct fqp *qp = (struct fqp *)qpx;
	int i;

	if (qp->batch_err)
		return qp->batch_err;
	for (i = 0; i < qp->batch_n; i++) {
		qp->head++;
		if (qp->batch_sig[i])
			push_cqe(qp->cq, qp->batch_ids[i], qpx->qp_base.qp_num, 0);
		else
			qp->tail++;
	}
	return 0;
}

static void fake_wr_abort(struct ibv_qp_ex *qpx) { ((struct fqp *)qpx)->batch_n = 0; }

/* The builders of the other opcodes: every one takes a WQE. */
static void fake_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm) { (void)imm; wr_begin(qpx); }
static void fake_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t rkey) { (void)rkey; wr_begin(qpx); }
static void fake_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey) { (void)rkey; wr_begin(qpx); }

static void fake_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr)
{
	(void)rkey;
	(void)raddr;
	wr_begin(qpx);
}

static void fake_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, __be32 imm)
{
	(void)rkey;
	(void)raddr;
	(void)imm;
	wr_begin(qpx);
}

static void fake_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, uint64_t cmp, uint64_t swp)
{
	(void)rkey;
	(void)raddr;
	(void)cmp;
	(void)swp;
	wr_begin(qpx);
}

static void fake_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, uint64_t add)
{
	(void)rkey;
	(void)raddr;
	(void)add;
	wr_begin(qpx);
}

static void fake_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t raddr, const void *w)
{
	(void)rkey;
	(void)raddr;
	(void)w;
	wr_begin(qpx);
}

static void fake_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
			    const struct ibv_mw_bind_info *info)
{
	(void)mw;
	(void)rkey;
	(void)info;
	wr_begin(qpx);
}

static void fake_wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	wr_begin(qpx);
}

/* The address setters change nothing the fake counts. */
static void fake_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	(void)qpx;
	(void)ah;
	(void)qpn;
	(void)qkey;
}

static void fake_wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t srqn)
{
	(void)qpx;
	(void)srqn;
}

/* ---- extended CQ polling, and the CQ calls of the verbs_context ----------- */

static int fake_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct fcq *cq = (struct fcq *)cqx;

	(void)attr;
	pthread_mutex_lock(&cq->lock);
	if (cq->tail == cq->head) {
		pthread_mutex_unlock(&cq->lock);
		return ENOENT;
	}
	cq->cur = cq->ring[cq->tail++ % 8192];
	cqx->status = cq->cur.status;
	cqx->wr_id = cq->cur.wr_id;
	return 0; /* locked until end_poll */
}

static int fake_next_poll(struct ibv_cq_ex *cqx)
{
	struct fcq *cq = (struct fcq *)cqx;

	if (cq->tail == cq->head)
		return ENOENT;
	cq->cur = cq->ring[cq->tail++ % 8192];
	cqx->status = cq->cur.status;
	cqx->wr_id = cq->cur.wr_id;
	return 0;
}

static void fake_end_poll(struct ibv_cq_ex *cqx) { pthread_mutex_unlock(&((struct fcq *)cqx)->lock); }
static enum ibv_wc_opcode fake_read_opcode(struct ibv_cq_ex *cqx) { return ((struct fcq *)cqx)->cur.opcode; }
static uint32_t fake_read_byte_len(struct ibv_cq_ex *cqx) { return ((struct fcq *)cqx)->cur.byte_len; }
static uint32_t fake_read_qp_num(struct ibv_cq_ex *cqx) { return ((struct fcq *)cqx)->cur.qp_num; }

struct fcq *fake_create_cq(struct ibv_context *ctx);

static struct ibv_cq_ex *fake_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr)
{
	struct fcq *cq = fake_create_cq(ctx);

	cq->cq.cqe = (int)attr->cqe;
	cq->cqx.start_poll = fake_start_poll;
	cq->cqx.next_poll = fake_next_poll;
	cq->cqx.end_poll = fake_end_poll;
	cq->cqx.read_opcode = fake_read_opcode;
	cq->cqx.read_byte_len = fake_read_byte_len;
	cq->cqx.read_qp_num = fake_read_qp_num;
	return &cq->cqx;
}

static int fake_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr)
{
	(void)cq;
	return attr->attr_mask & ~(uint32_t)IBV_CQ_ATTR_MODERATE ? EINVAL : 0;
}

unsigned long srq_wrs;

static int fake_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)srq;
	(void)bad;
	for (; wr; wr = wr->next)
		srq_wrs++;
	return 0;
}

static struct ibv_qp *new_qp(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);

static struct ibv_qp *fake_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	return new_qp(ctx, a);
}

struct ibv_context *fake_open(void)
{
	struct verbs_context *vctx = calloc(1, sizeof(*vctx));
	struct ibv_context *ctx = &vctx->context;

	vctx->sz = sizeof(*vctx);
	vctx->create_qp_ex = fake_create_qp_ex;
	vctx->create_cq_ex = fake_create_cq_ex;
	vctx->modify_cq = fake_modify_cq;
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.post_send = fake_post_send;
	ctx->ops.poll_cq = fake_poll_cq;
	ctx->ops.post_recv = fake_post_recv;
	ctx->ops.post_srq_recv = fake_post_srq_recv;
	return ctx;
}

struct fcq *fake_create_cq(struct ibv_context *ctx)
{
	struct fcq *cq = calloc(1, sizeof(*cq));

	cq->cq.context = ctx;
	pthread_mutex_init(&cq->lock, NULL);
	return cq;
}

/* ---- the exported control path ------------------------------------------ */

static uint32_t next_qpn = 0x100;

NOINLINE struct ibv_pd *sqsim_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	pd->context = ctx;
	return pd;
}

static struct ibv_qp *new_qp(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct fqp *qp = calloc(1, sizeof(*qp));

	qp->qpx.qp_base.context = ctx;
	qp->qpx.qp_base.send_cq = a->send_cq;
	qp->qpx.qp_base.recv_cq = a->recv_cq;
	qp->qpx.qp_base.qp_num = __atomic_fetch_add(&next_qpn, 1, __ATOMIC_RELAXED);
	qp->qpx.qp_base.qp_type = a->qp_type;
	qp->qpx.qp_base.state = IBV_QPS_RESET;
	qp->comp_mask = VERBS_QP_EX;
	qp->cq = (struct fcq *)a->send_cq;
	/* like a provider, report more than was asked for */
	a->cap.max_send_wr = a->cap.max_send_wr + a->cap.max_send_wr / 2;
	a->cap.max_inline_data = a->cap.max_inline_data ? a->cap.max_inline_data + 60 : 0;
	qp->max_post = a->cap.max_send_wr;
	qp->max_sge = a->cap.max_send_sge;
	qp->max_inline = a->cap.max_inline_data;
	qp->sig_all = a->sq_sig_all;

	qp->qpx.wr_start = fake_wr_start;
	qp->qpx.wr_complete = fake_wr_complete;
	qp->qpx.wr_abort = fake_wr_abort;
	qp->qpx.wr_send = fake_wr_send;
	qp->qpx.wr_rdma_write = fake_wr_rdma_write;
	qp->qpx.wr_set_inline_data = fake_wr_set_inline_data;
	qp->qpx.wr_set_inline_data_list = fake_wr_set_inline_data_list;
	qp->qpx.wr_set_sge = fake_wr_set_sge;
	qp->qpx.wr_set_sge_list = fake_wr_set_sge_list;
	/* the other builders, as a provider fills them: when asked for */
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		uint64_t ops = a->send_ops_flags;

		if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM)
			qp->qpx.wr_send_imm = fake_wr_send_imm;
		if (ops & IBV_QP_EX_WITH_SEND_WITH_INV)
			qp->qpx.wr_send_inv = fake_wr_send_inv;
		if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
			qp->qpx.wr_rdma_write_imm = fake_wr_rdma_write_imm;
		if (ops & IBV_QP_EX_WITH_RDMA_READ)
			qp->qpx.wr_rdma_read = fake_wr_rdma_read;
		if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
			qp->qpx.wr_atomic_cmp_swp = fake_wr_atomic_cmp_swp;
		if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
			qp->qpx.wr_atomic_fetch_add = fake_wr_atomic_fetch_add;
		if (ops & IBV_QP_EX_WITH_ATOMIC_WRITE)
			qp->qpx.wr_atomic_write = fake_wr_atomic_write;
		if (ops & IBV_QP_EX_WITH_BIND_MW)
			qp->qpx.wr_bind_mw = fake_wr_bind_mw;
		if (ops & IBV_QP_EX_WITH_LOCAL_INV)
			qp->qpx.wr_local_inv = fake_wr_local_inv;
		if (ops & IBV_QP_EX_WITH_TSO) {
			qp->qpx.wr_send_tso = fake_wr_send_tso;
			qp->qpx.wr_set_ud_addr = fake_wr_set_ud_addr;
			qp->qpx.wr_set_xrc_srqn = fake_wr_set_xrc_srqn;
		}
	}
	return &qp->qpx.qp_base;
}

NOINLINE struct ibv_qp *sqsim_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct ibv_qp *qp;

	memset(&ex, 0, sizeof(ex));
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	qp = new_qp(pd->context, &ex);
	attr->cap = ex.cap;
	return qp;
}

NOINLINE struct ibv_qp *sqsim_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	return new_qp(ctx, attr);
}

NOINLINE struct ibv_qp_ex *sqsim_qp_to_qp_ex(struct ibv_qp *qp)
{
	return (struct ibv_qp_ex *)qp;
}

NOINLINE int sqsim_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

NOINLINE int sqsim_destroy_qp(struct ibv_qp *qp)
{
	free(qp);
	return 0;
}

/* ---- every other data-path entry point ------------------------------------ */

/* The CQ calls the tracer hooks by symbol in a binary that holds the
 * simulated HCA: sqsim_create_cq, sqsim_resize_cq, sqsim_destroy_cq. */
NOINLINE struct ibv_cq *sqsim_create_cq(struct ibv_context *ctx, int cqe)
{
	struct fcq *cq = fake_create_cq(ctx);

	cq->cq.cqe = cqe;
	return &cq->cq;
}

NOINLINE int sqsim_resize_cq(struct ibv_cq *cq, int cqe)
{
	if (cqe < 1)
		return EINVAL;
	cq->cqe = cqe | 1; /* like a provider: not quite what was asked */
	return 0;
}

NOINLINE int sqsim_destroy_cq(struct ibv_cq *cq)
{
	free(cq);
	return 0;
}
