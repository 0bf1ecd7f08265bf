/* The simulated HCA's context: opening the device, with its ops table,
 * which each data path fills with its own functions (sim_post.c,
 * sim_cq.c, sim_recv.c), closing it, and the manual clock of the tests.
 * It stands above every other file of the simulator. */
#include <errno.h>
#include <stdlib.h>

#include "sim_internal.h"

static struct ibv_device sim_ibdev = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "sim",
	.dev_name = "sim",
};

struct ibv_context *sqsim_open_device(const struct sqsim_config *cfg)
{
	struct sim_ctx *ctx = calloc(1, sizeof(*ctx));

	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	if (cfg)
		ctx->cfg = *cfg;
	else
		sqsim_default_config(&ctx->cfg);
	if (ctx->cfg.link_gbps <= 0)
		ctx->cfg.link_gbps = 100.0;
	if (!ctx->cfg.max_qp_wr)
		ctx->cfg.max_qp_wr = 32768;
	if (!ctx->cfg.max_sge)
		ctx->cfg.max_sge = 30;
	ctx->ibctx.device = &sim_ibdev;
	ctx->ibctx.cmd_fd = -1;
	ctx->ibctx.async_fd = -1;
	ctx->ibctx.num_comp_vectors = 1;
	pthread_mutex_init(&ctx->ibctx.mutex, NULL);
	sim_poll_ops(&ctx->ibctx.ops);
	sim_send_ops(&ctx->ibctx.ops);
	sim_recv_ops(&ctx->ibctx.ops);
	return &ctx->ibctx;
}

int sqsim_close_device(struct ibv_context *ctx)
{
	if (!ctx)
		return EINVAL;
	pthread_mutex_destroy(&ctx->mutex);
	free(ctx);
	return 0;
}

void sqsim_set_clock(struct ibv_context *ctx, uint64_t ns)
{
	to_sctx(ctx)->manual_clock = ns;
}
