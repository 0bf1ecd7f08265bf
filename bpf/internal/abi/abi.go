// Package abi measures, with the host C compiler, the facts bpf/events.h
// mirrors: verbs ABI offsets and sizes from the installed
// <infiniband/verbs.h>, and the sizes of the records events.h defines; and
// (consts.go) the verbs enum values and errnos package ibv carries and the
// events.h record bounds package bpf carries. Only the bpf package's tests
// import it.
//
// events.h in this directory is a symbolic link to bpf/events.h: the Go
// build cache tracks the headers of a package's own directory only.
package abi

/*
#cgo CFLAGS: -I${SRCDIR}
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "events.h"

struct abi_fact {
	const char *name;
	long long mirrored;
	long long actual;
};

#define OFF(m, s, f) { #m, (long long)(m), (long long)offsetof(struct s, f) }
#define SIZE(m, s) { #m, (long long)(m), (long long)sizeof(struct s) }
#define VAL(m, v) { #m, (long long)(m), (long long)(v) }

const struct abi_fact abi_facts[] = {
	OFF(IBV_CONTEXT_OPS, ibv_context, ops),
	OFF(IBV_CONTEXT_ABI_COMPAT, ibv_context, abi_compat),
	OFF(IBV_OPS_POLL_CQ, ibv_context_ops, poll_cq),
	OFF(IBV_OPS_POST_SEND, ibv_context_ops, post_send),
	OFF(IBV_OPS_POST_RECV, ibv_context_ops, post_recv),
	OFF(IBV_OPS_POST_SRQ_RECV, ibv_context_ops, post_srq_recv),
	VAL(VERBS_CTX_CREATE_QP_EX_BACK,
	    offsetof(struct verbs_context, context) - offsetof(struct verbs_context, create_qp_ex)),
	VAL(VERBS_CTX_SZ_BACK, offsetof(struct verbs_context, context) - offsetof(struct verbs_context, sz)),
	VAL(VERBS_CTX_CREATE_QP_EX_MIN_SZ,
	    sizeof(struct verbs_context) - offsetof(struct verbs_context, create_qp_ex)),
	VAL(VERBS_ABI_IS_EXTENDED, (uintptr_t)__VERBS_ABI_IS_EXTENDED),
	VAL(VERBS_CTX_CREATE_CQ_EX_BACK,
	    offsetof(struct verbs_context, context) - offsetof(struct verbs_context, create_cq_ex)),
	VAL(VERBS_CTX_CREATE_CQ_EX_MIN_SZ,
	    sizeof(struct verbs_context) - offsetof(struct verbs_context, create_cq_ex)),
	VAL(VERBS_CTX_MODIFY_CQ_BACK,
	    offsetof(struct verbs_context, context) - offsetof(struct verbs_context, modify_cq)),
	VAL(VERBS_CTX_MODIFY_CQ_MIN_SZ,
	    sizeof(struct verbs_context) - offsetof(struct verbs_context, modify_cq)),
	OFF(IBV_PD_CONTEXT, ibv_pd, context),
	OFF(IBV_SRQ_INIT_ATTR_MAX_WR, ibv_srq_init_attr, attr.max_wr),

	OFF(IBV_QP_CONTEXT, ibv_qp, context),
	OFF(IBV_QP_SEND_CQ, ibv_qp, send_cq),
	OFF(IBV_QP_RECV_CQ, ibv_qp, recv_cq),
	OFF(IBV_QP_QP_NUM, ibv_qp, qp_num),
	OFF(IBV_QP_STATE_FIELD, ibv_qp, state),
	OFF(IBV_QP_QP_TYPE, ibv_qp, qp_type),
	SIZE(IBV_QP_SIZE, ibv_qp),

	OFF(IBV_SEND_WR_WR_ID, ibv_send_wr, wr_id),
	OFF(IBV_SEND_WR_NEXT, ibv_send_wr, next),
	OFF(IBV_SEND_WR_SG_LIST, ibv_send_wr, sg_list),
	OFF(IBV_SEND_WR_NUM_SGE, ibv_send_wr, num_sge),
	OFF(IBV_SEND_WR_OPCODE, ibv_send_wr, opcode),
	OFF(IBV_SEND_WR_SEND_FLAGS, ibv_send_wr, send_flags),
	SIZE(IBV_SEND_WR_SIZE, ibv_send_wr),

	OFF(IBV_RECV_WR_NEXT, ibv_recv_wr, next),
	OFF(IBV_RECV_WR_NUM_SGE, ibv_recv_wr, num_sge),
	SIZE(IBV_RECV_WR_SIZE, ibv_recv_wr),

	OFF(IBV_SGE_ADDR, ibv_sge, addr),
	OFF(IBV_SGE_LENGTH, ibv_sge, length),
	OFF(IBV_SGE_LKEY, ibv_sge, lkey),
	SIZE(IBV_SGE_SIZE, ibv_sge),

	OFF(IBV_DATA_BUF_ADDR, ibv_data_buf, addr),
	OFF(IBV_DATA_BUF_LENGTH, ibv_data_buf, length),
	SIZE(IBV_DATA_BUF_SIZE, ibv_data_buf),

	OFF(IBV_WC_WR_ID, ibv_wc, wr_id),
	OFF(IBV_WC_STATUS, ibv_wc, status),
	OFF(IBV_WC_OPCODE, ibv_wc, opcode),
	OFF(IBV_WC_BYTE_LEN, ibv_wc, byte_len),
	OFF(IBV_WC_QP_NUM, ibv_wc, qp_num),
	SIZE(IBV_WC_SIZE, ibv_wc),

	OFF(IBV_QPX_WR_ID, ibv_qp_ex, wr_id),
	OFF(IBV_QPX_WR_FLAGS, ibv_qp_ex, wr_flags),
	OFF(IBV_QPX_WR_ATOMIC_CMP_SWP, ibv_qp_ex, wr_atomic_cmp_swp),
	OFF(IBV_QPX_WR_ATOMIC_FETCH_ADD, ibv_qp_ex, wr_atomic_fetch_add),
	OFF(IBV_QPX_WR_BIND_MW, ibv_qp_ex, wr_bind_mw),
	OFF(IBV_QPX_WR_LOCAL_INV, ibv_qp_ex, wr_local_inv),
	OFF(IBV_QPX_WR_SEND_INV, ibv_qp_ex, wr_send_inv),
	OFF(IBV_QPX_WR_SEND_TSO, ibv_qp_ex, wr_send_tso),
	OFF(IBV_QPX_WR_SET_XRC_SRQN, ibv_qp_ex, wr_set_xrc_srqn),
	OFF(IBV_QPX_WR_ATOMIC_WRITE, ibv_qp_ex, wr_atomic_write),
	OFF(IBV_QPX_WR_RDMA_READ, ibv_qp_ex, wr_rdma_read),
	OFF(IBV_QPX_WR_RDMA_WRITE, ibv_qp_ex, wr_rdma_write),
	OFF(IBV_QPX_WR_RDMA_WRITE_IMM, ibv_qp_ex, wr_rdma_write_imm),
	OFF(IBV_QPX_WR_SEND, ibv_qp_ex, wr_send),
	OFF(IBV_QPX_WR_SEND_IMM, ibv_qp_ex, wr_send_imm),
	OFF(IBV_QPX_WR_SET_UD_ADDR, ibv_qp_ex, wr_set_ud_addr),
	OFF(IBV_QPX_WR_SET_INLINE_DATA, ibv_qp_ex, wr_set_inline_data),
	OFF(IBV_QPX_WR_SET_INLINE_DATA_LIST, ibv_qp_ex, wr_set_inline_data_list),
	OFF(IBV_QPX_WR_SET_SGE, ibv_qp_ex, wr_set_sge),
	OFF(IBV_QPX_WR_SET_SGE_LIST, ibv_qp_ex, wr_set_sge_list),
	OFF(IBV_QPX_WR_START, ibv_qp_ex, wr_start),
	OFF(IBV_QPX_WR_COMPLETE, ibv_qp_ex, wr_complete),
	OFF(IBV_QPX_WR_ABORT, ibv_qp_ex, wr_abort),
	SIZE(IBV_QPX_SIZE, ibv_qp_ex),

	OFF(IBV_CQ_CQE, ibv_cq, cqe),
	{ "IBV_CQ_CQE (ex)", IBV_CQ_CQE, offsetof(struct ibv_cq_ex, cqe) },
	{ "ibv_cq_ex starts as ibv_cq (context)", 0, offsetof(struct ibv_cq_ex, context) },
	OFF(IBV_CQX_STATUS, ibv_cq_ex, status),
	OFF(IBV_CQX_WR_ID, ibv_cq_ex, wr_id),
	OFF(IBV_CQX_START_POLL, ibv_cq_ex, start_poll),
	OFF(IBV_CQX_NEXT_POLL, ibv_cq_ex, next_poll),
	OFF(IBV_CQX_END_POLL, ibv_cq_ex, end_poll),
	OFF(IBV_CQX_READ_OPCODE, ibv_cq_ex, read_opcode),
	OFF(IBV_CQX_READ_BYTE_LEN, ibv_cq_ex, read_byte_len),
	OFF(IBV_CQX_READ_QP_NUM, ibv_cq_ex, read_qp_num),
	SIZE(IBV_CQX_SIZE, ibv_cq_ex),
	OFF(IBV_MODIFY_CQ_ATTR_MASK, ibv_modify_cq_attr, attr_mask),
	{ "IBV_MODIFY_CQ_COUNT", IBV_MODIFY_CQ_COUNT,
	  offsetof(struct ibv_modify_cq_attr, moderate) + offsetof(struct ibv_moderate_cq, cq_count) },
	{ "IBV_MODIFY_CQ_PERIOD", IBV_MODIFY_CQ_PERIOD,
	  offsetof(struct ibv_modify_cq_attr, moderate) + offsetof(struct ibv_moderate_cq, cq_period) },

	OFF(IBV_QP_INIT_ATTR_SEND_CQ, ibv_qp_init_attr, send_cq),
	OFF(IBV_QP_INIT_ATTR_RECV_CQ, ibv_qp_init_attr, recv_cq),
	OFF(IBV_QP_INIT_ATTR_CAP, ibv_qp_init_attr, cap),
	OFF(IBV_QP_INIT_ATTR_QP_TYPE, ibv_qp_init_attr, qp_type),
	OFF(IBV_QP_INIT_ATTR_SQ_SIG_ALL, ibv_qp_init_attr, sq_sig_all),
	SIZE(IBV_QP_INIT_ATTR_SIZE, ibv_qp_init_attr),
	{ "IBV_QP_INIT_ATTR_SEND_CQ (ex)", IBV_QP_INIT_ATTR_SEND_CQ, offsetof(struct ibv_qp_init_attr_ex, send_cq) },
	{ "IBV_QP_INIT_ATTR_RECV_CQ (ex)", IBV_QP_INIT_ATTR_RECV_CQ, offsetof(struct ibv_qp_init_attr_ex, recv_cq) },
	{ "IBV_QP_INIT_ATTR_CAP (ex)", IBV_QP_INIT_ATTR_CAP, offsetof(struct ibv_qp_init_attr_ex, cap) },
	{ "IBV_QP_INIT_ATTR_QP_TYPE (ex)", IBV_QP_INIT_ATTR_QP_TYPE, offsetof(struct ibv_qp_init_attr_ex, qp_type) },
	{ "IBV_QP_INIT_ATTR_SQ_SIG_ALL (ex)", IBV_QP_INIT_ATTR_SQ_SIG_ALL, offsetof(struct ibv_qp_init_attr_ex, sq_sig_all) },
	OFF(IBV_QP_INIT_ATTR_EX_COMP_MASK, ibv_qp_init_attr_ex, comp_mask),
	OFF(IBV_QP_INIT_ATTR_EX_SEND_OPS_FLAGS, ibv_qp_init_attr_ex, send_ops_flags),
	SIZE(IBV_QP_INIT_ATTR_EX_SIZE, ibv_qp_init_attr_ex),

	OFF(IBV_QP_CAP_MAX_SEND_WR, ibv_qp_cap, max_send_wr),
	OFF(IBV_QP_CAP_MAX_RECV_WR, ibv_qp_cap, max_recv_wr),
	OFF(IBV_QP_CAP_MAX_SEND_SGE, ibv_qp_cap, max_send_sge),
	OFF(IBV_QP_CAP_MAX_RECV_SGE, ibv_qp_cap, max_recv_sge),
	OFF(IBV_QP_CAP_MAX_INLINE_DATA, ibv_qp_cap, max_inline_data),
	SIZE(IBV_QP_CAP_SIZE, ibv_qp_cap),
	VAL(IBV_QP_CAP_SIZE, sizeof(struct sq_caps)),

	OFF(IBV_QP_ATTR_QP_STATE, ibv_qp_attr, qp_state),

	VAL(SQ_IBV_QP_STATE_MASK, IBV_QP_STATE),
	VAL(SQ_IBV_SEND_SIGNALED, IBV_SEND_SIGNALED),
	VAL(SQ_IBV_SEND_INLINE, IBV_SEND_INLINE),
	VAL(SQ_IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE),
	VAL(SQ_IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM),
	VAL(SQ_IBV_WR_SEND, IBV_WR_SEND),
	VAL(SQ_IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM),
	VAL(SQ_IBV_WR_RDMA_READ, IBV_WR_RDMA_READ),
	VAL(SQ_IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_CMP_AND_SWP),
	VAL(SQ_IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_FETCH_AND_ADD),
	VAL(SQ_IBV_ENOENT, ENOENT),
	VAL(SQ_IBV_WC_RECV, IBV_WC_RECV),
};

const int abi_nfacts = sizeof(abi_facts) / sizeof(abi_facts[0]);

// Sizes of the events.h types bpf2go generates Go twins of.
#define ESIZE(s) { #s, 0, (long long)sizeof(struct s) }
const struct abi_fact abi_sizes[] = {
	ESIZE(sq_hdr), ESIZE(sq_caps), ESIZE(sq_qp_rec), ESIZE(sq_cq_rec), ESIZE(sq_wr), ESIZE(sq_post_rec),
	ESIZE(sq_wc), ESIZE(sq_poll_rec), ESIZE(sq_recv_rec), ESIZE(sq_exit_rec), ESIZE(sq_proc_rec),
	ESIZE(sq_key), ESIZE(sq_cq_stats), ESIZE(sq_qp_counters),
	ESIZE(sq_gen_key), ESIZE(sq_obj_rec), ESIZE(sq_qp_final_rec), ESIZE(sq_fail_rec),
	ESIZE(sq_occ), ESIZE(sq_occ_fail_rec), ESIZE(sq_qpn_key), ESIZE(sq_sig), ESIZE(sq_qp_occ),
};

const int abi_nsizes = sizeof(abi_sizes) / sizeof(abi_sizes[0]);
*/
import "C"

import "unsafe"

// Fact is one mirrored constant of events.h and what the C compiler says
// it should be.
type Fact struct {
	Name     string // the events.h macro
	Mirrored int64  // its value in events.h
	Actual   int64  // offsetof/sizeof/enum value from <infiniband/verbs.h>
}

// Facts lists every verbs ABI fact events.h mirrors.
func Facts() []Fact {
	return facts(&C.abi_facts[0], int(C.abi_nfacts))
}

// Sizes maps each events.h struct name (e.g. "sq_post_rec") to its C size.
func Sizes() map[string]int {
	m := map[string]int{}
	for _, f := range facts(&C.abi_sizes[0], int(C.abi_nsizes)) {
		m[f.Name] = int(f.Actual)
	}
	return m
}

func facts(first *C.struct_abi_fact, n int) []Fact {
	out := make([]Fact, 0, n)
	for _, f := range unsafe.Slice(first, n) {
		out = append(out, Fact{Name: C.GoString(f.name), Mirrored: int64(f.mirrored), Actual: int64(f.actual)})
	}
	return out
}
