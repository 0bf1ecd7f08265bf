/* The workload's traffic loop: posts on one endpoint through the unmodified
 * static inline ibv_post_send()/ibv_wr_*() of verbs.h and reaps with
 * ibv_poll_cq() (or, on an extended CQ, ibv_start_poll()/ibv_next_poll()/
 * ibv_end_poll()), the way perftest's bandwidth tests do. */
#ifndef SQSCOPE_LOOP_H
#define SQSCOPE_LOOP_H

#include <stdint.h>
#include "../verbs/endpoint.h"

enum wl_fault {
	WL_FAULT_NONE = 0,
	WL_FAULT_NEVER_SIGNAL,  /* no WR signaled: the SQ never drains */
	WL_FAULT_LAZY_POLL,     /* poll only every lazy_poll post calls */
	WL_FAULT_INLINE_TOO_BIG,/* inline payload over max_inline_data */
	WL_FAULT_TOO_MANY_SGE,  /* num_sge over max_send_sge */
	WL_FAULT_BAD_OPCODE,    /* an opcode the provider rejects (EINVAL) */
	WL_FAULT_POST_BEFORE_RTS,/* post on a QP left in RTR (set up by the caller) */
	WL_FAULT_CQ_OVERRUN,    /* reap only when tx_depth WRs are outstanding */
	WL_FAULT_RQ_STARVE,     /* the receiver reaps its receives but posts no new ones */
};

struct wl_params {
	int api_wr;          /* post with ibv_wr_start..ibv_wr_complete */
	/* set: post through it instead of ibv_post_send, as an application on
	 * direct verbs does (the simulated HCA's sqsim_dv_post_send) */
	int (*direct_post)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
	int opcodes[16];     /* posted in turn: WR i has opcodes[i % n_opcodes] */
	uint32_t n_opcodes;
	uint32_t size;       /* payload bytes per WR */
	int use_inline;      /* IBV_SEND_INLINE / ibv_wr_set_inline_data */
	uint32_t num_sge;    /* SGEs per WR (size is split across them) */
	uint32_t cq_mod;     /* signal every cq_mod-th WR (and the last) */
	uint32_t tx_depth;   /* the application's own limit on outstanding WRs; 0: none */
	uint32_t post_list;  /* WRs per post call */
	uint64_t iters;      /* WRs to attempt; 0 with duration_ns */
	uint64_t duration_ns;
	uint32_t poll_batch; /* ibv_wc entries per ibv_poll_cq */
	uint64_t rate;       /* WR/s cap; 0 = none */
	int fault;
	uint32_t lazy_poll;
	uint64_t fault_after_ns; /* the fault starts this long into the run */
	uint32_t f_size;         /* WR shape while the fault is active */
	int f_inline;
	uint32_t f_num_sge;
	uint64_t drain_ns;   /* how long to wait for outstanding CQEs at the end */
	uint64_t sig_slots;  /* the ring of signaled WRs outstanding, a power of two: it doubles when full */
};

struct wl_result {
	uint64_t attempts;     /* WRs tried */
	uint64_t wrs;          /* WRs accepted */
	uint64_t post_calls;
	uint64_t doorbells;    /* calls that posted >= 1 WR */
	uint64_t inline_wrs;
	uint64_t signaled;
	uint64_t post_ns;      /* time spent inside post calls */
	uint64_t cqes;         /* send CQEs polled */
	uint64_t cqe_errors;   /* of those, status != success */
	uint64_t polls;
	uint64_t empty_polls;
	uint64_t enomem;
	uint64_t einval;
	uint64_t other_errors;
	int first_errno;
	uint64_t first_error_at; /* attempts before the first failed post */
	uint64_t lat_sum_ns;   /* post -> CQE polled, signaled WRs */
	uint64_t lat_n;
	uint64_t lat_max_ns;
	uint64_t peak_outstanding; /* as the application counts it */
	uint64_t recvs_posted;
	uint64_t recv_cqes;
	uint64_t start_ns, end_ns;
	uint64_t cpu_ns;       /* the thread's CPU time from start_ns to end_ns */
	uint64_t undrained;    /* signaled WRs whose CQE never came */
	uint64_t stalled_unsignaled; /* WRs outstanding, none signaled, when the flow control stalled */
	uint64_t fault_start_ns; /* when the fault became active (0: never) */
	uint64_t fault_attempt;  /* WRs attempted before it did */
	int stalled;             /* held by tx_depth with no CQE for drain_ns: stopped */
};

/* wl_run_group runs one thread's n QPs: eps[i] posted with ps[i], its
 * results in rs[i]. The thread posts to each QP in turn and polls after
 * each post; with shared_cq every QP's send CQ is one CQ, whose completions
 * go to their QP by their wr_id. */
int wl_run_group(int n, struct sq_endpoint *const *eps, const struct wl_params *ps,
		 struct wl_result *rs, int shared_cq);
void wl_request_stop(void);
void wl_reset_stop(void);
uint64_t wl_now_ns(void);

/* threads created and joined beside the traffic until stopped (churn.c);
 * NULL when none could be started */
struct wl_churn;
struct wl_churn *wl_churn_start(void);
void wl_churn_stop(struct wl_churn *c);

#endif
