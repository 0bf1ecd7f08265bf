/* The simulated HCA's ibv_wr_* API: a batch from ibv_wr_start to
 * ibv_wr_complete (or ibv_wr_abort) holds the QP's lock, each builder
 * starts a WQE and the setters fill it, and ibv_wr_complete rings one
 * doorbell for the batch (commit) or drops all of it, as mlx5 does. */
#include <errno.h>
#include <string.h>

#include "sim_internal.h"

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

/* sim_wr_ops fills a QP's ibv_qp_ex with the builders and setters. */
SIM_HIDDEN void sim_wr_ops(struct sim_qp *qp)
{
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
}
