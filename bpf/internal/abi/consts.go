package abi

/*
#cgo CFLAGS: -I${SRCDIR}
#include <errno.h>
#include <infiniband/verbs.h>
#include "events.h"

struct abi_const {
	const char *name;
	long long value;
};

#define CONST(m) { #m, (long long)(m) }

// The values package ibv carries, by their C names.
const struct abi_const abi_consts[] = {
	CONST(IBV_WR_RDMA_WRITE), CONST(IBV_WR_RDMA_WRITE_WITH_IMM), CONST(IBV_WR_SEND),
	CONST(IBV_WR_SEND_WITH_IMM), CONST(IBV_WR_RDMA_READ), CONST(IBV_WR_ATOMIC_CMP_AND_SWP),
	CONST(IBV_WR_ATOMIC_FETCH_AND_ADD), CONST(IBV_WR_LOCAL_INV), CONST(IBV_WR_BIND_MW),
	CONST(IBV_WR_SEND_WITH_INV), CONST(IBV_WR_TSO), CONST(IBV_WR_DRIVER1), CONST(IBV_WR_ATOMIC_WRITE),

	CONST(IBV_SEND_FENCE), CONST(IBV_SEND_SIGNALED), CONST(IBV_SEND_SOLICITED),
	CONST(IBV_SEND_INLINE), CONST(IBV_SEND_IP_CSUM),

	CONST(IBV_WC_SEND), CONST(IBV_WC_RDMA_WRITE), CONST(IBV_WC_RDMA_READ), CONST(IBV_WC_COMP_SWAP),
	CONST(IBV_WC_FETCH_ADD), CONST(IBV_WC_BIND_MW), CONST(IBV_WC_LOCAL_INV), CONST(IBV_WC_TSO),
	CONST(IBV_WC_ATOMIC_WRITE),
	CONST(IBV_WC_RECV), CONST(IBV_WC_RECV_RDMA_WITH_IMM),

	CONST(IBV_WC_SUCCESS), CONST(IBV_WC_LOC_LEN_ERR), CONST(IBV_WC_LOC_QP_OP_ERR),
	CONST(IBV_WC_LOC_EEC_OP_ERR), CONST(IBV_WC_LOC_PROT_ERR), CONST(IBV_WC_WR_FLUSH_ERR),
	CONST(IBV_WC_MW_BIND_ERR), CONST(IBV_WC_BAD_RESP_ERR), CONST(IBV_WC_LOC_ACCESS_ERR),
	CONST(IBV_WC_REM_INV_REQ_ERR), CONST(IBV_WC_REM_ACCESS_ERR), CONST(IBV_WC_REM_OP_ERR),
	CONST(IBV_WC_RETRY_EXC_ERR), CONST(IBV_WC_RNR_RETRY_EXC_ERR), CONST(IBV_WC_LOC_RDD_VIOL_ERR),
	CONST(IBV_WC_REM_INV_RD_REQ_ERR), CONST(IBV_WC_REM_ABORT_ERR), CONST(IBV_WC_INV_EECN_ERR),
	CONST(IBV_WC_INV_EEC_STATE_ERR), CONST(IBV_WC_FATAL_ERR), CONST(IBV_WC_RESP_TIMEOUT_ERR),
	CONST(IBV_WC_GENERAL_ERR), CONST(IBV_WC_TM_ERR), CONST(IBV_WC_TM_RNDV_INCOMPLETE),

	CONST(IBV_QPT_RC), CONST(IBV_QPT_UC), CONST(IBV_QPT_UD), CONST(IBV_QPT_RAW_PACKET),
	CONST(IBV_QPT_XRC_SEND), CONST(IBV_QPT_XRC_RECV), CONST(IBV_QPT_DRIVER),

	CONST(IBV_QPS_RESET), CONST(IBV_QPS_INIT), CONST(IBV_QPS_RTR), CONST(IBV_QPS_RTS),
	CONST(IBV_QPS_SQD), CONST(IBV_QPS_SQE), CONST(IBV_QPS_ERR), CONST(IBV_QPS_UNKNOWN),

	CONST(ENOMEM), CONST(EINVAL), CONST(EOPNOTSUPP),
};

const int abi_nconsts = sizeof(abi_consts) / sizeof(abi_consts[0]);

// The record bounds of events.h that package bpf carries as Go constants.
const struct abi_const abi_bounds[] = {
	CONST(SQ_MAX_WRS), CONST(SQ_MAX_SGES), CONST(SQ_MAX_WCS),
	CONST(SQ_LOC_NONE), CONST(SQ_LOC_REG), CONST(SQ_LOC_STACK),
	CONST(SQ_SITE_ERRNO_SHIFT), CONST(SQ_SITE_INDEX_SHIFT), CONST(SQ_SITE_INDEX_BITS),
	CONST(SQ_SITE_LOCA_SHIFT), CONST(SQ_SITE_LOCB_SHIFT), CONST(SQ_SITE_LOC_OFF_BITS),
	CONST(SQ_SITE_ADJ_BITS), CONST(SQ_FAIL_SGES),
};

const int abi_nbounds = sizeof(abi_bounds) / sizeof(abi_bounds[0]);
*/
import "C"

import "unsafe"

// Consts maps the C name of each value package ibv carries (enum values
// of <infiniband/verbs.h>, errnos of <errno.h>) to its value.
func Consts() map[string]int64 {
	return consts(&C.abi_consts[0], int(C.abi_nconsts))
}

// Bounds maps the C name of each events.h record bound package bpf
// carries (SQ_MAX_WRS, ...) to its value.
func Bounds() map[string]int64 {
	return consts(&C.abi_bounds[0], int(C.abi_nbounds))
}

func consts(first *C.struct_abi_const, n int) map[string]int64 {
	m := make(map[string]int64, n)
	for _, c := range unsafe.Slice(first, n) {
		m[C.GoString(c.name)] = int64(c.value)
	}
	return m
}
