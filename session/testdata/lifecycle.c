/* Verbs applications with short-lived objects and awkward endings, on the
 * simulated HCA (verbs/sim*.c), for the session tests of object lifetimes
 * and of how a trace ends. Each mode prints what the simulator counted
 * (its ground truth) as JSON lines on stdout.
 *
 * usage: lifecycle churn N
 *            N times: create a CQ and a QP, post and poll a few calls
 *            (how many depends on the round), then destroy both; malloc
 *            gives their addresses back, so QPs and CQs of later rounds
 *            live where earlier ones did. One line per round.
 *        lifecycle main-exit MS THREADS GAP
 *            THREADS workers post for MS ms while the main thread has
 *            long left with pthread_exit, 16 posts at a time, GAP ms
 *            apart. The first worker opens the device and creates every
 *            CQ and QP once the main thread has left (the tracer finds
 *            the data path then). The last worker to finish prints one
 *            line per QP.
 *        lifecycle exit-at MS QPS MIB
 *            create QPS QPs (and CQs), post one WR on each, touch MIB MiB
 *            (so that the exit takes a while), print the total and how
 *            long that took (ready_ms), and exit MS ms after the start,
 *            QPs and all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "sim.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;

static void die(const char *what)
{
	fprintf(stderr, "lifecycle: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void open_sim(void)
{
	struct sqsim_config cfg;

	sqsim_default_config(&cfg);
	cfg.deterministic = 1; /* a CQE is there at the doorbell */
	ctx = sqsim_open_device(&cfg);
	if (!ctx)
		die("sqsim_open_device");
	pd = sqsim_alloc_pd(ctx);
	if (!pd)
		die("sqsim_alloc_pd");
}

static struct ibv_qp *new_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS };
	struct ibv_qp *qp = sqsim_create_qp(pd, &attr);

	if (!qp)
		die("sqsim_create_qp");
	if (sqsim_modify_qp(qp, &rts, IBV_QP_STATE))
		die("sqsim_modify_qp");
	return qp;
}

static char payload[64];

/* post_call posts one ibv_post_send call of n WRs, the last one signaled. */
static void post_call(struct ibv_qp *qp, int n, int inl, uint64_t *wr_id)
{
	struct ibv_sge sge[8];
	struct ibv_send_wr wr[8], *bad;

	for (int i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)payload, .length = 32, .lkey = 1 };
		wr[i] = (struct ibv_send_wr){
			.wr_id = (*wr_id)++, .next = i + 1 < n ? &wr[i + 1] : NULL, .sg_list = &sge[i], .num_sge = 1,
			.opcode = IBV_WR_SEND,
			.send_flags = (inl ? IBV_SEND_INLINE : 0) | (i == n - 1 ? IBV_SEND_SIGNALED : 0),
		};
	}
	if (ibv_post_send(qp, wr, &bad))
		die("ibv_post_send");
}

/* drain polls cq until want completions came, then `empty` more times. */
static void drain(struct ibv_cq *cq, uint64_t want, int empty)
{
	struct ibv_wc wc[16];
	uint64_t got = 0;

	while (got < want) {
		int n = ibv_poll_cq(cq, 16, wc);

		if (n < 0)
			die("ibv_poll_cq");
		got += (uint64_t)n;
	}
	for (int i = 0; i < empty; i++)
		ibv_poll_cq(cq, 16, wc);
}

static void print_truth(const char *extra, struct ibv_qp *qp, struct ibv_cq *cq)
{
	struct sqsim_counters c;
	struct sqsim_cq_counters cc;

	if (sqsim_qp_counters(qp, &c) || sqsim_cq_counters(cq, &cc))
		die("reading the simulator's counters");
	printf("{%s\"qp\":%lu,\"cq\":%lu,\"qp_num\":%u,\"wrs\":%lu,\"post_calls\":%lu,\"inline\":%lu,"
	       "\"signaled\":%lu,\"doorbells\":%lu,\"cqes_polled\":%lu,\"cq_polls\":%lu,\"cq_empty\":%lu,\"cq_cqes\":%lu}\n",
	       extra, (unsigned long)(uintptr_t)qp, (unsigned long)(uintptr_t)cq, c.qp_num,
	       (unsigned long)c.wrs, (unsigned long)c.post_calls, (unsigned long)c.inline_wrs,
	       (unsigned long)c.signaled, (unsigned long)c.doorbells, (unsigned long)c.cqes_polled,
	       (unsigned long)cc.polls, (unsigned long)cc.empty_polls, (unsigned long)cc.cqes);
}

static int churn(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		struct ibv_cq *cq = sqsim_create_cq(ctx, 64);
		struct ibv_qp *qp;
		int calls = i % 9, wrs = 1 + i % 4;
		uint64_t id = 0;
		char extra[32];

		if (!cq)
			die("sqsim_create_cq");
		qp = new_qp(cq);
		for (int k = 0; k < calls; k++) {
			post_call(qp, wrs, i % 2, &id);
			drain(cq, 1, 0);
		}
		drain(cq, 0, i % 5);
		snprintf(extra, sizeof(extra), "\"round\":%d,", i);
		print_truth(extra, qp, cq);
		if (sqsim_destroy_qp(qp))
			die("sqsim_destroy_qp");
		if (sqsim_destroy_cq(cq))
			die("sqsim_destroy_cq");
	}
	return 0;
}

struct worker {
	pthread_t th;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint64_t until_ms;
	int gap_ms;
};

static struct worker *workers;
static int nworkers, finished;
static pthread_barrier_t ready;
static pthread_mutex_t finish_lock = PTHREAD_MUTEX_INITIALIZER;

static pid_t main_tid;

/* main_thread_gone reports whether the main thread has exited: a zombie,
 * or not there. */
static int main_thread_gone(void)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)main_tid);
	f = fopen(path, "r");
	if (!f)
		return 1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return !p || p[2] == 'Z' || p[2] == 'X';
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t id = 0, calls = 0;

	if (w == &workers[0]) {
		while (!main_thread_gone())
			usleep(1000);
		open_sim();
		for (int i = 0; i < nworkers; i++) {
			workers[i].cq = sqsim_create_cq(ctx, 64);
			if (!workers[i].cq)
				die("sqsim_create_cq");
			workers[i].qp = new_qp(workers[i].cq);
		}
	}
	pthread_barrier_wait(&ready);

	while (now_ms() < w->until_ms) {
		post_call(w->qp, 1, 1, &id);
		drain(w->cq, 1, 1);
		if (++calls % 16 == 0)
			usleep((useconds_t)w->gap_ms * 1000);
	}
	pthread_mutex_lock(&finish_lock);
	if (++finished == nworkers) /* the last one: everyone's counts are final */
		for (int i = 0; i < nworkers; i++)
			print_truth("", workers[i].qp, workers[i].cq);
	fflush(stdout);
	pthread_mutex_unlock(&finish_lock);
	return NULL;
}

static int main_exit(int ms, int threads, int gap_ms)
{
	uint64_t until = now_ms() + (uint64_t)ms;

	nworkers = threads;
	workers = calloc((size_t)threads, sizeof(*workers));
	if (!workers)
		die("calloc");
	main_tid = gettid();
	pthread_barrier_init(&ready, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++) {
		workers[i].until_ms = until;
		workers[i].gap_ms = gap_ms;
	}
	for (int i = 0; i < threads; i++)
		if (pthread_create(&workers[i].th, NULL, work, &workers[i]))
			die("pthread_create");
	/* the process goes on until its last thread is done */
	pthread_exit(NULL);
}

static int exit_at(uint64_t start, int ms, int qps, int mib)
{
	uint64_t id = 0, wrs = 0;
	char *mem;

	for (int i = 0; i < qps; i++) {
		struct ibv_cq *cq = sqsim_create_cq(ctx, 64);
		struct ibv_qp *qp;

		if (!cq)
			die("sqsim_create_cq");
		qp = new_qp(cq);
		post_call(qp, 1, 1, &id);
		drain(cq, 1, 0);
		wrs++;
	}
	mem = malloc((size_t)mib << 20);
	if (mib && !mem)
		die("malloc");
	for (size_t off = 0; off < (size_t)mib << 20; off += 4096)
		mem[off] = 1;
	printf("{\"qps\":%d,\"wrs\":%lu,\"ready_ms\":%lu}\n", qps, (unsigned long)wrs,
	       (unsigned long)(now_ms() - start));
	fflush(stdout);
	while (now_ms() < start + (uint64_t)ms)
		usleep(200);
	exit(0);
}

int main(int argc, char **argv)
{
	uint64_t start = now_ms();

	if (argc >= 3 && !strcmp(argv[1], "churn")) {
		open_sim();
		return churn(atoi(argv[2]));
	}
	if (argc >= 5 && !strcmp(argv[1], "main-exit"))
		return main_exit(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (argc >= 5 && !strcmp(argv[1], "exit-at")) {
		open_sim();
		return exit_at(start, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	}
	fprintf(stderr, "usage: lifecycle churn N | main-exit MS THREADS GAP | exit-at MS QPS MIB\n");
	return 2;
}
