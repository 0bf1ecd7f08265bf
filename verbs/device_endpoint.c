/* The device backend's endpoints: a sending QP, its buffers and CQ, and
 * the peer QP on the same port it is connected to (RESET to RTS), with
 * the peer's receives posted; and their teardown. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_internal.h"

static void fill_ah(struct sqd_device *d, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->port_num = d->port;
	if (d->roce) {
		ah->is_global = 1;
		ah->grh.dgid = d->gid;
		ah->grh.sgid_index = (uint8_t)d->gid_index;
		ah->grh.hop_limit = 64;
	} else {
		ah->dlid = d->pattr.lid;
	}
}

/* RESET -> INIT -> RTR -> RTS, toward remote_qpn on the same port. */
static int connect_qp(struct sqd_device *d, struct ibv_qp *qp, int type, int atomics,
		      uint32_t remote_qpn, int stop_at_rtr, const char **step)
{
	struct ibv_qp_attr a;
	int mask, ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = d->port;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (type == IBV_QPT_UD) {
		a.qkey = SQD_UD_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | (atomics ? IBV_ACCESS_REMOTE_ATOMIC : 0);
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	*step = "moving QP to INIT";
	errno = 0;
	if ((ret = ibv_modify_qp(qp, &a, mask)))
		return ret_errno(ret);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (type == IBV_QPT_RC) {
		a.path_mtu = d->pattr.active_mtu;
		a.dest_qp_num = remote_qpn;
		a.rq_psn = 0;
		a.max_dest_rd_atomic = (uint8_t)min_u32(1, d->dattr.max_qp_rd_atom);
		a.min_rnr_timer = 12;
		fill_ah(d, &a.ah_attr);
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			IBV_QP_MIN_RNR_TIMER;
	}
	*step = "moving QP to RTR";
	errno = 0;
	if ((ret = ibv_modify_qp(qp, &a, mask)))
		return ret_errno(ret);
	if (stop_at_rtr)
		return 0;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7; /* retry forever while the loop reposts receives */
		a.max_rd_atomic = (uint8_t)min_u32(1, d->dattr.max_qp_rd_atom);
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	*step = "moving QP to RTS";
	errno = 0;
	if ((ret = ibv_modify_qp(qp, &a, mask)))
		return ret_errno(ret);
	return 0;
}

static int post_receives(struct sq_endpoint *ep)
{
	struct ibv_recv_wr wr[64], *bad;
	struct ibv_sge sge[64];
	uint32_t i = 0, n, k;
	int ret;

	while (i < ep->rq_depth) {
		n = min_u32(64, ep->rq_depth - i);
		for (k = 0; k < n; k++) {
			sge[k].addr = (uintptr_t)ep->rbuf + (uint64_t)(i + k) * ep->recv_size;
			sge[k].length = ep->recv_size;
			sge[k].lkey = ep->rlkey;
			wr[k].wr_id = i + k;
			wr[k].sg_list = &sge[k];
			wr[k].num_sge = 1;
			wr[k].next = k + 1 < n ? &wr[k + 1] : NULL;
		}
		errno = 0;
		if ((ret = ibv_post_recv(ep->peer_qp, wr, &bad)))
			return ret_errno(ret);
		i += n;
	}
	return 0;
}

static const char *type_name(int type)
{
	return type == IBV_QPT_UD ? "UD" : "RC";
}

/* Creates the sending QP. With the wr API, a failure is blamed on the API
 * only when the same QP without it can be created. */
static struct ibv_qp *create_send_qp(struct sqd_device *d, struct sqd_endpoint *e,
				     const struct sqd_qp_config *cfg,
				     struct sqd_err *err)
{
	struct ibv_qp_init_attr_ex ax;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp, *probe;
	int errnum;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->ep.cq;
	ia.recv_cq = e->ep.cq; /* nothing is ever received on the sending QP */
	ia.qp_type = cfg->qp_type;
	ia.sq_sig_all = cfg->sig_all;
	ia.cap.max_send_wr = cfg->max_send_wr;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = cfg->max_send_sge;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = cfg->max_inline;

	if (!cfg->wr_api) {
		errno = 0;
		qp = ibv_create_qp(e->pd, &ia);
		if (!qp)
			goto caps_error;
		e->caps = ia.cap;
		return qp;
	}

	memset(&ax, 0, sizeof(ax));
	ax.send_cq = ia.send_cq;
	ax.recv_cq = ia.recv_cq;
	ax.qp_type = ia.qp_type;
	ax.sq_sig_all = ia.sq_sig_all;
	ax.cap = ia.cap;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ax.pd = e->pd;
	ax.send_ops_flags = cfg->send_ops;
	errno = 0;
	qp = ibv_create_qp_ex(d->ctx, &ax);
	if (!qp) {
		errnum = errno;
		errno = 0;
		probe = ibv_create_qp(e->pd, &ia);
		if (!probe)
			goto caps_error;
		ibv_destroy_qp(probe);
		fail(err, errnum ? errnum : EOPNOTSUPP, "", "send_ops_flags 0x%llx",
		     (unsigned long long)cfg->send_ops);
		err->no_wr_api = 1;
		return NULL;
	}
	e->caps = ax.cap;
	e->ep.qpx = ibv_qp_to_qp_ex(qp);
	if (!e->ep.qpx) {
		ibv_destroy_qp(qp);
		fail(err, EOPNOTSUPP, "", "ibv_qp_to_qp_ex returned NULL");
		err->no_wr_api = 1;
		return NULL;
	}
	return qp;

caps_error:
	fail(err, errno, "creating QP",
	     "%s, max_send_wr %u, max_send_sge %u, max_inline_data %u; "
	     "device max_qp_wr %d, max_sge %d",
	     type_name(cfg->qp_type), cfg->max_send_wr, cfg->max_send_sge,
	     cfg->max_inline, d->dattr.max_qp_wr, d->dattr.max_sge);
	return NULL;
}

struct sqd_endpoint *sqd_endpoint_create(struct sqd_device *d,
					 const struct sqd_qp_config *cfg,
					 struct sqd_err *err)
{
	struct sqd_endpoint *e;
	struct sq_endpoint *ep;
	struct ibv_qp_init_attr pa;
	struct ibv_ah_attr ah;
	const char *step = "";
	long page = sysconf(_SC_PAGESIZE);
	size_t align = page > 0 ? (size_t)page : 4096;
	uint64_t cqe;
	int ret;

	if (cfg->atomics && d->dattr.atomic_cap == IBV_ATOMIC_NONE) {
		fail(err, EOPNOTSUPP, "checking the device for atomics",
		     "it reports atomic_cap IBV_ATOMIC_NONE");
		return NULL;
	}
	if (cfg->srq && (cfg->qp_type != IBV_QPT_RC || !d->shared_pd)) {
		fail(err, EINVAL, "creating peer QP", "an SRQ serves RC peers only");
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		fail(err, ENOMEM, "allocating endpoint", NULL);
		return NULL;
	}
	ep = &e->ep;

	if (cfg->srq) {
		/* the peer QP, its SRQ and the receive buffers share one PD */
		e->pd = d->shared_pd;
	} else {
		errno = 0;
		e->pd = ibv_alloc_pd(d->ctx);
		if (!e->pd) {
			fail(err, errno, "allocating protection domain", NULL);
			goto out;
		}
		e->own_pd = 1;
	}

	ep->buf_len = (cfg->buf_size + align - 1) / align * align;
	ep->buf = alloc_buf(ep->buf_len);
	if (!ep->buf) {
		fail(err, ENOMEM, "allocating buffer", "%zu bytes", ep->buf_len);
		goto out;
	}
	errno = 0;
	e->mr = ibv_reg_mr(e->pd, ep->buf, ep->buf_len, IBV_ACCESS_LOCAL_WRITE);
	if (!e->mr) {
		fail(err, errno, "registering buffer", "%zu bytes", ep->buf_len);
		goto out;
	}
	ep->lkey = e->mr->lkey;

	/* The peer's ring of receive slots doubles as the RDMA WRITE target,
	 * so an RC slot holds a whole buffer; a UD message is at most one MTU
	 * and lands after the GRH. A peer of an SRQ takes its receives from
	 * the SRQ's slots: the target is then one buffer. */
	if (cfg->srq) {
		ep->rq_depth = cfg->srq->depth;
		ep->recv_size = cfg->srq->recv_size;
		e->tbuf_len = ep->buf_len;
	} else {
		ep->rq_depth = cfg->rq_depth;
		if (cfg->qp_type == IBV_QPT_UD)
			ep->recv_size = SQD_GRH_LEN + (128u << d->pattr.active_mtu);
		else
			ep->recv_size = (uint32_t)ep->buf_len;
		e->tbuf_len = (size_t)ep->rq_depth * ep->recv_size;
		if (e->tbuf_len < ep->buf_len)
			e->tbuf_len = ep->buf_len;
	}
	e->tbuf_len = (e->tbuf_len + align - 1) / align * align;
	e->tbuf = alloc_buf(e->tbuf_len);
	if (!e->tbuf) {
		fail(err, ENOMEM, "allocating receive buffer", "%zu bytes",
		     e->tbuf_len);
		goto out;
	}
	errno = 0;
	e->rmr = ibv_reg_mr(e->pd, e->tbuf, e->tbuf_len,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | (cfg->atomics ? IBV_ACCESS_REMOTE_ATOMIC : 0));
	if (!e->rmr) {
		fail(err, errno, "registering receive buffer", "%zu bytes",
		     e->tbuf_len);
		goto out;
	}
	ep->rkey = e->rmr->rkey;
	ep->raddr = (uintptr_t)e->tbuf;
	if (cfg->srq) {
		ep->peer_srq = cfg->srq->srq;
		ep->rbuf = cfg->srq->rbuf;
		ep->rbuf_len = cfg->srq->rbuf_len;
		ep->rlkey = cfg->srq->mr->lkey;
	} else {
		ep->rbuf = e->tbuf;
		ep->rbuf_len = e->tbuf_len;
		ep->rlkey = e->rmr->lkey;
	}

	/* Room for every WR the provider may round max_send_wr up to, all
	 * signaled or all flushed, unless the caller asked for a depth. */
	cqe = cfg->cq_depth ? cfg->cq_depth : 2 * (uint64_t)cfg->max_send_wr + 16;
	errno = 0;
	if (cfg->send_cq) {
		ep->cq = cfg->send_cq->cq;
		ep->cqx = cfg->send_cq->cqx;
		ep->cqx_mode = cfg->send_cq->cqx_mode;
	} else if (cfg->cq_ex) {
		struct ibv_cq_init_attr_ex ca = {
			.cqe = (uint32_t)cq_size(d, cqe),
		};

		ep->cqx = ibv_create_cq_ex(d->ctx, &ca);
		ep->cq = ep->cqx ? ibv_cq_ex_to_cq(ep->cqx) : NULL;
		ep->cqx_mode = cqx_mode(d);
	} else {
		ep->cq = ibv_create_cq(d->ctx, cq_size(d, cqe),
				       NULL, NULL, 0);
	}
	if (!ep->cq) {
		fail(err, errno, "creating send CQ", "%llu entries",
		     (unsigned long long)cqe);
		goto out;
	}
	if (!cfg->send_cq)
		e->own_cq = ep->cq;
	errno = 0;
	e->peer_scq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	if (!e->peer_scq) {
		fail(err, errno, "creating peer send CQ", NULL);
		goto out;
	}
	if (cfg->srq) {
		ep->peer_rcq = cfg->srq->rcq;
	} else {
		errno = 0;
		ep->peer_rcq = ibv_create_cq(d->ctx, cq_size(d, (uint64_t)ep->rq_depth + 16),
					     NULL, NULL, 0);
		if (!ep->peer_rcq) {
			fail(err, errno, "creating peer receive CQ", "%u entries",
			     ep->rq_depth + 16);
			goto out;
		}
		e->own_rcq = ep->peer_rcq;
	}

	ep->qp = create_send_qp(d, e, cfg, err);
	if (!ep->qp)
		goto out;

	memset(&pa, 0, sizeof(pa));
	pa.send_cq = e->peer_scq;
	pa.recv_cq = ep->peer_rcq;
	pa.qp_type = cfg->qp_type;
	pa.cap.max_send_wr = 1;
	pa.cap.max_send_sge = 1;
	if (cfg->srq) {
		pa.srq = cfg->srq->srq; /* no RQ of its own */
	} else {
		pa.cap.max_recv_wr = ep->rq_depth;
		pa.cap.max_recv_sge = 1;
	}
	errno = 0;
	ep->peer_qp = ibv_create_qp(e->pd, &pa);
	if (!ep->peer_qp) {
		if (cfg->srq)
			fail(err, errno, "creating peer QP", "RC, on an SRQ");
		else
			fail(err, errno, "creating peer QP",
			     "%s, max_recv_wr %u; device max_qp_wr %d",
			     type_name(cfg->qp_type), ep->rq_depth, d->dattr.max_qp_wr);
		goto out;
	}

	ret = connect_qp(d, ep->qp, cfg->qp_type, cfg->atomics, ep->peer_qp->qp_num, cfg->stop_at_rtr, &step);
	if (ret) {
		fail(err, ret, step, "sending %s QP %u", type_name(cfg->qp_type),
		     ep->qp->qp_num);
		goto out;
	}
	ret = connect_qp(d, ep->peer_qp, cfg->qp_type, cfg->atomics, ep->qp->qp_num, 0, &step);
	if (ret) {
		fail(err, ret, step, "peer %s QP %u", type_name(cfg->qp_type),
		     ep->peer_qp->qp_num);
		goto out;
	}

	ep->remote_qpn = ep->peer_qp->qp_num;
	if (cfg->qp_type == IBV_QPT_UD) {
		ep->remote_qkey = SQD_UD_QKEY;
		fill_ah(d, &ah);
		errno = 0;
		ep->ah = ibv_create_ah(e->pd, &ah);
		if (!ep->ah) {
			fail(err, errno, "creating address handle", NULL);
			goto out;
		}
	}

	/* an SRQ was filled when created */
	ret = cfg->srq ? 0 : post_receives(ep);
	if (ret) {
		fail(err, ret, "posting receives", "%u on the peer QP",
		     ep->rq_depth);
		goto out;
	}
	return e;

out:
	sqd_endpoint_destroy(e, NULL);
	return NULL;
}

int sqd_endpoint_set_error(struct sqd_endpoint *e)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	errno = 0;
	ret = ibv_modify_qp(e->ep.qp, &a, IBV_QP_STATE);
	return ret ? ret_errno(ret) : 0;
}

int sqd_endpoint_destroy(struct sqd_endpoint *e, struct sqd_err *err)
{
	struct sq_endpoint *ep;

	if (!e)
		return 0;
	ep = &e->ep;
	/* QPs before the CQs they complete into; everything before the PD.
	 * A shared CQ, an SRQ, its CQ and the shared PD outlive the
	 * endpoint: the device destroys them after its endpoints. */
	errno = 0;
	if (ep->qp)
		destroyed(err, ibv_destroy_qp(ep->qp), "destroying QP");
	errno = 0;
	if (ep->peer_qp)
		destroyed(err, ibv_destroy_qp(ep->peer_qp), "destroying peer QP");
	errno = 0;
	if (ep->ah)
		destroyed(err, ibv_destroy_ah(ep->ah), "destroying address handle");
	errno = 0;
	if (e->own_cq)
		destroyed(err, ibv_destroy_cq(e->own_cq), "destroying send CQ");
	errno = 0;
	if (e->peer_scq)
		destroyed(err, ibv_destroy_cq(e->peer_scq), "destroying peer send CQ");
	errno = 0;
	if (e->own_rcq)
		destroyed(err, ibv_destroy_cq(e->own_rcq), "destroying peer receive CQ");
	errno = 0;
	if (e->mr)
		destroyed(err, ibv_dereg_mr(e->mr), "deregistering buffer");
	errno = 0;
	if (e->rmr)
		destroyed(err, ibv_dereg_mr(e->rmr), "deregistering receive buffer");
	errno = 0;
	if (e->pd && e->own_pd)
		destroyed(err, ibv_dealloc_pd(e->pd), "deallocating protection domain");
	free(ep->buf);
	free(e->tbuf);
	free(e);
	return err && err->op[0] ? -1 : 0;
}
