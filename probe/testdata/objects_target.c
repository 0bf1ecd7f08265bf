/* CQs and SRQs created and destroyed at reused addresses, for the probe
 * tests of object lifetimes. It exports the simulated HCA's names for
 * the calls (sqsim_create_cq, sqsim_create_srq, sqsim_destroy_srq), which
 * the tracer hooks by symbol, with fakes of its own that give a freed
 * object's memory to the next one, as malloc often does, and prints what
 * it did as one JSON line on stdout. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#define NOINLINE __attribute__((noinline, used))

static struct ibv_cq cq_mem;
static struct ibv_srq srq_mem;
static int busy;

NOINLINE struct ibv_cq *sqsim_create_cq(struct ibv_context *ctx, int cqe)
{
	memset(&cq_mem, 0, sizeof(cq_mem));
	cq_mem.context = ctx;
	cq_mem.cqe = cqe;
	return &cq_mem;
}

NOINLINE struct ibv_srq *sqsim_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	uint32_t got = 1;

	while (got < attr->attr.max_wr)
		got <<= 1;
	attr->attr.max_wr = got; /* what the SRQ really got */
	memset(&srq_mem, 0, sizeof(srq_mem));
	srq_mem.pd = pd;
	return &srq_mem;
}

NOINLINE int sqsim_destroy_srq(struct ibv_srq *srq)
{
	(void)srq;
	return busy ? EBUSY : 0;
}

int main(void)
{
	struct ibv_srq_init_attr a1 = { .attr = { .max_wr = 100 } }, a2 = { .attr = { .max_wr = 10 } };
	struct ibv_cq *cq1, *cq2;
	struct ibv_srq *s1, *s2;
	int r1, r2, r3;

	cq1 = sqsim_create_cq(NULL, 64);
	/* destroyed unseen (no probe on destroy_cq): the next CQ is there */
	cq2 = sqsim_create_cq(NULL, 128);
	s1 = sqsim_create_srq(NULL, &a1);
	r1 = sqsim_destroy_srq(s1);
	s2 = sqsim_create_srq(NULL, &a2);
	busy = 1;
	r2 = sqsim_destroy_srq(s2);
	busy = 0;
	r3 = sqsim_destroy_srq(s2);
	printf("{\"cq1\":%lu,\"cq2\":%lu,\"srq1\":%lu,\"srq2\":%lu,\"rets\":[%d,%d,%d]}\n",
	       (unsigned long)(uintptr_t)cq1, (unsigned long)(uintptr_t)cq2, (unsigned long)(uintptr_t)s1,
	       (unsigned long)(uintptr_t)s2, r1, r2, r3);
	return 0;
}
