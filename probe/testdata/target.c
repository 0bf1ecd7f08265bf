/* A small verbs application on a fake provider, for the probe tests.
 *
 * It exports the simulated HCA's control-path entry points (sqsim_alloc_pd,
 * sqsim_create_qp, sqsim_create_qp_ex, sqsim_qp_to_qp_ex, sqsim_modify_qp,
 * sqsim_destroy_qp) and keeps its data-path functions static, reachable only
 * through the ops table and the ibv_qp_ex, the way a provider library does.
 * Its context is a verbs_context with a static create_qp_ex, so the static
 * inline ibv_create_qp_ex() reaches it as it reaches a real provider's, and
 * its QPs are laid out like libibverbs' struct verbs_qp, so the real
 * exported ibv_qp_to_qp_ex() of libibverbs.so.1 works on them.
 * The fake provider is target_provider.c (target.h says what it gives).
 * It posts and polls through the unmodified static inline ibv_post_send(),
 * ibv_poll_cq(), ibv_post_recv() and ibv_wr_*() of <infiniband/verbs.h>,
 * counts what it did, and prints the counts as JSON on stdout.
 *
 * usage: target run               the scripted workload
 *        target late              create the QPs, wait for a line on stdin,
 *                                 then modify them to RTS and post
 *        target bench N           N single-WR posts and N polls; prints ns per post
 *        target cut               lists and SGE lists past the tracer's bounds
 *        target cut-fail          the same, refused in part by the provider
 *        target entry             every ibv_wr_* builder and setter, an
 *                                 extended CQ polled with ibv_start_poll,
 *                                 the CQ calls, ibv_post_srq_recv
 *        target turns Q R         one thread posting to Q QPs in turn, R
 *                                 rounds; then the first QP destroyed, a
 *                                 new one made (at its address, as malloc
 *                                 gives it back) and R rounds more
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

#include "target.h"

/* ---- what the application did ------------------------------------------- */

static struct {
	unsigned long qps, modifies, destroys;
	unsigned long post_calls, post_wrs, post_accepted, post_errors, post_truncated_lists;
	unsigned long polls, empty_polls, cqes;
	unsigned long wr_batches, wr_wrs, wr_aborted, wr_inline;
	unsigned long recv_calls, recv_wrs;
	unsigned long sge_over_wrs, walk_capped_lists; /* posted WRs of over 16 SGEs, lists of over 1024 WRs */
} st;

static pthread_mutex_t st_lock = PTHREAD_MUTEX_INITIALIZER;

static char payload[1 << 16];

static int post_list(struct ibv_qp *qp, int n, int inline_mask, int nsge)
{
	struct ibv_send_wr wrs[128], *bad = NULL;
	struct ibv_sge sges[128][20];
	int i, j, ret;
	unsigned long accepted;
	static uint64_t wr_id = 1;

	for (i = 0; i < n; i++) {
		memset(&wrs[i], 0, sizeof(wrs[i]));
		wrs[i].wr_id = __atomic_fetch_add(&wr_id, 1, __ATOMIC_RELAXED);
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		wrs[i].opcode = (i & 1) ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
		wrs[i].num_sge = nsge;
		wrs[i].sg_list = sges[i];
		for (j = 0; j < nsge; j++) {
			sges[i][j].addr = (uintptr_t)payload;
			sges[i][j].length = 8 + i + j;
			sges[i][j].lkey = 1;
		}
		if (inline_mask & (1 << (i % 8)))
			wrs[i].send_flags |= IBV_SEND_INLINE;
		if (i == n - 1)
			wrs[i].send_flags |= IBV_SEND_SIGNALED;
	}
	ret = ibv_post_send(qp, wrs, &bad);
	accepted = ret ? (unsigned long)(bad - wrs) : (unsigned long)n;
	pthread_mutex_lock(&st_lock);
	st.post_calls++;
	st.post_wrs += n;
	st.post_accepted += accepted;
	if (ret)
		st.post_errors++;
	if (n > 64)
		st.post_truncated_lists++;
	if (nsge > 16)
		st.sge_over_wrs += accepted;
	pthread_mutex_unlock(&st_lock);
	return ret;
}

static int poll_once(struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	int n = ibv_poll_cq(cq, 16, wc), i;

	pthread_mutex_lock(&st_lock);
	st.polls++;
	if (n == 0)
		st.empty_polls++;
	if (n > 0)
		st.cqes += n;
	pthread_mutex_unlock(&st_lock);
	for (i = 0; i < n; i++) {
		/* retire on the QP the CQE names; the fake keeps them all alive */
		extern struct ibv_qp *qp_by_num(uint32_t);
		struct ibv_qp *qp = qp_by_num(wc[i].qp_num);

		if (qp)
			retire(qp, 1);
	}
	return n;
}

static struct ibv_qp *all_qps[16];
static int nqps;

struct ibv_qp *qp_by_num(uint32_t qpn)
{
	for (int i = 0; i < nqps; i++)
		if (all_qps[i] && all_qps[i]->qp_num == qpn)
			return all_qps[i];
	return NULL;
}

/* make_qp_sig is make_qp with every WR signaled when sig_all, so that
 * each one holds its slot until its completion is polled. */
static struct ibv_qp *make_qp_sig(struct ibv_pd *pd, struct fcq *cq, uint32_t depth, uint32_t sge, uint32_t inl,
				  int sig_all)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.sq_sig_all = sig_all;
	a.send_cq = &cq->cq;
	a.recv_cq = &cq->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = depth;
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = sge;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = inl;
	qp = sqsim_create_qp(pd, &a);
	all_qps[nqps++] = qp;
	st.qps++;
	return qp;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct fcq *cq, uint32_t depth, uint32_t sge, uint32_t inl)
{
	return make_qp_sig(pd, cq, depth, sge, inl, 0);
}

static void to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	int s[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };

	for (int i = 0; i < 3; i++) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_state = s[i];
		sqsim_modify_qp(qp, &attr, IBV_QP_STATE);
		st.modifies++;
	}
}

static void drain(struct ibv_cq *cq)
{
	while (poll_once(cq) > 0)
		;
}

/* wr_batches posts batches through the ibv_wr_* API. */
static void wr_batches(struct ibv_qp_ex *qpx, struct ibv_cq *cq, int batches)
{
	static uint64_t id = 1000000;

	for (int b = 0; b < batches; b++) {
		int n = 1 + b % 4, ret;

		ibv_wr_start(qpx);
		for (int i = 0; i < n; i++) {
			qpx->wr_id = id++;
			qpx->wr_flags = i == n - 1 ? IBV_SEND_SIGNALED : 0;
			if (i & 1)
				ibv_wr_rdma_write(qpx, 7, 0x1000);
			else
				ibv_wr_send(qpx);
			if (b % 3 == 0) {
				ibv_wr_set_inline_data(qpx, payload, 32);
				st.wr_inline++;
			} else if (b % 3 == 1) {
				ibv_wr_set_sge(qpx, 1, (uintptr_t)payload, 4096);
			} else {
				struct ibv_sge sg[3] = {
					{ (uintptr_t)payload, 100, 1 },
					{ (uintptr_t)payload, 200, 1 },
					{ (uintptr_t)payload, 300, 1 },
				};
				ibv_wr_set_sge_list(qpx, 3, sg);
			}
		}
		if (b == batches - 1) {
			ibv_wr_abort(qpx);
			st.wr_aborted++;
			st.wr_inline -= b % 3 == 0 ? n : 0;
			continue;
		}
		ret = ibv_wr_complete(qpx);
		st.wr_batches++;
		st.wr_wrs += n;
		if (ret)
			st.post_errors++;
		drain(cq);
	}
}

static void post_recvs(struct ibv_qp *qp, int calls)
{
	struct ibv_recv_wr wr[2], *bad;
	struct ibv_sge sg = { (uintptr_t)payload, 64, 1 };

	for (int c = 0; c < calls; c++) {
		memset(wr, 0, sizeof(wr));
		wr[0].next = &wr[1];
		wr[0].sg_list = wr[1].sg_list = &sg;
		wr[0].num_sge = wr[1].num_sge = 1;
		ibv_post_recv(qp, wr, &bad);
		st.recv_calls++;
		st.recv_wrs += 2;
	}
}

struct thread_arg {
	struct ibv_pd *pd;
	struct fcq *cq;
	struct ibv_qp *qp;
};

static void *second_thread(void *p)
{
	struct thread_arg *a = p;

	for (int i = 0; i < 100; i++) {
		post_list(a->qp, 1 + i % 3, 0, 1);
		drain(&a->cq->cq);
	}
	return NULL;
}

static void print_stats(void)
{
	printf("{\"qps\":%lu,\"modifies\":%lu,\"destroys\":%lu,"
	       "\"post_calls\":%lu,\"post_wrs\":%lu,\"post_accepted\":%lu,\"post_errors\":%lu,"
	       "\"post_truncated_lists\":%lu,\"polls\":%lu,\"empty_polls\":%lu,\"cqes\":%lu,"
	       "\"wr_batches\":%lu,\"wr_wrs\":%lu,\"wr_aborted\":%lu,\"wr_inline\":%lu,"
	       "\"recv_calls\":%lu,\"recv_wrs\":%lu,\"sge_over_wrs\":%lu,\"walk_capped_lists\":%lu}\n",
	       st.qps, st.modifies, st.destroys, st.post_calls, st.post_wrs, st.post_accepted,
	       st.post_errors, st.post_truncated_lists, st.polls, st.empty_polls, st.cqes,
	       st.wr_batches, st.wr_wrs, st.wr_aborted, st.wr_inline, st.recv_calls, st.recv_wrs,
	       st.sge_over_wrs, st.walk_capped_lists);
	fflush(stdout);
}

static int run(int late)
{
	struct ibv_context *ctx = fake_open();
	struct ibv_pd *pd = sqsim_alloc_pd(ctx);
	struct fcq *cq = fake_create_cq(ctx), *cq2 = fake_create_cq(ctx);
	struct ibv_qp *qp1 = make_qp(pd, cq, 128, 4, 64);
	struct ibv_qp *qp2 = make_qp(pd, cq, 1024, 32, 0);
	struct ibv_qp *qp3 = make_qp(pd, cq, 6, 4, 0); /* reports 9 */
	struct ibv_qp *qp5 = make_qp(pd, cq2, 64, 1, 0);
	struct ibv_qp_init_attr_ex ax;
	struct ibv_qp *qp4;
	struct ibv_qp_ex *qpx;
	pthread_t th;
	struct thread_arg ta = { pd, cq2, qp5 };
	char line[64];

	if (late) {
		/* a tracer attaches now: it has seen none of the above */
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	to_rts(qp1);
	to_rts(qp2);
	to_rts(qp3);
	to_rts(qp5);

	/* the very first thing after discovery: a post (the race a stop closes) */
	for (int i = 0; i < 200; i++) {
		post_list(qp1, 1 + i % 5, i & 1 ? 0xaa : 0, 1);
		poll_once(&cq->cq);
		poll_once(&cq->cq); /* usually empty */
	}
	/* a list longer than the record bound, and WRs with more SGEs than summed */
	post_list(qp2, 70, 0, 1);
	post_list(qp2, 3, 0, 20);
	drain(&cq->cq);
	/* SQ full: 12 WRs on a 9-deep SQ with nothing retired */
	{
		struct ibv_send_wr wrs[12], *bad = NULL;
		struct ibv_sge sg = { (uintptr_t)payload, 16, 1 };
		int ret;

		for (int i = 0; i < 12; i++) {
			memset(&wrs[i], 0, sizeof(wrs[i]));
			wrs[i].wr_id = 500000 + i;
			wrs[i].next = i < 11 ? &wrs[i + 1] : NULL;
			wrs[i].opcode = IBV_WR_SEND;
			wrs[i].sg_list = &sg;
			wrs[i].num_sge = 1;
			wrs[i].send_flags = IBV_SEND_SIGNALED;
		}
		ret = ibv_post_send(qp3, wrs, &bad);
		st.post_calls++;
		st.post_wrs += 12;
		st.post_accepted += ret ? (unsigned long)(bad - wrs) : 12;
		if (ret)
			st.post_errors++;
		drain(&cq->cq);
	}

	pthread_create(&th, NULL, second_thread, &ta);

	memset(&ax, 0, sizeof(ax));
	ax.send_cq = &cq->cq;
	ax.recv_cq = &cq->cq;
	ax.qp_type = IBV_QPT_RC;
	ax.cap.max_send_wr = 64;
	ax.cap.max_send_sge = 4;
	ax.cap.max_inline_data = 64;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ax.pd = pd;
	ax.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
	qp4 = sqsim_create_qp_ex(ctx, &ax);
	all_qps[nqps++] = qp4;
	st.qps++;
	qpx = sqsim_qp_to_qp_ex(qp4);
	to_rts(qp4);
	wr_batches(qpx, &cq->cq, 50);

	/* the path of a real provider: create_qp_ex through the verbs_context,
	 * then libibverbs' own ibv_qp_to_qp_ex */
	{
		struct ibv_qp *qp6 = ibv_create_qp_ex(ctx, &ax);
		struct ibv_qp_ex *qpx6;

		if (!qp6)
			return 3;
		all_qps[nqps++] = qp6;
		st.qps++;
		qpx6 = ibv_qp_to_qp_ex(qp6);
		if (qpx6 != (struct ibv_qp_ex *)qp6)
			return 4;
		to_rts(qp6);
		wr_batches(qpx6, &cq->cq, 9);
	}

	post_recvs(qp1, 10);

	pthread_join(th, NULL);
	drain(&cq->cq);
	drain(&cq2->cq);
	for (int i = 0; i < 5; i++)
		poll_once(&cq->cq);

	for (int i = 0; i < nqps; i++) {
		sqsim_destroy_qp(all_qps[i]);
		all_qps[i] = NULL;
		st.destroys++;
	}
	print_stats();
	return 0;
}

/* long_list posts n one-SGE SENDs of 64 bytes in one list, the last one
 * signaled. */
static void long_list(struct ibv_qp *qp, int n)
{
	static struct ibv_send_wr wrs[2048];
	struct ibv_send_wr *bad = NULL;
	struct ibv_sge sg = { (uintptr_t)payload, 64, 1 };
	static uint64_t id = 2000000;
	int ret;

	if (n > 2048)
		n = 2048;
	for (int i = 0; i < n; i++) {
		memset(&wrs[i], 0, sizeof(wrs[i]));
		wrs[i].wr_id = id++;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		wrs[i].opcode = IBV_WR_SEND;
		wrs[i].sg_list = &sg;
		wrs[i].num_sge = 1;
		wrs[i].send_flags = i == n - 1 ? IBV_SEND_SIGNALED : 0;
	}
	ret = ibv_post_send(qp, wrs, &bad);
	st.post_calls++;
	st.post_wrs += n;
	st.post_accepted += ret ? (unsigned long)(bad - wrs) : (unsigned long)n;
	if (ret)
		st.post_errors++;
	if (n > 64)
		st.post_truncated_lists++;
	if (n > 1024)
		st.walk_capped_lists++;
}

/* make_qp_ex creates an RC QP for the wr API, in RTS. */
static struct ibv_qp_ex *make_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct fcq *cq, uint32_t depth,
				    uint32_t sge, uint32_t inl)
{
	struct ibv_qp_init_attr_ex ax;

	memset(&ax, 0, sizeof(ax));
	ax.send_cq = &cq->cq;
	ax.recv_cq = &cq->cq;
	ax.qp_type = IBV_QPT_RC;
	ax.cap.max_send_wr = depth;
	ax.cap.max_send_sge = sge;
	ax.cap.max_inline_data = inl;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ax.pd = pd;
	ax.send_ops_flags = IBV_QP_EX_WITH_SEND;
	all_qps[nqps++] = sqsim_create_qp_ex(ctx, &ax);
	st.qps++;
	to_rts(all_qps[nqps - 1]);
	return sqsim_qp_to_qp_ex(all_qps[nqps - 1]);
}

static void destroy_all(void)
{
	for (int i = 0; i < nqps; i++) {
		sqsim_destroy_qp(all_qps[i]);
		all_qps[i] = NULL;
		st.destroys++;
	}
}

/* cut: what the tracer's bounds cut (a list walk stops after 1024 WRs, an
 * SGE list is summed up to 16 SGEs): a list of 1500 WRs, one of exactly
 * 1024 (not cut), three WRs of 20 SGEs, and a wr batch with a list of 20
 * SGEs and an inline list of 18 buffers. */
static int cut(void)
{
	struct ibv_context *ctx = fake_open();
	struct ibv_pd *pd = sqsim_alloc_pd(ctx);
	struct fcq *cq = fake_create_cq(ctx);
	struct ibv_qp *qp = make_qp(pd, cq, 2048, 20, 0);
	struct ibv_qp_ex *qpx;
	struct ibv_sge sg[20];
	struct ibv_data_buf buf[18];
	int ret;

	to_rts(qp);
	long_list(qp, 1500);
	drain(&cq->cq);
	long_list(qp, 1024);
	drain(&cq->cq);
	post_list(qp, 3, 0, 20);
	drain(&cq->cq);

	qpx = make_qp_ex(ctx, pd, cq, 64, 20, 2048);
	for (int j = 0; j < 20; j++) {
		sg[j].addr = (uintptr_t)payload;
		sg[j].length = 100 + j;
		sg[j].lkey = 1;
	}
	for (int j = 0; j < 18; j++) {
		buf[j].addr = payload;
		buf[j].length = 10 + j;
	}
	ibv_wr_start(qpx);
	qpx->wr_id = 3000000;
	qpx->wr_flags = 0;
	ibv_wr_send(qpx);
	ibv_wr_set_sge_list(qpx, 20, sg);
	qpx->wr_id = 3000001;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data_list(qpx, 18, buf);
	ret = ibv_wr_complete(qpx);
	st.wr_batches++;
	st.wr_wrs += 2;
	st.wr_inline++;
	st.sge_over_wrs += 2;
	if (ret)
		st.post_errors++;
	drain(&cq->cq);

	destroy_all();
	print_stats();
	return 0;
}

/* cut_fail: lists past the tracer's bounds the provider takes only part
 * of: 8 WRs of 20 SGEs on a QP with room for 6; lists of 1500 WRs on QPs
 * with room for 999 (refused within the walk bound) and 1050 (refused
 * past it); and wr batches of 20-SGE lists on a QP with room for 1: two
 * WRs (refused), one aborted, one posted. The QPs signal every WR, so
 * that a WR holds its slot until its completion is polled; the fake
 * makes room for half as many again as asked for. */
static int cut_fail(void)
{
	struct ibv_context *ctx = fake_open();
	struct ibv_pd *pd = sqsim_alloc_pd(ctx);
	struct fcq *cq = fake_create_cq(ctx);
	struct ibv_qp *few = make_qp_sig(pd, cq, 4, 20, 0, 1);
	struct ibv_qp *q999 = make_qp_sig(pd, cq, 666, 1, 0, 1);
	struct ibv_qp *q1050 = make_qp_sig(pd, cq, 700, 1, 0, 1);
	struct ibv_qp_ex *qpx;
	struct ibv_sge sg[20];

	to_rts(few);
	to_rts(q999);
	to_rts(q1050);
	post_list(few, 8, 0, 20);
	drain(&cq->cq);
	long_list(q999, 1500);
	long_list(q1050, 1500);
	drain(&cq->cq);

	qpx = make_qp_ex(ctx, pd, cq, 1, 20, 0);
	for (int j = 0; j < 20; j++) {
		sg[j].addr = (uintptr_t)payload;
		sg[j].length = 100 + j;
		sg[j].lkey = 1;
	}
	for (int b = 0; b < 3; b++) {
		int n = b == 0 ? 2 : 1, ret;

		ibv_wr_start(qpx);
		for (int i = 0; i < n; i++) {
			qpx->wr_id = 4000000 + 2 * b + i;
			qpx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_send(qpx);
			ibv_wr_set_sge_list(qpx, 20, sg);
		}
		if (b == 1) {
			ibv_wr_abort(qpx);
			st.wr_aborted++;
			continue;
		}
		ret = ibv_wr_complete(qpx);
		st.wr_batches++;
		st.wr_wrs += n;
		if (ret)
			st.post_errors++;
		else
			st.sge_over_wrs += n;
		drain(&cq->cq);
	}

	destroy_all();
	print_stats();
	return 0;
}

/* What the entry-points run did, beyond st. */
static struct {
	unsigned long op_wrs[12]; /* per builder, in the order of entry_ops */
	unsigned long ex_polls, ex_empty, ex_cqes, srq_calls, srq_wrs;
	unsigned long cq_creates, cq_modifies, cq_resizes, cq_destroys;
} en;

/* entry_build begins WR i through the builder i % 12 and sets its data;
 * it returns the builder's index. */
static int entry_build(struct ibv_qp_ex *qpx, unsigned long i)
{
	struct ibv_mw_bind_info bi = { .addr = (uintptr_t)payload, .length = 64 };
	static const uint64_t word = 7;
	int k = i % 12, data = 1;

	switch (k) {
	case 0: ibv_wr_send(qpx); break;
	case 1: ibv_wr_send_imm(qpx, 0); break;
	case 2: ibv_wr_send_inv(qpx, 9); break;
	case 3: ibv_wr_rdma_write(qpx, 7, 0x1000); break;
	case 4: ibv_wr_rdma_write_imm(qpx, 7, 0x1000, 0); break;
	case 5: ibv_wr_rdma_read(qpx, 7, 0x1000); break;
	case 6: ibv_wr_atomic_cmp_swp(qpx, 7, 0x1000, 0, 1); break;
	case 7: ibv_wr_atomic_fetch_add(qpx, 7, 0x1000, 1); break;
	case 8: ibv_wr_atomic_write(qpx, 7, 0x1000, &word); data = 0; break;
	case 9: ibv_wr_bind_mw(qpx, NULL, 9, &bi); data = 0; break;
	case 10: ibv_wr_local_inv(qpx, 9); data = 0; break;
	default:
		ibv_wr_send_tso(qpx, payload, 64, 1400);
		ibv_wr_set_ud_addr(qpx, NULL, 1, 2);
		ibv_wr_set_xrc_srqn(qpx, 3);
	}
	if (data)
		ibv_wr_set_sge(qpx, 1, (uintptr_t)payload, 8 + k);
	return k;
}

/* entry_poll drains the extended CQ, one session at a time, retiring the
 * WRs whose completions come back; it returns the completions. */
static int entry_poll(struct ibv_cq_ex *cqx)
{
	struct ibv_poll_cq_attr attr = { 0 };
	int n = 0;

	en.ex_polls++;
	if (ibv_start_poll(cqx, &attr)) {
		en.ex_empty++;
		return 0;
	}
	do {
		struct ibv_qp *qp = qp_by_num(ibv_wc_read_qp_num(cqx));

		if (qp)
			retire(qp, 1);
		n++;
	} while (ibv_next_poll(cqx) == 0);
	ibv_end_poll(cqx);
	en.ex_cqes += n;
	return n;
}

static int entry(void)
{
	struct ibv_context *ctx = fake_open();
	struct ibv_pd *pd = sqsim_alloc_pd(ctx);
	struct ibv_cq_init_attr_ex ca = { .cqe = 255 };
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &ca);
	struct ibv_cq *cq = sqsim_create_cq(ctx, 100);
	struct ibv_modify_cq_attr ma = { .attr_mask = IBV_CQ_ATTR_MODERATE, .moderate = { 8, 16 } };
	struct ibv_srq srq = { .context = ctx };
	struct ibv_qp_init_attr_ex ax;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	unsigned long i = 0;

	if (!cqx || !cq)
		return 3;
	en.cq_creates = 2;
	memset(&ax, 0, sizeof(ax));
	ax.send_cq = ax.recv_cq = ibv_cq_ex_to_cq(cqx);
	ax.qp_type = IBV_QPT_RC;
	ax.cap.max_send_wr = 64;
	ax.cap.max_send_sge = 2;
	ax.cap.max_inline_data = 64;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ax.pd = pd;
	ax.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_SEND_WITH_INV |
			    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
			    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			    IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
			    IBV_QP_EX_WITH_TSO;
	qp = ibv_create_qp_ex(ctx, &ax);
	if (!qp)
		return 4;
	all_qps[nqps++] = qp;
	st.qps++;
	qpx = ibv_qp_to_qp_ex(qp);
	to_rts(qp);

	/* nothing to poll yet */
	for (int k = 0; k < 3; k++)
		entry_poll(cqx);
	for (int b = 0; b < 60; b++) {
		int n = 1 + b % 4, ret;

		ibv_wr_start(qpx);
		for (int j = 0; j < n; j++, i++) {
			qpx->wr_id = 5000000 + i;
			qpx->wr_flags = j == n - 1 ? IBV_SEND_SIGNALED : 0;
			en.op_wrs[entry_build(qpx, i)]++;
		}
		ret = ibv_wr_complete(qpx);
		st.wr_batches++;
		st.wr_wrs += n;
		if (ret)
			st.post_errors++;
		if (b % 3 == 2) /* three batches' completions in one session */
			while (entry_poll(cqx) > 0)
				;
	}
	while (entry_poll(cqx) > 0)
		;
	if (ibv_modify_cq(ibv_cq_ex_to_cq(cqx), &ma))
		return 5;
	en.cq_modifies++;
	if (sqsim_resize_cq(cq, 300))
		return 6;
	en.cq_resizes++;
	for (int c = 0; c < 7; c++) {
		struct ibv_recv_wr wr[3], *bad;

		memset(wr, 0, sizeof(wr));
		wr[0].next = &wr[1];
		wr[1].next = &wr[2];
		ibv_post_srq_recv(&srq, wr, &bad);
		en.srq_calls++;
	}
	en.srq_wrs = srq_wrs;
	destroy_all();
	sqsim_destroy_cq(cq);
	sqsim_destroy_cq(ibv_cq_ex_to_cq(cqx));
	en.cq_destroys = 2;

	printf("{\"qps\":%lu,\"wr_batches\":%lu,\"wr_wrs\":%lu,\"post_errors\":%lu,\"op_wrs\":[", st.qps,
	       st.wr_batches, st.wr_wrs, st.post_errors);
	for (int k = 0; k < 12; k++)
		printf("%s%lu", k ? "," : "", en.op_wrs[k]);
	printf("],\"ex_polls\":%lu,\"ex_empty\":%lu,\"ex_cqes\":%lu,\"srq_calls\":%lu,\"srq_wrs\":%lu,"
	       "\"cq_creates\":%lu,\"cq_modifies\":%lu,\"cq_resizes\":%lu,\"cq_destroys\":%lu}\n",
	       en.ex_polls, en.ex_empty, en.ex_cqes, en.srq_calls, en.srq_wrs, en.cq_creates, en.cq_modifies,
	       en.cq_resizes, en.cq_destroys);
	fflush(stdout);
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* post_loop posts n one-WR inline SENDs of 64 bytes on a new QP of
 * depth WRs, every sig_every-th one signaled, and polls after each; it
 * returns the time per iteration. */
static double post_loop_paced(long n, uint32_t depth, long sig_every, long pace_us);

static double post_loop(long n, uint32_t depth, long sig_every)
{
	return post_loop_paced(n, depth, sig_every, 0);
}

/* post_loop_paced is post_loop with a sleep of pace_us after each
 * iteration (0: none). */
static double post_loop_paced(long n, uint32_t depth, long sig_every, long pace_us)
{
	struct ibv_context *ctx = fake_open();
	struct ibv_pd *pd = sqsim_alloc_pd(ctx);
	struct fcq *cq = fake_create_cq(ctx);
	struct ibv_qp *qp = make_qp(pd, cq, depth, 1, 64);
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sg = { (uintptr_t)payload, 64, 1 };
	struct ibv_wc wc[16];
	uint64_t t0;

	to_rts(qp);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		wr.wr_id = i;
		wr.send_flags = IBV_SEND_INLINE | (i % sig_every == sig_every - 1 ? IBV_SEND_SIGNALED : 0);
		ibv_post_send(qp, &wr, &bad);
		retire(qp, ibv_poll_cq(&cq->cq, 16, wc));
		if (pace_us)
			usleep(pace_us);
	}
	return (double)(now_ns() - t0) / n;
}

static int bench(long n)
{
	printf("{\"ns_per_iter\":%.1f,\"iters\":%ld}\n", post_loop(n, 1 << 20, 1), n);
	return 0;
}

/* paced: n signaled one-WR posts, each followed by a poll and a sleep of
 * us microseconds: a target that posts on while probes are placed. */
static int paced(long n, long us)
{
	printf("{\"ns_per_iter\":%.1f,\"iters\":%ld}\n", post_loop_paced(n, 1 << 20, 1, us), n);
	return 0;
}

/* idle: n one-WR posts, each followed by a poll (one in four returns a
 * completion), then "posted n" on stdout and a wait for stdin to close: a
 * target that keeps running while the tracer detaches. */
static int idle(long n)
{
	char buf[64];

	post_loop(n, 1 << 10, 4);
	printf("posted %ld\n", n);
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}

#define TURNS_MAX 256

/* turns: Q QPs posted to in turn by one thread, R rounds of one unsignaled
 * WR each, twice, the first QP replaced by a new one between the two; it
 * prints each half's QPs as [address, number] pairs. */
static int turns(int q, int rounds)
{
	struct ibv_context *ctx = fake_open();
	struct ibv_pd *pd = sqsim_alloc_pd(ctx);
	struct fcq *cq = fake_create_cq(ctx);
	struct ibv_qp *qps[TURNS_MAX];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sg = { (uintptr_t)payload, 8, 1 };
	struct ibv_qp_init_attr a;

	if (q < 1 || q > TURNS_MAX || rounds < 1)
		return 2;
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = &cq->cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 16;
	a.cap.max_send_sge = 1;
	for (int i = 0; i < q; i++) {
		qps[i] = sqsim_create_qp(pd, &a);
		to_rts(qps[i]);
	}
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	printf("{\"halves\":[");
	for (int half = 0; half < 2; half++) {
		if (half) {
			sqsim_destroy_qp(qps[0]);
			qps[0] = sqsim_create_qp(pd, &a);
			to_rts(qps[0]);
		}
		for (int r = 0; r < rounds; r++)
			for (int i = 0; i < q; i++) {
				wr.wr_id = (uint64_t)r * q + i;
				if (ibv_post_send(qps[i], &wr, &bad))
					return 3;
			}
		printf("%s[", half ? "," : "");
		for (int i = 0; i < q; i++)
			printf("%s[%lu,%u]", i ? "," : "", (unsigned long)(uintptr_t)qps[i], qps[i]->qp_num);
		printf("]");
	}
	printf("]}\n");
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return run(0);
	if (argc >= 2 && !strcmp(argv[1], "late"))
		return run(1);
	if (argc >= 3 && !strcmp(argv[1], "bench"))
		return bench(atol(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "paced"))
		return paced(atol(argv[2]), atol(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "idle"))
		return idle(atol(argv[2]));
	if (argc >= 2 && !strcmp(argv[1], "cut"))
		return cut();
	if (argc >= 2 && !strcmp(argv[1], "cut-fail"))
		return cut_fail();
	if (argc >= 2 && !strcmp(argv[1], "entry"))
		return entry();
	if (argc >= 4 && !strcmp(argv[1], "turns"))
		return turns(atoi(argv[2]), atoi(argv[3]));
	fprintf(stderr, "usage: target run|late|bench N|idle N|cut|cut-fail|entry|turns Q R\n");
	return 2;
}
