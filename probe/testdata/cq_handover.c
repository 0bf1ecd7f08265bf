/* A thread's pending polls of a CQ whose address another thread gives to
 * a new CQ, for the probe test of where they go. A fake context's ops
 * table reveals a poll_cq of its own (through sqsim_alloc_pd, hooked by
 * symbol); a worker polls the first CQ BEFORE times, all empty, and waits
 * while the main thread destroys it and creates the next CQ at the same
 * address (sqsim_destroy_cq, sqsim_create_cq); then the worker polls the
 * new CQ AFTER times and exits. It prints what it did as one JSON line.
 *
 * usage: cq_handover BEFORE AFTER */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#define NOINLINE __attribute__((noinline, used))

static struct ibv_context ctx_mem;
static struct ibv_pd pd_mem;
static struct ibv_cq cq_mem;
static pthread_barrier_t polled, replaced;
static struct ibv_cq *cq;
static int before, after;

NOINLINE int fake_poll_cq(struct ibv_cq *c, int n, struct ibv_wc *wc)
{
	(void)c;
	(void)n;
	(void)wc;
	return 0; /* empty */
}

NOINLINE struct ibv_pd *sqsim_alloc_pd(struct ibv_context *ctx)
{
	pd_mem.context = ctx;
	return &pd_mem;
}

NOINLINE struct ibv_cq *sqsim_create_cq(struct ibv_context *ctx, int cqe)
{
	memset(&cq_mem, 0, sizeof(cq_mem));
	cq_mem.context = ctx;
	cq_mem.cqe = cqe;
	return &cq_mem;
}

NOINLINE int sqsim_destroy_cq(struct ibv_cq *c)
{
	(void)c;
	return 0;
}

static void poll_n(int n)
{
	struct ibv_wc wc;

	for (int i = 0; i < n; i++)
		cq->context->ops.poll_cq(cq, 1, &wc);
}

static void *worker(void *arg)
{
	(void)arg;
	poll_n(before);
	pthread_barrier_wait(&polled);
	pthread_barrier_wait(&replaced);
	poll_n(after);
	return NULL;
}

int main(int argc, char **argv)
{
	struct ibv_cq *cq1;
	pthread_t th;

	if (argc != 3)
		return 2;
	before = atoi(argv[1]);
	after = atoi(argv[2]);
	ctx_mem.ops.poll_cq = fake_poll_cq;
	sqsim_alloc_pd(&ctx_mem);
	cq = cq1 = sqsim_create_cq(&ctx_mem, 64);
	pthread_barrier_init(&polled, NULL, 2);
	pthread_barrier_init(&replaced, NULL, 2);
	pthread_create(&th, NULL, worker, NULL);
	pthread_barrier_wait(&polled);
	sqsim_destroy_cq(cq);
	cq = sqsim_create_cq(&ctx_mem, 64);
	pthread_barrier_wait(&replaced);
	pthread_join(th, NULL);
	printf("{\"cq1\":%lu,\"cq2\":%lu}\n", (unsigned long)(uintptr_t)cq1, (unsigned long)(uintptr_t)cq);
	return 0;
}
