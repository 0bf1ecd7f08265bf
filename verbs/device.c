/* The libibverbs device backend; see device.h. Every failure fills a
 * struct sqd_err with what was being done and the errno, and frees whatever
 * the call had built so far. This file is the device: listing, opening
 * and closing it, its port and GID, and what the objects built on it
 * share (device_internal.h). Endpoints are device_endpoint.c's, the CQs
 * and SRQs several endpoints share device_shared.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_internal.h"

SQD_HIDDEN void fail(struct sqd_err *err, int errnum, const char *op,
		 const char *detail_fmt, ...)
{
	va_list ap;

	err->errnum = errnum;
	snprintf(err->op, sizeof(err->op), "%s", op);
	err->detail[0] = '\0';
	if (detail_fmt) {
		va_start(ap, detail_fmt);
		vsnprintf(err->detail, sizeof(err->detail), detail_fmt, ap);
		va_end(ap);
	}
}

/* Verbs calls returning int report the error either as the return value or,
 * in older providers, as -1 with errno. */
SQD_HIDDEN int ret_errno(int ret)
{
	if (ret > 0)
		return ret;
	return errno ? errno : EIO;
}

/* destroyed notes in err (when given) the first destroy or release that
 * failed: what, and its errno. A teardown goes on past a failure. */
SQD_HIDDEN void destroyed(struct sqd_err *err, int ret, const char *what)
{
	if (!ret || !err || err->op[0])
		return;
	fail(err, ret_errno(ret), what, NULL);
}

int sqd_device_names(char *buf, size_t len)
{
	struct ibv_device **list;
	size_t used = 0;
	int n, i;

	if (len)
		buf[0] = '\0';
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		/* ENOSYS: no uverbs class in sysfs, i.e. no RDMA in this kernel */
		if (errno == ENOSYS || errno == 0)
			return 0;
		return -errno;
	}
	for (i = 0; i < n; i++) {
		int w = snprintf(buf + used, len - used, "%s%s", i ? "," : "",
				 ibv_get_device_name(list[i]));
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += w;
	}
	ibv_free_device_list(list);
	return n;
}

struct sqd_device *sqd_open(const char *name, int *found, struct sqd_err *err)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx;
	struct sqd_device *d;
	int n, i, ret;

	*found = 0;
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		if (errno == ENOSYS || errno == 0)
			return NULL;
		fail(err, errno, "listing RDMA devices", NULL);
		return NULL;
	}
	for (i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			dev = list[i];
	if (!dev) {
		ibv_free_device_list(list);
		return NULL;
	}
	*found = 1;
	errno = 0;
	ctx = ibv_open_device(dev);
	/* an opened device outlives the list it came from */
	ibv_free_device_list(list);
	if (!ctx) {
		fail(err, errno, "opening device", NULL);
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		ibv_close_device(ctx);
		fail(err, ENOMEM, "opening device", NULL);
		return NULL;
	}
	d->ctx = ctx;
	d->gid_index = -1;
	errno = 0;
	ret = ibv_query_device(ctx, &d->dattr);
	if (ret) {
		fail(err, ret_errno(ret), "querying device", NULL);
		sqd_close(d, NULL);
		return NULL;
	}
	return d;
}

int sqd_use_port(struct sqd_device *d, int port, struct sqd_err *err)
{
	int ret;

	errno = 0;
	ret = ibv_query_port(d->ctx, (uint8_t)port, &d->pattr);
	if (ret) {
		fail(err, ret_errno(ret), "querying port", "port %d", port);
		return -1;
	}
	d->port = (uint8_t)port;
	d->roce = d->pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
	return 0;
}

int sqd_close(struct sqd_device *d, struct sqd_err *err)
{
	if (!d)
		return 0;
	errno = 0;
	if (d->shared_pd)
		destroyed(err, ibv_dealloc_pd(d->shared_pd), "deallocating the SRQs' protection domain");
	errno = 0;
	if (d->ctx)
		destroyed(err, ibv_close_device(d->ctx), "closing device");
	free(d);
	return err && err->op[0] ? -1 : 0;
}

int sqd_gid_table(struct sqd_device *d, struct ibv_gid_entry *out, int max)
{
	int n = 0, i;
	ssize_t total;
	struct ibv_gid_entry *all;
	size_t cap = (size_t)d->pattr.gid_tbl_len * (d->dattr.phys_port_cnt ? d->dattr.phys_port_cnt : 1);

	if (max <= 0 || cap == 0)
		return 0;
	/* ibv_query_gid_table returns every port's entries; keep ours */
	all = calloc(cap, sizeof(*all));
	if (all) {
		total = ibv_query_gid_table(d->ctx, all, cap, 0);
		for (i = 0; i < total && n < max; i++)
			if (all[i].port_num == d->port)
				out[n++] = all[i];
		free(all);
		if (total >= 0)
			return n;
	}
	/* kernels without the table ioctl: one entry at a time */
	for (i = 0; i < d->pattr.gid_tbl_len && n < max; i++)
		if (ibv_query_gid_ex(d->ctx, d->port, i, &out[n], 0) == 0)
			n++;
	return n;
}

int sqd_use_gid(struct sqd_device *d, int index, struct sqd_err *err)
{
	static const uint8_t zero[16];
	int ret;

	errno = 0;
	ret = ibv_query_gid(d->ctx, d->port, index, &d->gid);
	if (ret) {
		fail(err, ret_errno(ret), "querying GID", "port %d index %d",
		     d->port, index);
		return -1;
	}
	if (memcmp(d->gid.raw, zero, sizeof(zero)) == 0) {
		fail(err, ENODATA, "querying GID",
		     "port %d index %d is empty; is the netdev up with an address?",
		     d->port, index);
		return -1;
	}
	d->gid_index = index;
	return 0;
}

SQD_HIDDEN void *alloc_buf(size_t len)
{
	void *p = NULL;
	long page = sysconf(_SC_PAGESIZE);

	if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, len))
		return NULL;
	memset(p, 0, len);
	return p;
}

/* rdma_core_release is the rdma-core release of the libibverbs this
 * process loaded (libibverbs.so.1.14.<release>.0), or 0 when unknown. */
static int rdma_core_release_of(struct dl_phdr_info *info, size_t size, void *p)
{
	char real[PATH_MAX];
	const char *base;
	int major, minor, release;

	(void)size;
	if (!strstr(info->dlpi_name, "libibverbs.so") || !realpath(info->dlpi_name, real))
		return 0;
	base = strrchr(real, '/');
	base = base ? base + 1 : real;
	if (sscanf(base, "libibverbs.so.%d.%d.%d", &major, &minor, &release) == 3)
		*(int *)p = release;
	return 1;
}

/* cqx_mode says how the loop ends an extended poll session on d. rxe
 * before rdma-core 55 ends the session itself when ibv_next_poll returns
 * ENOENT (it stores the consumer index and unlocks): an ibv_end_poll after
 * that moves the index past the producer ("rxe: fix completion queue
 * consumer index overrun", rdma-core 55). On such an rxe the loop skips
 * that ibv_end_poll; on an rxe of unknown release it takes one completion
 * per session, which every release handles. */
SQD_HIDDEN int cqx_mode(struct sqd_device *d)
{
	int release = 0;

	if (strncmp(ibv_get_device_name(d->ctx->device), "rxe", 3))
		return SQ_CQX_STANDARD;
	dl_iterate_phdr(rdma_core_release_of, &release);
	if (!release)
		return SQ_CQX_ONE;
	return release < 55 ? SQ_CQX_NEXT_ENDS : SQ_CQX_STANDARD;
}

SQD_HIDDEN int cq_size(struct sqd_device *d, uint64_t want)
{
	if (d->dattr.max_cqe > 0 && want > (uint64_t)d->dattr.max_cqe)
		return d->dattr.max_cqe;
	return (int)want;
}
