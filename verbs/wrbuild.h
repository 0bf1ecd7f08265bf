/* One rule for the send WRs sqscope's own programs post (the workload's
 * loop, workload/loop.c, and the verbs tests' posts, verbs/post.go): what
 * each opcode's remote address, key and arguments are, through
 * ibv_post_send and through its ibv_wr_* builder, and how much local data
 * it has. */
#ifndef SQSCOPE_WRBUILD_H
#define SQSCOPE_WRBUILD_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include "endpoint.h"

/* An atomic works on 8 bytes at an 8-byte-aligned remote address (the
 * endpoint's raddr, the start of a registered buffer); the 8 bytes of its
 * response, the remote's old value, land at the start of the local buffer
 * (mlx5 sets the data segment of an atomic to 8 bytes whatever its SGE
 * says: set_data_ptr_seg_atomic). */
#define SQ_ATOMIC_LEN 8u

/* The arguments of the atomics: fetch-and-add adds 1; compare-and-swap
 * swaps in 1 where it finds 0. */
#define SQ_FETCH_ADD 1u
#define SQ_CMP_COMPARE 0u
#define SQ_CMP_SWAP 1u

/* sq_wr_local_len is the local data of a WR of opcode when len bytes are
 * asked for: an atomic's 8 bytes (its response, or the value an atomic
 * write sends), none for a memory-key operation, else len (a READ's local
 * buffer receives len bytes). */
static inline uint32_t sq_wr_local_len(int opcode, uint32_t len)
{
	switch (opcode) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_ATOMIC_WRITE:
		return SQ_ATOMIC_LEN;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_BIND_MW:
		return 0;
	}
	return len;
}

/* sq_wr_fill sets what an ibv_send_wr of opcode needs beyond its SGEs:
 * remote address and key, atomic arguments, the key to invalidate or
 * bind, and UD addressing. */
static inline void sq_wr_fill(struct sq_endpoint *ep, struct ibv_send_wr *w, int opcode)
{
	w->opcode = opcode;
	switch (opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_WRITE:
		w->wr.rdma.remote_addr = ep->raddr;
		w->wr.rdma.rkey = ep->rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		w->wr.atomic.remote_addr = ep->raddr;
		w->wr.atomic.rkey = ep->rkey;
		w->wr.atomic.compare_add = SQ_CMP_COMPARE;
		w->wr.atomic.swap = SQ_CMP_SWAP;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->wr.atomic.remote_addr = ep->raddr;
		w->wr.atomic.rkey = ep->rkey;
		w->wr.atomic.compare_add = SQ_FETCH_ADD;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		w->invalidate_rkey = ep->rkey;
		break;
	case IBV_WR_BIND_MW:
		/* the simulated HCA only: it reads no window */
		w->bind_mw.rkey = ep->rkey;
		w->bind_mw.bind_info.addr = (uintptr_t)ep->buf;
		w->bind_mw.bind_info.length = ep->buf_len;
		break;
	}
	if (ep->ah) {
		w->wr.ud.ah = ep->ah;
		w->wr.ud.remote_qpn = ep->remote_qpn;
		w->wr.ud.remote_qkey = ep->remote_qkey;
	}
}

/* sq_wr_begin begins one WR of opcode through its ibv_wr_* builder, with
 * the same arguments sq_wr_fill gives ibv_post_send. It returns 1 when the
 * builder made the whole WQE (no data to set: atomic write, local
 * invalidate, bind), else 0. An opcode the wr API has no builder for (the
 * bad-opcode fault) is begun as a READ. */
static inline int sq_wr_begin(struct sq_endpoint *ep, int opcode)
{
	struct ibv_qp_ex *qpx = ep->qpx;
	static const uint64_t word = 1;

	switch (opcode) {
	case IBV_WR_RDMA_WRITE:
		ibv_wr_rdma_write(qpx, ep->rkey, ep->raddr);
		return 0;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ibv_wr_rdma_write_imm(qpx, ep->rkey, ep->raddr, 0);
		return 0;
	case IBV_WR_SEND:
		ibv_wr_send(qpx);
		return 0;
	case IBV_WR_SEND_WITH_IMM:
		ibv_wr_send_imm(qpx, 0);
		return 0;
	case IBV_WR_SEND_WITH_INV:
		ibv_wr_send_inv(qpx, ep->rkey);
		return 0;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		ibv_wr_atomic_cmp_swp(qpx, ep->rkey, ep->raddr, SQ_CMP_COMPARE, SQ_CMP_SWAP);
		return 0;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ibv_wr_atomic_fetch_add(qpx, ep->rkey, ep->raddr, SQ_FETCH_ADD);
		return 0;
	case IBV_WR_ATOMIC_WRITE:
		ibv_wr_atomic_write(qpx, ep->rkey, ep->raddr, &word);
		return 1;
	case IBV_WR_LOCAL_INV:
		ibv_wr_local_inv(qpx, ep->rkey);
		return 1;
	case IBV_WR_BIND_MW: {
		/* the simulated HCA only: it checks no window */
		struct ibv_mw_bind_info bi = { .addr = (uintptr_t)ep->buf, .length = ep->buf_len };

		ibv_wr_bind_mw(qpx, NULL, ep->rkey, &bi);
		return 1;
	}
	case IBV_WR_RDMA_READ:
	default:
		ibv_wr_rdma_read(qpx, ep->rkey, ep->raddr);
		return 0;
	}
}

#endif
