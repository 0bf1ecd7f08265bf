/* The receive side and shared CQs on the simulated HCA (verbs/sim*.c), for
 * the session test of per-CQ polls and per-QP receives. It prints, as one
 * JSON line on stdout, what it posted and what the simulator counted (its
 * ground truth).
 *
 * usage: recvside SENDERS ROUNDS RECVS
 *            SENDERS QPs share one send CQ and one receive CQ. Sender i
 *            posts 2*(i+1) receives in calls of 2 (nothing sends to
 *            them), then for ROUNDS rounds 4 SENDs (the last signaled)
 *            per round; the shared send CQ is polled until each round's
 *            CQEs came, and once more (empty), the shared receive CQ
 *            once per round. A receiver QP, connected to sender 0 on the
 *            simulated wire and on a CQ of its own for both queues, only
 *            posts receives and polls: RECVS (at least 4) in calls of 4
 *            before the first round, and after each round it polls
 *            until sender 0's 4 SENDs came and posts a receive for each.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "sim.h"

#define MAX_SENDERS 16

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static char buf[4096];

static void die(const char *what)
{
	fprintf(stderr, "recvside: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct ibv_cq *new_cq(int cqe)
{
	struct ibv_cq *cq = sqsim_create_cq(ctx, cqe);

	if (!cq)
		die("sqsim_create_cq");
	return cq;
}

/* new_qp creates an RC QP; *max_recv_wr is what it asks for and then
 * what it got. */
static struct ibv_qp *new_qp(struct ibv_cq *scq, struct ibv_cq *rcq, uint32_t *max_recv_wr)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = { .max_send_wr = 64, .max_recv_wr = *max_recv_wr, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = sqsim_create_qp(pd, &attr);

	if (!qp)
		die("sqsim_create_qp");
	*max_recv_wr = attr.cap.max_recv_wr;
	return qp;
}

/* to_rts moves qp through INIT and RTR to RTS, as a connection does. */
static void to_rts(struct ibv_qp *qp)
{
	enum ibv_qp_state states[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };

	for (int i = 0; i < 3; i++) {
		struct ibv_qp_attr a = { .qp_state = states[i] };

		if (sqsim_modify_qp(qp, &a, IBV_QP_STATE))
			die("sqsim_modify_qp");
	}
}

/* post_recvs posts n receives in calls of up to per WRs; it returns how
 * many were accepted. */
static uint64_t post_recvs(struct ibv_qp *qp, int n, int per)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = 1 };
	struct ibv_recv_wr wr[8], *bad;
	uint64_t posted = 0;

	while (n > 0) {
		int k = n < per ? n : per;

		for (int i = 0; i < k; i++)
			wr[i] = (struct ibv_recv_wr){ .wr_id = posted + (uint64_t)i,
						      .next = i + 1 < k ? &wr[i + 1] : NULL, .sg_list = &sge, .num_sge = 1 };
		if (ibv_post_recv(qp, wr, &bad))
			die("ibv_post_recv");
		posted += (uint64_t)k;
		n -= k;
	}
	return posted;
}

/* send4 posts 4 SENDs in one call, the last signaled. */
static void send4(struct ibv_qp *qp, uint64_t *wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = 1 };
	struct ibv_send_wr wr[4], *bad;

	for (int i = 0; i < 4; i++)
		wr[i] = (struct ibv_send_wr){ .wr_id = (*wr_id)++, .next = i < 3 ? &wr[i + 1] : NULL, .sg_list = &sge,
					      .num_sge = 1, .opcode = IBV_WR_SEND,
					      .send_flags = i == 3 ? IBV_SEND_SIGNALED : 0 };
	if (ibv_post_send(qp, wr, &bad))
		die("ibv_post_send");
}

/* poll polls cq until want completions came, then once more; it
 * returns how many came. */
static int poll(struct ibv_cq *cq, int want)
{
	struct ibv_wc wc[16];
	int got = 0, n;

	while (got < want) {
		n = ibv_poll_cq(cq, 16, wc);
		if (n < 0 || (n > 0 && wc[n - 1].status != IBV_WC_SUCCESS))
			die("ibv_poll_cq");
		got += n;
	}
	n = ibv_poll_cq(cq, 16, wc);
	if (n < 0)
		die("ibv_poll_cq");
	return got + n;
}

static void print_cq(const char *name, struct ibv_cq *cq)
{
	struct sqsim_cq_counters c;

	if (sqsim_cq_counters(cq, &c))
		die("sqsim_cq_counters");
	printf("{\"name\":\"%s\",\"cq\":%lu,\"polls\":%lu,\"empty_polls\":%lu,\"cqes\":%lu,\"depth\":%d}", name,
	       (unsigned long)(uintptr_t)cq, (unsigned long)c.polls, (unsigned long)c.empty_polls,
	       (unsigned long)c.cqes, c.cqe);
}

/* print_qp prints what the simulator counted of qp, and what the target
 * posted to its RQ, took from it and held there at most. */
static void print_qp(struct ibv_qp *qp, uint64_t recvs, uint64_t taken, uint64_t peak, uint32_t max_recv_wr)
{
	struct sqsim_counters c;

	if (sqsim_qp_counters(qp, &c))
		die("sqsim_qp_counters");
	printf("{\"qp_num\":%u,\"recvs_posted\":%lu,\"recvs_taken\":%lu,\"rq_peak\":%lu,\"post_recvs\":%lu,"
	       "\"recvs_consumed\":%lu,\"recv_cqes_polled\":%lu,\"wrs\":%lu,\"cqes_polled\":%lu,"
	       "\"max_recv_wr\":%u,\"send_cq\":%lu,\"recv_cq\":%lu}",
	       c.qp_num, (unsigned long)recvs, (unsigned long)taken, (unsigned long)peak, (unsigned long)c.post_recvs,
	       (unsigned long)c.recvs_consumed, (unsigned long)c.recv_cqes_polled, (unsigned long)c.wrs,
	       (unsigned long)c.cqes_polled, max_recv_wr,
	       (unsigned long)(uintptr_t)qp->send_cq, (unsigned long)(uintptr_t)qp->recv_cq);
}

int main(int argc, char **argv)
{
	struct sqsim_config cfg;
	struct ibv_qp *senders[MAX_SENDERS], *receiver;
	struct ibv_cq *scq, *rcq, *own;
	uint64_t recvs[MAX_SENDERS], rrecvs = 0, rtaken = 0, rpeak, wr_id = 0;
	uint32_t depth[MAX_SENDERS], rdepth = 256;
	int n, rounds, nrecv;

	if (argc != 4 || (n = atoi(argv[1])) < 1 || n > MAX_SENDERS || (rounds = atoi(argv[2])) < 0 ||
	    (nrecv = atoi(argv[3])) < 4 || nrecv > 256) {
		fprintf(stderr, "usage: recvside SENDERS(1-%d) ROUNDS RECVS(4-256)\n", MAX_SENDERS);
		return 2;
	}
	sqsim_default_config(&cfg);
	cfg.deterministic = 1; /* a CQE is there at the doorbell */
	ctx = sqsim_open_device(&cfg);
	if (!ctx)
		die("sqsim_open_device");
	pd = sqsim_alloc_pd(ctx);
	if (!pd)
		die("sqsim_alloc_pd");
	scq = new_cq(1024);
	rcq = new_cq(1024);
	own = new_cq(512);
	for (int i = 0; i < n; i++) {
		depth[i] = 48; /* the simulator rounds it up to 64 */
		senders[i] = new_qp(scq, rcq, &depth[i]);
	}
	receiver = new_qp(own, own, &rdepth);
	if (sqsim_connect(senders[0], receiver))
		die("sqsim_connect");
	for (int i = 0; i < n; i++) {
		to_rts(senders[i]);
		recvs[i] = post_recvs(senders[i], 2 * (i + 1), 2);
	}
	to_rts(receiver);
	rrecvs = post_recvs(receiver, nrecv, 4);
	rpeak = rrecvs;
	for (int r = 0; r < rounds; r++) {
		int got;

		for (int i = 0; i < n; i++)
			send4(senders[i], &wr_id);
		poll(scq, n);
		poll(rcq, 0);
		got = poll(own, 4); /* sender 0's SENDs took 4 receives */
		rtaken += (uint64_t)got;
		rrecvs += post_recvs(receiver, got, 4);
		if (rrecvs - rtaken > rpeak)
			rpeak = rrecvs - rtaken;
	}
	printf("{\"cqs\":[");
	print_cq("send", scq);
	printf(",");
	print_cq("recv", rcq);
	printf(",");
	print_cq("receiver", own);
	printf("],\"qps\":[");
	for (int i = 0; i < n; i++) {
		print_qp(senders[i], recvs[i], 0, recvs[i], depth[i]);
		printf(",");
	}
	print_qp(receiver, rrecvs, rtaken, rpeak, rdepth);
	printf("]}\n");
	return 0;
}
