/* The receive side and shared CQs on the simulated HCA (verbs/sim.c), for
 * the session test of per-CQ polls and per-QP receives. It prints, as one
 * JSON line on stdout, what it posted and what the simulator counted (its
 * ground truth).
 *
 * usage: recvside SENDERS ROUNDS RECVS
 *            SENDERS QPs share one send CQ and one receive CQ. Sender i
 *            posts 2*(i+1) receives in calls of 2, then for ROUNDS
 *            rounds 4 SENDs (the last signaled) per round; the shared
 *            send CQ is polled until each round's CQEs came, and once
 *            more (empty), the shared receive CQ once per round. A
 *            receiver QP, on a CQ of its own for both queues, only
 *            posts RECVS receives in calls of 4 and polls its CQ twice
 *            per receive call. The simulator's wire has no receiver:
 *            no receive completes.
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

/* new_qp creates an RC QP in RTS; *max_recv_wr is what it asks for and
 * then what it got. */
static struct ibv_qp *new_qp(struct ibv_cq *scq, struct ibv_cq *rcq, uint32_t *max_recv_wr)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = { .max_send_wr = 64, .max_recv_wr = *max_recv_wr, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS };
	struct ibv_qp *qp = sqsim_create_qp(pd, &attr);

	if (!qp)
		die("sqsim_create_qp");
	if (sqsim_modify_qp(qp, &rts, IBV_QP_STATE))
		die("sqsim_modify_qp");
	*max_recv_wr = attr.cap.max_recv_wr;
	return qp;
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

/* poll polls cq until want completions came, then once more. */
static void poll(struct ibv_cq *cq, int want)
{
	struct ibv_wc wc[16];
	int got = 0;

	while (got < want) {
		int n = ibv_poll_cq(cq, 16, wc);

		if (n < 0)
			die("ibv_poll_cq");
		got += n;
	}
	if (ibv_poll_cq(cq, 16, wc) < 0)
		die("ibv_poll_cq");
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

static void print_qp(struct ibv_qp *qp, uint64_t recvs, uint32_t max_recv_wr)
{
	struct sqsim_counters c;

	if (sqsim_qp_counters(qp, &c))
		die("sqsim_qp_counters");
	printf("{\"qp_num\":%u,\"recvs_posted\":%lu,\"post_recvs\":%lu,\"wrs\":%lu,\"cqes_polled\":%lu,"
	       "\"max_recv_wr\":%u,\"send_cq\":%lu,\"recv_cq\":%lu}",
	       c.qp_num, (unsigned long)recvs, (unsigned long)c.post_recvs, (unsigned long)c.wrs,
	       (unsigned long)c.cqes_polled, max_recv_wr,
	       (unsigned long)(uintptr_t)qp->send_cq, (unsigned long)(uintptr_t)qp->recv_cq);
}

int main(int argc, char **argv)
{
	struct sqsim_config cfg;
	struct ibv_qp *senders[MAX_SENDERS], *receiver;
	struct ibv_cq *scq, *rcq, *own;
	uint64_t recvs[MAX_SENDERS], rrecvs = 0, wr_id = 0;
	uint32_t depth[MAX_SENDERS], rdepth = 256;
	int n, rounds, nrecv;

	if (argc != 4 || (n = atoi(argv[1])) < 1 || n > MAX_SENDERS || (rounds = atoi(argv[2])) < 0 ||
	    (nrecv = atoi(argv[3])) < 0 || nrecv > 256) {
		fprintf(stderr, "usage: recvside SENDERS(1-%d) ROUNDS RECVS(0-256)\n", MAX_SENDERS);
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
		recvs[i] = post_recvs(senders[i], 2 * (i + 1), 2);
	}
	receiver = new_qp(own, own, &rdepth);
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < n; i++)
			send4(senders[i], &wr_id);
		poll(scq, n);
		poll(rcq, 0);
	}
	for (int done = 0; done < nrecv; done += 4) {
		rrecvs += post_recvs(receiver, nrecv - done < 4 ? nrecv - done : 4, 4);
		poll(own, 0);
		poll(own, 0);
	}
	printf("{\"cqs\":[");
	print_cq("send", scq);
	printf(",");
	print_cq("recv", rcq);
	printf(",");
	print_cq("receiver", own);
	printf("],\"qps\":[");
	for (int i = 0; i < n; i++) {
		print_qp(senders[i], recvs[i], depth[i]);
		printf(",");
	}
	print_qp(receiver, rrecvs, rdepth);
	printf("]}\n");
	return 0;
}
