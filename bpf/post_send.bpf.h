/* Part of verbs.bpf.c: the ibv_post_send probes. */
#ifndef SQSCOPE_POST_SEND_BPF_H
#define SQSCOPE_POST_SEND_BPF_H

/* The uprobes are attached for the traced process only: entry probes do
 * not check the PID again (return probes do, for the header anyway). */
SEC("uprobe")
int BPF_KPROBE(post_send_entry, void *qp, void *wr, void *bad_wr)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct thread_state *st;

	if (past_cut()) {
		/* Decided here: a call that entered before the cut is recorded
		 * at its return, none after. The counters mode's successful call
		 * leaves its arguments behind: the return of a failed call past
		 * the cut must not take them for its own. */
		st = thread_state(id, 0);
		if (st)
			st->post.live = 0;
		return 0;
	}
	st = thread_state(id, 1);
	if (!st)
		return 0;
	enter(&st->post, (__u64)qp, (__u64)wr, (__u64)bad_wr, 0, SQ_OP_POST_SEND);
	if (targ_mode == SQ_MODE_COUNTERS) {
		st->post.sp = PT_REGS_SP(ctx);
		count_entry(st, id, (__u64)qp);
	}
	return 0;
}

/* post_one records a successful post read_one_wr can take straight into
 * the ring; -1, having recorded nothing, for any other post. */
static __always_inline int post_one(struct thread_state *st, struct call_args *a, __u64 id)
{
	struct wr_head h;
	struct sq_post_rec *r;
	__u32 bytes;

	if (!max_wrs || read_one_wr(a->a1, &h, &bytes))
		return -1;
	st->last_wrs = 1;
	r = bpf_ringbuf_reserve(&events, one_rec_size(struct sq_post_rec, wrs), 0);
	if (!r) {
		count_lost();
		return 0;
	}
	__builtin_memset(r, 0, one_rec_size(struct sq_post_rec, wrs));
	fill_hdr(&r->hdr, SQ_REC_POST, id, a->ts);
	r->qp = a->a0;
	r->qp_num = qp_num_of(st, a->a0);
	r->n = 1;
	r->accepted = 1;
	r->api = SQ_API_POST_SEND;
	r->wrs[0].wr_id = h.wr_id;
	r->wrs[0].send_flags = h.send_flags;
	r->wrs[0].bytes = bytes;
	r->wrs[0].num_sge = h.num_sge;
	r->wrs[0].opcode = h.opcode;
	bpf_ringbuf_submit(r, wake_flags());
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(post_send_ret, int ret)
{
	__u64 id;
	struct thread_state *st;
	struct call_args *a;
	struct walk *w;
	__u32 n, total;

	if (targ_mode == SQ_MODE_COUNTERS) {
		if (ret) /* success was counted at entry */
			post_send_failed(ctx, ret);
		return 0;
	}
	id = bpf_get_current_pid_tgid();
	if (!wanted(id >> 32))
		return 0;
	st = thread_state(id, 0);
	if (!st)
		return 0;
	a = leave(&st->post, SQ_OP_POST_SEND);
	if (!a)
		return 0;
	if (!ret && st->last_wrs <= 1 && !post_one(st, a, id))
		return 0;
	claim_cpu(id);
	w = walk_post(st, a->a1, ret != 0, ret ? read_u64(a->a2) : 0);
	if (!w)
		return 0;
	total = w->i;

	struct sq_post_rec *r = scratch_buf();

	if (!r)
		return 0;
	n = total < max_wrs ? total : max_wrs;
	if (n > SQ_MAX_WRS)
		n = SQ_MAX_WRS;
	fill_hdr(&r->hdr, SQ_REC_POST, id, a->ts);
	r->qp = a->a0;
	r->qp_num = qp_num_of(st, a->a0);
	r->ret = ret;
	r->n = n;
	r->truncated = total - n;
	r->accepted = w->accepted;
	r->api = SQ_API_POST_SEND;
	r->aborted = 0;
	r->walk_capped = !w->ended && w->cur;
	output_claimed(r, rec_size(struct sq_post_rec, wrs, n, SQ_MAX_WRS), one_rec_size(struct sq_post_rec, wrs), id);
	return 0;
}

#endif
