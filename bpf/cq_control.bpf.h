/* Part of verbs.bpf.c: the CQ control path. ibv_create_cq, ibv_create_cq_ex
 * (whose ibv_cq_ex reveals the extended poll functions), ibv_modify_cq,
 * ibv_resize_cq and ibv_destroy_cq each send one sq_cq_rec; ibv_open_device
 * reveals its context's ops before any PD or CQ exists. */
#ifndef SQSCOPE_CQ_CONTROL_BPF_H
#define SQSCOPE_CQ_CONTROL_BPF_H

/* read_cq_fns fills the extended poll functions of an ibv_cq_ex. */
static __always_inline void read_cq_fns(struct sq_cq_rec *r, __u64 cq)
{
	__u64 f[(IBV_CQX_READ_QP_NUM + 8 - IBV_CQX_START_POLL) / 8] = {};

#define CQX_FN(off) f[((off) - IBV_CQX_START_POLL) / 8]
	if (bpf_probe_read_user(f, sizeof(f), (void *)(cq + IBV_CQX_START_POLL)))
		return;
	r->fns[SQ_FN_START_POLL] = CQX_FN(IBV_CQX_START_POLL);
	r->fns[SQ_FN_NEXT_POLL] = CQX_FN(IBV_CQX_NEXT_POLL);
	r->fns[SQ_FN_END_POLL] = CQX_FN(IBV_CQX_END_POLL);
	r->fns[SQ_FN_CQ_READ_OPCODE] = CQX_FN(IBV_CQX_READ_OPCODE);
	r->fns[SQ_FN_CQ_READ_BYTE_LEN] = CQX_FN(IBV_CQX_READ_BYTE_LEN);
	r->fns[SQ_FN_CQ_READ_QP_NUM] = CQX_FN(IBV_CQX_READ_QP_NUM);
#undef CQX_FN
}

/* emit_cq sends a CQ record, stopping the process first when it reveals
 * a function user space has not attached to (see ctl_note). */
static __always_inline void emit_cq(struct sq_cq_rec *r, __u64 pid_tgid)
{
	if (ctl_note(r->fns, pid_tgid))
		r->stopped = 1;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

/* ctl_args holds the QP calls' arguments too: a CQ call saves its op as
 * CQ_ARGS_OP(op), which no enum sq_qp_op value equals. */
#define CQ_ARGS_OP(op) (0x10 | (op))

static __always_inline struct sq_cq_rec *new_cq_rec(__u64 pid_tgid, struct call_args *a)
{
	struct sq_cq_rec *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count_lost();
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, SQ_REC_CQ, pid_tgid, a->ts);
	r->op = a->op & 0x0f;
	r->via = a->via;
	return r;
}

SEC("uprobe")
int BPF_KPROBE(create_cq_entry, void *context)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)context, 0, 0, 0, CQ_ARGS_OP(SQ_CQ_CREATE), bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(create_cq_ex_entry, void *context)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)context, 0, 0, 0, CQ_ARGS_OP(SQ_CQ_CREATE_EX), bpf_get_attach_cookie(ctx));
	return 0;
}

/* Shared by both create flavours: the new CQ's life starts (cq_born, also
 * when the entry was not seen), then the call's record follows, from the
 * arguments its own kind of entry saved. */
static __always_inline int create_cq_ret_common(__u64 cq, __u8 op, __u8 via)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a = {}; /* a.op is read whether take_args found any */
	struct sq_cq_rec *r;
	int seen;

	if (!wanted(id >> 32))
		return 0;
	seen = !take_args(&ctl_args, &a) && a.op == CQ_ARGS_OP(op);
	if (!cq)
		return 0;
	cq_born(id, cq, via);
	if (!seen)
		return 0;
	r = new_cq_rec(id, &a);
	if (!r)
		return 0;
	r->cq = cq;
	r->ctx = read_u64(cq); /* ibv_cq.context is first */
	r->cqe = (__s32)read_u32(cq + IBV_CQ_CQE);
	if (op == SQ_CQ_CREATE_EX)
		read_cq_fns(r, cq);
	emit_cq(r, id);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(create_cq_ret, void *ret)
{
	return create_cq_ret_common((__u64)ret, SQ_CQ_CREATE, bpf_get_attach_cookie(ctx));
}

SEC("uretprobe")
int BPF_KRETPROBE(create_cq_ex_ret, void *ret)
{
	return create_cq_ret_common((__u64)ret, SQ_CQ_CREATE_EX, bpf_get_attach_cookie(ctx));
}

SEC("uprobe")
int BPF_KPROBE(modify_cq_entry, void *cq, void *attr)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)cq, (__u64)attr, 0, 0, CQ_ARGS_OP(SQ_CQ_MODIFY), bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(resize_cq_entry, void *cq, int cqe)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)cq, 0, 0, (__u32)cqe, CQ_ARGS_OP(SQ_CQ_RESIZE), bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(destroy_cq_entry, void *cq)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)cq, 0, 0, 0, CQ_ARGS_OP(SQ_CQ_DESTROY), bpf_get_attach_cookie(ctx));
	return 0;
}

/* What the return probes of modify, resize and destroy share. */
static __always_inline int cq_call_ret(int ret, __u8 op)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct sq_cq_rec *r;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a) || a.op != CQ_ARGS_OP(op))
		return 0;
	r = new_cq_rec(id, &a);
	if (!r)
		return 0;
	r->cq = a.a0;
	r->ret = ret;
	switch (op) {
	case SQ_CQ_MODIFY:
		r->mod_mask = read_u32(a.a1 + IBV_MODIFY_CQ_ATTR_MASK);
		r->mod_count = (__u16)read_u32(a.a1 + IBV_MODIFY_CQ_COUNT);
		r->mod_period = (__u16)read_u32(a.a1 + IBV_MODIFY_CQ_PERIOD);
		break;
	case SQ_CQ_RESIZE:
		/* the depth it has now: what the provider made of the request */
		r->cqe = ret ? (__s32)a.a3 : (__s32)read_u32(a.a0 + IBV_CQ_CQE);
		break;
	}
	/* the CQ of a destroy is gone: nothing is read from it */
	bpf_ringbuf_submit(r, 0);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(modify_cq_ret, int ret)
{
	return cq_call_ret(ret, SQ_CQ_MODIFY);
}

SEC("uretprobe")
int BPF_KRETPROBE(resize_cq_ret, int ret)
{
	return cq_call_ret(ret, SQ_CQ_RESIZE);
}

SEC("uretprobe")
int BPF_KRETPROBE(destroy_cq_ret, int ret)
{
	return cq_call_ret(ret, SQ_CQ_DESTROY);
}

/* An opened device's context already shows the data-path functions (and
 * create_cq_ex, which an application may call before it has a PD). */
SEC("uretprobe")
int BPF_KRETPROBE(open_device_ret, void *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sq_qp_rec *r;
	__u64 c = (__u64)ret;

	if (!wanted(id >> 32) || !c)
		return 0;
	r = new_ctl(id, SQ_QP_OPEN_DEVICE, bpf_get_attach_cookie(ctx), 0);
	if (!r)
		return 0;
	r->ctx = c;
	r->qp = c;
	read_ops(r, c);
	emit_ctl(r, id);
	return 0;
}

#endif
