/* A verbs application on the simulated HCA (verbs/sim*.c) that also
 * imports mlx5dv's direct-verbs functions, as UCX's mlx5 transports do
 * (built with -DDIRECT_VERBS, linked with libmlx5), or not: it creates a
 * QP, posts and polls a few WRs through ibv_post_send and ibv_poll_cq,
 * then waits until sqscope ends it (SIGINT or SIGTERM, exit status 0):
 * its standard input is not a terminal it could wait on (a trace with
 * --json gives it none). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#ifdef DIRECT_VERBS
#include <infiniband/mlx5dv.h>
#endif

static void done(int sig)
{
	(void)sig;
	_exit(0);
}

#include "sim.h"

int main(int argc, char **argv)
{
	struct sqsim_config cfg;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	static char payload[64];

#ifdef DIRECT_VERBS
	if (argc > 5) { /* never: the import is what counts */
		struct mlx5dv_obj o;

		mlx5dv_init_obj(&o, MLX5DV_OBJ_QP);
	}
#endif
	(void)argv;
	sqsim_default_config(&cfg);
	cfg.deterministic = 1;
	if (!(ctx = sqsim_open_device(&cfg)) || !(pd = sqsim_alloc_pd(ctx)) || !(cq = sqsim_create_cq(ctx, 64)))
		return 2;
	struct ibv_qp_init_attr attr = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS };
	if (!(qp = sqsim_create_qp(pd, &attr)) || sqsim_modify_qp(qp, &rts, IBV_QP_STATE))
		return 2;
	for (int i = 0; i < 16; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)payload, .length = 32, .lkey = 1 };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		struct ibv_wc wc;

		if (ibv_post_send(qp, &wr, &bad))
			return 3;
		while (ibv_poll_cq(cq, 1, &wc) == 0)
			;
	}
	signal(SIGINT, done);
	signal(SIGTERM, done);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
