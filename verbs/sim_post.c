/* The simulated HCA's send data path: ibv_post_send's checks and WQE
 * sizes as mlx5's, the doorbell (BlueFlame or not), the counters, and the
 * NIC's timing of each WR (commit: the formula of verbs/nicmodel). */
#include <errno.h>
#include <string.h>

#include "sim_internal.h"

SIM_HIDDEN int opcode_valid(struct sim_qp *qp, int opcode)
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

SIM_HIDDEN uint32_t op_overhead(struct sim_qp *qp, int opcode)
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
SIM_HIDDEN void copy_inline(struct sim_qp *qp, const void *src, uint32_t len)
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

/* needs_recv: the opcodes that take a receive at the responder. */
static int needs_recv(int opcode)
{
	return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
	       opcode == IBV_WR_SEND_WITH_INV || opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

/* Ring one doorbell for the n WRs starting at head (already described in
 * qp->wrs), count them and schedule their execution on the NIC. The
 * BlueFlame test looks at the last WQE, as mlx5's post_send_db does. */
SIM_HIDDEN void commit(struct sim_qp *qp, uint32_t n)
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

/* post_wrs is ibv_post_send's work, inlined into each of its callers: the
 * ops table's sim_post_send, whose error sites a tracer finds in its body,
 * and the direct path, sqsim_dv_post_send. */
static inline __attribute__((always_inline)) int post_wrs(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
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

static int sim_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr)
{
	return post_wrs(ibqp, wr, bad_wr);
}

int sqsim_dv_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad_wr)
{
	if (ibqp->context->ops.post_send != sim_post_send) {
		*bad_wr = wr;
		return EOPNOTSUPP; /* not a QP of the simulated HCA */
	}
	return post_wrs(ibqp, wr, bad_wr);
}

/* sim_send_ops installs the send data path in a context's ops table. */
SIM_HIDDEN void sim_send_ops(struct ibv_context_ops *ops)
{
	ops->post_send = sim_post_send;
}
