/* A verbs application whose provider is a shared library it dlopen()s at
 * run time (testdata/dlopen_provider.c), the way libibverbs loads
 * lib*-rdmav*.so: nothing of the provider is mapped when the process
 * starts, so a tracer attached then cannot know its file.
 *
 * The executable itself exports the simulated HCA's control path
 * (sqsim_alloc_pd, sqsim_create_qp, sqsim_modify_qp, sqsim_destroy_qp),
 * which the tracer hooks by symbol; sqsim_create_qp hands the creation to
 * the library, so the ops pointers the creation reveals point into it. It
 * posts and polls through the static inline ibv_post_send(), ibv_poll_cq()
 * and ibv_post_recv() of <infiniband/verbs.h> and prints what it did as
 * JSON on stdout. It does not link libibverbs.
 *
 * usage: dlopen_target once LIB        load LIB, one QP, the workload
 *        dlopen_target reload LIB      the same, then unload LIB, keep its
 *                                      old addresses taken, load it again
 *                                      (elsewhere) and run it again
 *        dlopen_target two LIB1 LIB2   two providers at once, a QP on each
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dlopen_provider.h"

#define NOINLINE __attribute__((noinline, used))

/* ---- which provider owns a context -------------------------------------- */

static struct {
	struct ibv_context *ctx;
	const struct sqfake_provider *prov;
} owners[8];
static int nowners;

static const struct sqfake_provider *provider_of(struct ibv_context *ctx)
{
	for (int i = 0; i < nowners; i++)
		if (owners[i].ctx == ctx)
			return owners[i].prov;
	return NULL;
}

/* ---- the exported control path ------------------------------------------ */

NOINLINE struct ibv_pd *sqsim_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	pd->context = ctx;
	return pd;
}

NOINLINE struct ibv_qp *sqsim_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	const struct sqfake_provider *prov = provider_of(pd->context);

	return prov ? prov->create_qp(pd, attr) : NULL;
}

NOINLINE int sqsim_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

NOINLINE int sqsim_destroy_qp(struct ibv_qp *qp)
{
	return provider_of(qp->context)->destroy_qp(qp);
}

/* ---- what the application did ------------------------------------------- */

static struct {
	unsigned long qps, modifies, destroys;
	unsigned long post_calls, post_wrs, post_accepted, post_errors;
	unsigned long polls, empty_polls, cqes;
	unsigned long recv_calls, recv_wrs;
	unsigned long loads, moved;
} st;

static char payload[4096];

static void post_list(struct ibv_qp *qp, int n)
{
	struct ibv_send_wr wrs[8], *bad = NULL;
	struct ibv_sge sge = { (uintptr_t)payload, 64, 1 };
	static uint64_t wr_id = 1;
	int ret;

	for (int i = 0; i < n; i++) {
		memset(&wrs[i], 0, sizeof(wrs[i]));
		wrs[i].wr_id = wr_id++;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		wrs[i].opcode = IBV_WR_SEND;
		wrs[i].sg_list = &sge;
		wrs[i].num_sge = 1;
		if (i == n - 1)
			wrs[i].send_flags = IBV_SEND_SIGNALED;
	}
	ret = ibv_post_send(qp, wrs, &bad);
	st.post_calls++;
	st.post_wrs += n;
	st.post_accepted += ret ? (unsigned long)(bad - wrs) : (unsigned long)n;
	if (ret)
		st.post_errors++;
}

static int poll_once(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(cq, 16, wc);

	st.polls++;
	if (n == 0)
		st.empty_polls++;
	if (n > 0)
		st.cqes += n;
	return n;
}

static void post_recv(struct ibv_qp *qp)
{
	struct ibv_recv_wr wr[3], *bad;
	struct ibv_sge sge = { (uintptr_t)payload, 64, 1 };

	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < 3; i++) {
		wr[i].wr_id = i;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
	}
	ibv_post_recv(qp, wr, &bad);
	st.recv_calls++;
	st.recv_wrs += 3;
}

/* ---- one provider ------------------------------------------------------- */

struct dev {
	void *lib;
	const struct sqfake_provider *prov;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static int load(struct dev *d, const char *path)
{
	memset(d, 0, sizeof(*d));
	d->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!d->lib) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return -1;
	}
	d->prov = dlsym(d->lib, SQFAKE_PROVIDER_SYM);
	if (!d->prov) {
		fprintf(stderr, "dlsym %s: %s\n", SQFAKE_PROVIDER_SYM, dlerror());
		return -1;
	}
	st.loads++;
	d->ctx = d->prov->open();
	owners[nowners].ctx = d->ctx;
	owners[nowners].prov = d->prov;
	nowners++;
	d->pd = sqsim_alloc_pd(d->ctx);
	d->cq = d->prov->create_cq(d->ctx);
	return 0;
}

static int make_qp(struct dev *d)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp_attr attr;
	int s[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };

	memset(&a, 0, sizeof(a));
	a.send_cq = d->cq;
	a.recv_cq = d->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 50; /* the provider rounds it up to 64 */
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	d->qp = sqsim_create_qp(d->pd, &a);
	if (!d->qp)
		return -1;
	st.qps++;
	for (int i = 0; i < 3; i++) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_state = s[i];
		sqsim_modify_qp(d->qp, &attr, IBV_QP_STATE);
		st.modifies++;
	}
	return 0;
}

/* work is the data path: the very first call after the QP creation is a
 * post, through a function the tracer learned of a moment ago. */
static void work(struct dev *d, int iters)
{
	for (int i = 0; i < iters; i++) {
		post_list(d->qp, 1 + i % 4);
		poll_once(d->cq);
		poll_once(d->cq); /* empty */
		if (i % 10 == 0)
			post_recv(d->qp);
	}
	while (poll_once(d->cq) > 0)
		;
}

static void unload(struct dev *d)
{
	sqsim_destroy_qp(d->qp);
	st.destroys++;
	d->prov->close(d->ctx, d->cq);
	for (int i = 0; i < nowners; i++)
		if (owners[i].ctx == d->ctx)
			owners[i] = owners[--nowners];
	free(d->pd);
	dlclose(d->lib);
}

/* span finds where the loader put the library that holds sym. */
struct span {
	const void *sym;
	uintptr_t lo, hi;
};

static int find_span(struct dl_phdr_info *info, size_t size, void *p)
{
	struct span *s = p;
	uintptr_t lo = UINTPTR_MAX, hi = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < lo)
			lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
			hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	if ((uintptr_t)s->sym < lo || (uintptr_t)s->sym >= hi)
		return 0;
	s->lo = lo & ~(uintptr_t)4095;
	s->hi = (hi + 4095) & ~(uintptr_t)4095;
	return 1;
}

static void print_stats(void)
{
	printf("{\"qps\":%lu,\"modifies\":%lu,\"destroys\":%lu,"
	       "\"post_calls\":%lu,\"post_wrs\":%lu,\"post_accepted\":%lu,\"post_errors\":%lu,"
	       "\"polls\":%lu,\"empty_polls\":%lu,\"cqes\":%lu,"
	       "\"recv_calls\":%lu,\"recv_wrs\":%lu,\"loads\":%lu,\"moved\":%lu}\n",
	       st.qps, st.modifies, st.destroys, st.post_calls, st.post_wrs, st.post_accepted,
	       st.post_errors, st.polls, st.empty_polls, st.cqes, st.recv_calls, st.recv_wrs,
	       st.loads, st.moved);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct dev a, b;

	if (argc == 3 && !strcmp(argv[1], "once")) {
		if (load(&a, argv[2]) || make_qp(&a))
			return 1;
		work(&a, 200);
		unload(&a);
	} else if (argc == 3 && !strcmp(argv[1], "reload")) {
		struct span old = { 0 };

		if (load(&a, argv[2]) || make_qp(&a))
			return 1;
		work(&a, 100);
		old.sym = a.prov;
		if (!dl_iterate_phdr(find_span, &old))
			return 2;
		unload(&a);
		if (dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD))
			return 3; /* still loaded: the second load would not map it again */
		/* keep the old addresses taken so the second load lands elsewhere */
		if (mmap((void *)old.lo, old.hi - old.lo, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED)
			return 4;
		if (load(&a, argv[2]) || make_qp(&a))
			return 1;
		st.moved = (uintptr_t)a.prov < old.lo || (uintptr_t)a.prov >= old.hi;
		work(&a, 100);
		unload(&a);
	} else if (argc == 4 && !strcmp(argv[1], "two")) {
		if (load(&a, argv[2]) || load(&b, argv[3]) || make_qp(&a) || make_qp(&b))
			return 1;
		for (int i = 0; i < 10; i++) {
			work(&a, 20);
			work(&b, 20);
		}
		unload(&a);
		unload(&b);
	} else {
		fprintf(stderr, "usage: dlopen_target once LIB | reload LIB | two LIB1 LIB2\n");
		return 2;
	}
	print_stats();
	return 0;
}
