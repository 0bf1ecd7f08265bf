/* The interface between testdata/dlopen_target.c and the provider library
 * it dlopen()s, testdata/dlopen_provider.c: one exported table, looked up
 * with dlsym. Everything behind it is static to the library. */
#ifndef SQSCOPE_DLOPEN_PROVIDER_H
#define SQSCOPE_DLOPEN_PROVIDER_H

#include <infiniband/verbs.h>

struct sqfake_provider {
	struct ibv_context *(*open)(void);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx);
	/* creates the QP and rewrites attr->cap with what it got */
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*destroy_qp)(struct ibv_qp *qp);
	void (*close)(struct ibv_context *ctx, struct ibv_cq *cq);
};

#define SQFAKE_PROVIDER_SYM "sqfake_provider"

#endif
