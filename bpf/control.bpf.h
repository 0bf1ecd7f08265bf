/* Part of verbs.bpf.c: the control path. ibv_create_qp (and create_qp_ex),
 * ibv_qp_to_qp_ex, ibv_modify_qp, ibv_destroy_qp and ibv_alloc_pd each send
 * one sq_qp_rec, with the data-path functions the call revealed. */
#ifndef SQSCOPE_CONTROL_BPF_H
#define SQSCOPE_CONTROL_BPF_H

static __always_inline void save_args(void *map, __u64 a0, __u64 a1, __u64 a2, __u32 a3, __u8 op, __u8 via)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_args a = {
		.a0 = a0, .a1 = a1, .a2 = a2, .a3 = a3,
		.ts = bpf_ktime_get_ns(), .op = op, .via = via, .live = 1,
	};

	bpf_map_update_elem(map, &tid, &a, BPF_ANY);
}

/* take_args copies and consumes the arguments saved at entry. */
static __always_inline int take_args(void *map, struct call_args *out)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_args *a = bpf_map_lookup_elem(map, &tid);

	if (!a || !a->live)
		return -1;
	*out = *a;
	a->live = 0;
	return 0;
}

/* read_ops fills the ops-table functions of an ibv_context, and the
 * provider's create_qp_ex when the context is a verbs_context that has one. */
static __always_inline void read_ops(struct sq_qp_rec *r, __u64 ctx)
{
	__u64 ops = ctx + IBV_CONTEXT_OPS;

	if (!ctx)
		return;
	r->fns[SQ_FN_POST_SEND] = read_u64(ops + IBV_OPS_POST_SEND);
	r->fns[SQ_FN_POLL_CQ] = read_u64(ops + IBV_OPS_POLL_CQ);
	r->fns[SQ_FN_POST_RECV] = read_u64(ops + IBV_OPS_POST_RECV);
	r->fns[SQ_FN_POST_SRQ_RECV] = read_u64(ops + IBV_OPS_POST_SRQ_RECV);
	if (read_u64(ctx + IBV_CONTEXT_ABI_COMPAT) == VERBS_ABI_IS_EXTENDED) {
		__u64 sz = read_u64(ctx - VERBS_CTX_SZ_BACK);

		if (sz >= VERBS_CTX_CREATE_QP_EX_MIN_SZ)
			r->fns[SQ_FN_CREATE_QP_EX] = read_u64(ctx - VERBS_CTX_CREATE_QP_EX_BACK);
		/* the CQ ops of the verbs_context (cq_control.bpf.h) */
		if (sz >= VERBS_CTX_CREATE_CQ_EX_MIN_SZ)
			r->fns[SQ_FN_CREATE_CQ_EX] = read_u64(ctx - VERBS_CTX_CREATE_CQ_EX_BACK);
		if (sz >= VERBS_CTX_MODIFY_CQ_MIN_SZ)
			r->fns[SQ_FN_MODIFY_CQ] = read_u64(ctx - VERBS_CTX_MODIFY_CQ_BACK);
	}
}

/* read_wr_fns fills the ibv_qp_ex function pointers, read in one go: every
 * builder and setter from wr_atomic_cmp_swp to wr_atomic_write. */
static __always_inline void read_wr_fns(struct sq_qp_rec *r, __u64 qpx)
{
	__u64 f[(IBV_QPX_WR_ATOMIC_WRITE + 8 - IBV_QPX_WR_ATOMIC_CMP_SWP) / 8] = {};

#define QPX_FN(off) f[((off) - IBV_QPX_WR_ATOMIC_CMP_SWP) / 8]
	if (bpf_probe_read_user(f, sizeof(f), (void *)(qpx + IBV_QPX_WR_ATOMIC_CMP_SWP)))
		return;
	r->fns[SQ_FN_WR_START] = QPX_FN(IBV_QPX_WR_START);
	r->fns[SQ_FN_WR_COMPLETE] = QPX_FN(IBV_QPX_WR_COMPLETE);
	r->fns[SQ_FN_WR_ABORT] = QPX_FN(IBV_QPX_WR_ABORT);
	r->fns[SQ_FN_WR_SEND] = QPX_FN(IBV_QPX_WR_SEND);
	r->fns[SQ_FN_WR_SEND_IMM] = QPX_FN(IBV_QPX_WR_SEND_IMM);
	r->fns[SQ_FN_WR_RDMA_WRITE] = QPX_FN(IBV_QPX_WR_RDMA_WRITE);
	r->fns[SQ_FN_WR_RDMA_WRITE_IMM] = QPX_FN(IBV_QPX_WR_RDMA_WRITE_IMM);
	r->fns[SQ_FN_WR_RDMA_READ] = QPX_FN(IBV_QPX_WR_RDMA_READ);
	r->fns[SQ_FN_WR_SET_INLINE_DATA] = QPX_FN(IBV_QPX_WR_SET_INLINE_DATA);
	r->fns[SQ_FN_WR_SET_INLINE_DATA_LIST] = QPX_FN(IBV_QPX_WR_SET_INLINE_DATA_LIST);
	r->fns[SQ_FN_WR_SET_SGE] = QPX_FN(IBV_QPX_WR_SET_SGE);
	r->fns[SQ_FN_WR_SET_SGE_LIST] = QPX_FN(IBV_QPX_WR_SET_SGE_LIST);
	/* the builders and setters added with the other opcodes */
	r->fns[SQ_FN_WR_ATOMIC_CMP_SWP] = QPX_FN(IBV_QPX_WR_ATOMIC_CMP_SWP);
	r->fns[SQ_FN_WR_ATOMIC_FETCH_ADD] = QPX_FN(IBV_QPX_WR_ATOMIC_FETCH_ADD);
	r->fns[SQ_FN_WR_BIND_MW] = QPX_FN(IBV_QPX_WR_BIND_MW);
	r->fns[SQ_FN_WR_LOCAL_INV] = QPX_FN(IBV_QPX_WR_LOCAL_INV);
	r->fns[SQ_FN_WR_SEND_INV] = QPX_FN(IBV_QPX_WR_SEND_INV);
	r->fns[SQ_FN_WR_SEND_TSO] = QPX_FN(IBV_QPX_WR_SEND_TSO);
	r->fns[SQ_FN_WR_ATOMIC_WRITE] = QPX_FN(IBV_QPX_WR_ATOMIC_WRITE);
	r->fns[SQ_FN_WR_SET_UD_ADDR] = QPX_FN(IBV_QPX_WR_SET_UD_ADDR);
	r->fns[SQ_FN_WR_SET_XRC_SRQN] = QPX_FN(IBV_QPX_WR_SET_XRC_SRQN);
#undef QPX_FN
}

static __always_inline void read_qp(struct sq_qp_rec *r, __u64 qp)
{
	if (!qp)
		return;
	r->qp = qp;
	r->ctx = read_u64(qp + IBV_QP_CONTEXT);
	r->send_cq = read_u64(qp + IBV_QP_SEND_CQ);
	r->recv_cq = read_u64(qp + IBV_QP_RECV_CQ);
	r->qp_num = read_u32(qp + IBV_QP_QP_NUM);
	r->qp_type = read_u32(qp + IBV_QP_QP_TYPE);
	read_ops(r, r->ctx);
}

/* ctl_note marks the process as traced and tells whether a control-path
 * record that reveals fns should stop it: if fns holds a data-path function
 * user space has not attached to yet, the next thing the process does may
 * well be a call through it, and a uprobe attached after the fact would miss
 * it. Returns 1 when the process was sent SIGSTOP; user space sends SIGCONT
 * once the probes are in place (the record says so in `stopped`). The record
 * must already be reserved: a process is stopped only when the record that
 * tells user space to continue it is sure to arrive. */
static __always_inline __u8 ctl_note(const __u64 *fns, __u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32;
	struct sq_key k = { .pid = tgid };
	int unknown = 0;
	__u8 one = 1;

#pragma unroll
	for (int i = 0; i < SQ_FN_COUNT; i++) {
		if (!fns[i])
			continue;
		k.addr = fns[i];
		if (!bpf_map_lookup_elem(&known_fns, &k))
			unknown = 1;
	}
	/* tracing every process, a process joins at its first call here */
	if (!bpf_map_update_elem(&procs, &tgid, &one, BPF_NOEXIST) && !targ_tgid)
		proc_joined(tgid, 0, SQ_PROC_FIRST, 0, 0);
	return unknown && stop_on_new && tgid != self_tgid && stop_self(tgid);
}

/* emit_ctl sends a control-path record, stopping the process first when it
 * reveals a function user space has not attached to (see ctl_note). */
static __always_inline void emit_ctl(struct sq_qp_rec *r, __u64 pid_tgid)
{
	if (ctl_note(r->fns, pid_tgid))
		r->stopped = 1;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

/* new_ctl reserves a control-path record in the ring and starts it; the
 * caller fills it in and ends with emit_ctl (or submits it itself). */
static __always_inline struct sq_qp_rec *new_ctl(__u64 pid_tgid, __u8 op, __u8 via, __u64 entry_ts)
{
	struct sq_qp_rec *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count_lost();
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, SQ_REC_QP, pid_tgid, entry_ts);
	r->op = op;
	r->via = via;
	r->state = -1;
	return r;
}

SEC("uprobe")
int BPF_KPROBE(create_qp_entry, void *pd, void *attr)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)pd, (__u64)attr, 0, 0, SQ_QP_CREATE, bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(create_qp_ex_entry, void *context, void *attr_ex)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)context, (__u64)attr_ex, 0, 0, SQ_QP_CREATE_EX, bpf_get_attach_cookie(ctx));
	return 0;
}

/* Shared by both create flavours: the init attrs share their prefix, and
 * the provider has rewritten attr->cap with what the QP really got. */
SEC("uretprobe")
int BPF_KRETPROBE(create_qp_ret, void *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct sq_qp_rec *r;
	__u64 qp = (__u64)ret;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a))
		return 0;
	if (!qp || (a.op != SQ_QP_CREATE && a.op != SQ_QP_CREATE_EX))
		return 0;
	__sync_fetch_and_add(&qp_gen, 1);
	r = new_ctl(id, a.op, a.via, a.ts);
	if (!r)
		return 0;
	read_qp(r, qp);
	r->gen = obj_born(id >> 32, SQ_OBJ_QP, qp, r->qp_num);
	bpf_probe_read_user(&r->caps, sizeof(r->caps), (void *)(a.a1 + IBV_QP_INIT_ATTR_CAP));
	r->sig_all = read_u32(a.a1 + IBV_QP_INIT_ATTR_SQ_SIG_ALL);
	if (targ_mode == SQ_MODE_COUNTERS)
		occ_born(id >> 32, r->qp_num, (__u32)r->gen, qp, r->sig_all);
	emit_ctl(r, id);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(qp_to_qp_ex_ret, void *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sq_qp_rec *r;
	__u64 qpx = (__u64)ret;

	if (!wanted(id >> 32) || !qpx)
		return 0;
	r = new_ctl(id, SQ_QP_TO_QP_EX, bpf_get_attach_cookie(ctx), 0);
	if (!r)
		return 0;
	read_qp(r, qpx); /* qp_base is at offset 0 */
	read_wr_fns(r, qpx);
	emit_ctl(r, id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(modify_qp_entry, void *qp, void *attr, int mask)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)qp, (__u64)attr, 0, (__u32)mask, SQ_QP_MODIFY, bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(modify_qp_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct sq_qp_rec *r;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a) || a.op != SQ_QP_MODIFY)
		return 0;
	r = new_ctl(id, SQ_QP_MODIFY, a.via, a.ts);
	if (!r)
		return 0;
	read_qp(r, a.a0);
	r->ret = ret;
	r->mask = a.a3;
	if (a.a3 & SQ_IBV_QP_STATE_MASK)
		r->state = (__s32)read_u32(a.a1 + IBV_QP_ATTR_QP_STATE);
	emit_ctl(r, id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(destroy_qp_entry, void *qp)
{
	__u64 q = (__u64)qp;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!wanted(tgid))
		return 0;
	/* the QP is freed by the call: read its number (and find its
	 * generation) now */
	save_args(&ctl_args, q, 0, obj_gen(tgid, SQ_OBJ_QP, q), q ? read_u32(q + IBV_QP_QP_NUM) : 0, SQ_QP_DESTROY,
		  bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(destroy_qp_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct sq_qp_rec *r;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a) || a.op != SQ_QP_DESTROY)
		return 0;
	__sync_fetch_and_add(&qp_gen, 1);
	if (ret == 0) {
		/* the QP's life ends here, its kernel-side totals too */
		obj_died(id >> 32, SQ_OBJ_QP, a.a0, (__u32)a.a2);
		if (targ_mode == SQ_MODE_COUNTERS)
			qp_final(id, a.a0, (__u32)a.a2);
	}
	r = new_ctl(id, SQ_QP_DESTROY, a.via, a.ts);
	if (!r)
		return 0;
	r->qp = a.a0;
	r->qp_num = a.a3;
	r->gen = a.a2;
	r->ret = ret;
	bpf_ringbuf_submit(r, 0); /* reveals nothing: no stop */
	return 0;
}

/* A protection domain is allocated before any QP: its context already
 * shows the data-path functions, so the probes can be in place before the
 * first QP exists. */
SEC("uretprobe")
int BPF_KRETPROBE(alloc_pd_ret, void *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sq_qp_rec *r;
	__u64 pd = (__u64)ret;

	if (!wanted(id >> 32) || !pd)
		return 0;
	r = new_ctl(id, SQ_QP_ALLOC_PD, bpf_get_attach_cookie(ctx), 0);
	if (!r)
		return 0;
	r->ctx = read_u64(pd + IBV_PD_CONTEXT);
	r->qp = r->ctx;
	read_ops(r, r->ctx);
	emit_ctl(r, id);
	return 0;
}

#endif
