/* The simulated mlx5-like HCA: send-queue semantics of rdma-core's
 * providers/mlx5 (qp.c, cq.c, verbs.c) as docs/design.md states them, a NIC
 * model that executes WQEs in order, and ground-truth counters per QP.
 * See sim.h for the entry points and verbs/nicmodel for the model's
 * parameters. This file is what every other file of the simulator stands
 * on: the model's defaults, the clock, PDs, MRs and AHs. The rest is by
 * role: sim_post.c (the send data path and the NIC's timing),
 * sim_wr_api.c (the ibv_wr_* API), sim_recv.c (the receive side and
 * SRQs), sim_cq.c (completions and the CQ calls), sim_qp.c (the QP calls)
 * and, above them all, sim_device.c (the context and its ops table);
 * sim_internal.h is what they share. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_internal.h"

SIM_HIDDEN uint64_t roundup_pow2(uint64_t v)
{
	uint64_t p = 1;
	while (p < v)
		p <<= 1;
	return p;
}

SIM_HIDDEN uint64_t sim_now(struct sim_ctx *ctx)
{
	struct timespec ts;

	if (ctx->cfg.deterministic)
		return 0;
	if (ctx->manual_clock)
		return ctx->manual_clock;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int env_flag(const char *name, int dflt)
{
	const char *v = getenv(name);

	if (!v)
		return dflt;
	return strcmp(v, "0") ? 1 : 0;
}

void sqsim_default_config(struct sqsim_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->prefer_bf = env_flag("MLX5_POST_SEND_PREFER_BF", 1);
	cfg->shut_up_bf = env_flag("MLX5_SHUT_UP_BF", 0);
	cfg->bf_buf_size = 256;
	cfg->link_gbps = 100.0;
	cfg->wqe_ns = 10;
	cfg->dma_read_ns = 450;
	cfg->rtt_ns = 1500;
	cfg->max_qp_wr = 32768;
	cfg->max_sge = 30;
}

struct ibv_pd *sqsim_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = ctx;
	return pd;
}

int sqsim_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

static uint32_t next_key = 0x1000;

struct ibv_mr *sqsim_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct ibv_mr *mr = calloc(1, sizeof(*mr));

	(void)access;
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	mr->lkey = mr->rkey = __atomic_fetch_add(&next_key, 1, __ATOMIC_RELAXED);
	return mr;
}

int sqsim_dereg_mr(struct ibv_mr *mr)
{
	free(mr);
	return 0;
}

struct ibv_ah *sqsim_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah *ah = calloc(1, sizeof(*ah));

	(void)attr;
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->context = pd->context;
	ah->pd = pd;
	return ah;
}

int sqsim_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}
