/* What several endpoints of the device backend share: a send CQ, and an
 * SRQ with its CQ and receive buffer on the device's shared PD. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_internal.h"

int sqd_fill_srq(struct ibv_srq *srq, void *rbuf, uint32_t lkey, uint32_t depth,
		 uint32_t recv_size)
{
	struct ibv_recv_wr wr[64], *bad;
	struct ibv_sge sge[64];
	uint32_t i = 0, n, k;
	int ret;

	while (i < depth) {
		n = min_u32(64, depth - i);
		for (k = 0; k < n; k++) {
			sge[k].addr = (uintptr_t)rbuf + (uint64_t)(i + k) * recv_size;
			sge[k].length = recv_size;
			sge[k].lkey = lkey;
			wr[k].wr_id = i + k;
			wr[k].sg_list = &sge[k];
			wr[k].num_sge = 1;
			wr[k].next = k + 1 < n ? &wr[k + 1] : NULL;
		}
		errno = 0;
		if ((ret = ibv_post_srq_recv(srq, wr, &bad)))
			return ret_errno(ret);
		i += n;
	}
	return 0;
}

struct sqd_cq *sqd_cq_create(struct sqd_device *d, uint32_t depth, int ex,
			     struct sqd_err *err)
{
	struct sqd_cq *c = calloc(1, sizeof(*c));

	if (!c) {
		fail(err, ENOMEM, "creating shared send CQ", NULL);
		return NULL;
	}
	errno = 0;
	if (ex) {
		struct ibv_cq_init_attr_ex ca = { .cqe = depth };

		c->cqx = ibv_create_cq_ex(d->ctx, &ca);
		c->cq = c->cqx ? ibv_cq_ex_to_cq(c->cqx) : NULL;
		c->cqx_mode = cqx_mode(d);
	} else {
		c->cq = ibv_create_cq(d->ctx, (int)depth, NULL, NULL, 0);
	}
	if (!c->cq) {
		fail(err, errno, "creating shared send CQ", "%u entries; device max_cqe %d",
		     depth, d->dattr.max_cqe);
		free(c);
		return NULL;
	}
	return c;
}

int sqd_cq_destroy(struct sqd_cq *c, struct sqd_err *err)
{
	if (!c)
		return 0;
	errno = 0;
	destroyed(err, ibv_destroy_cq(c->cq), "destroying shared send CQ");
	free(c);
	return err && err->op[0] ? -1 : 0;
}

struct sqd_srq *sqd_srq_create(struct sqd_device *d, uint32_t depth,
			       uint32_t recv_size, struct sqd_err *err)
{
	struct ibv_srq_init_attr attr;
	struct sqd_srq *q;
	long page = sysconf(_SC_PAGESIZE);
	size_t align = page > 0 ? (size_t)page : 4096;
	int ret;

	if (!d->shared_pd) {
		errno = 0;
		d->shared_pd = ibv_alloc_pd(d->ctx);
		if (!d->shared_pd) {
			fail(err, errno, "allocating protection domain", "for SRQs");
			return NULL;
		}
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		fail(err, ENOMEM, "creating SRQ", NULL);
		return NULL;
	}
	memset(&attr, 0, sizeof(attr));
	attr.attr.max_wr = depth;
	attr.attr.max_sge = 1;
	errno = 0;
	q->srq = ibv_create_srq(d->shared_pd, &attr);
	if (!q->srq) {
		fail(err, errno, "creating SRQ", "max_wr %u; device max_srq_wr %d",
		     depth, d->dattr.max_srq_wr);
		goto out;
	}
	/* the provider may give more than asked: fill what was asked */
	q->depth = min_u32(depth, attr.attr.max_wr);
	q->recv_size = recv_size;
	errno = 0;
	q->rcq = ibv_create_cq(d->ctx, cq_size(d, (uint64_t)q->depth + 16), NULL, NULL, 0);
	if (!q->rcq) {
		fail(err, errno, "creating the SRQ's CQ", "%u entries", q->depth + 16);
		goto out;
	}
	q->rbuf_len = ((size_t)q->depth * recv_size + align - 1) / align * align;
	q->rbuf = alloc_buf(q->rbuf_len);
	if (!q->rbuf) {
		fail(err, ENOMEM, "allocating the SRQ's receive buffer", "%zu bytes", q->rbuf_len);
		goto out;
	}
	errno = 0;
	q->mr = ibv_reg_mr(d->shared_pd, q->rbuf, q->rbuf_len, IBV_ACCESS_LOCAL_WRITE);
	if (!q->mr) {
		fail(err, errno, "registering the SRQ's receive buffer", "%zu bytes", q->rbuf_len);
		goto out;
	}
	ret = sqd_fill_srq(q->srq, q->rbuf, q->mr->lkey, q->depth, recv_size);
	if (ret) {
		fail(err, ret, "posting receives", "%u to the SRQ", q->depth);
		goto out;
	}
	return q;

out:
	sqd_srq_destroy(q, NULL);
	return NULL;
}

int sqd_srq_destroy(struct sqd_srq *q, struct sqd_err *err)
{
	if (!q)
		return 0;
	errno = 0;
	if (q->srq)
		destroyed(err, ibv_destroy_srq(q->srq), "destroying SRQ");
	errno = 0;
	if (q->rcq)
		destroyed(err, ibv_destroy_cq(q->rcq), "destroying the SRQ's CQ");
	errno = 0;
	if (q->mr)
		destroyed(err, ibv_dereg_mr(q->mr), "deregistering the SRQ's receive buffer");
	free(q->rbuf);
	free(q);
	return err && err->op[0] ? -1 : 0;
}
