/* The probe tests' target: what its fake provider (target_provider.c)
 * gives the application (target.c). */
#ifndef SQSCOPE_TARGET_H
#define SQSCOPE_TARGET_H

#include <pthread.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#define NOINLINE __attribute__((noinline, used))

struct fcq {
	union { /* an ibv_cq_ex starts as an ibv_cq */
		struct ibv_cq cq;
		struct ibv_cq_ex cqx;
	};
	pthread_mutex_t lock;
	struct ibv_wc ring[8192];
	unsigned head, tail;
	struct ibv_wc cur; /* extended polling: the completion polled last */
};

/* fake_open opens the fake provider's device; fake_create_cq makes a CQ
 * on it the way the provider's own calls do. */
struct ibv_context *fake_open(void);
struct fcq *fake_create_cq(struct ibv_context *ctx);
/* retire: the fake retires signaled WRs when their CQE is polled. */
void retire(struct ibv_qp *qp, int n);
/* srq_wrs counts the WRs ibv_post_srq_recv took. */
extern unsigned long srq_wrs;

/* The simulated HCA's entry points the tracer hooks by symbol. */
NOINLINE struct ibv_pd *sqsim_alloc_pd(struct ibv_context *ctx);
NOINLINE struct ibv_qp *sqsim_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
NOINLINE struct ibv_qp *sqsim_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
NOINLINE struct ibv_qp_ex *sqsim_qp_to_qp_ex(struct ibv_qp *qp);
NOINLINE int sqsim_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
NOINLINE int sqsim_destroy_qp(struct ibv_qp *qp);
NOINLINE struct ibv_cq *sqsim_create_cq(struct ibv_context *ctx, int cqe);
NOINLINE int sqsim_resize_cq(struct ibv_cq *cq, int cqe);
NOINLINE int sqsim_destroy_cq(struct ibv_cq *cq);

#endif
