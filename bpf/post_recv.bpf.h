/* Part of verbs.bpf.c: the ibv_post_recv and ibv_post_srq_recv probes.
 * The attach cookie is the record kind: 0 (the default, SQ_REC_RECV) on a
 * QP's post_recv, SQ_REC_SRQ_RECV on an SRQ's. Events mode sends a record
 * per call; counters mode adds a QP's calls and receives to its totals
 * (the return probe runs in both modes anyway), and counts nothing of an
 * SRQ, which has no totals. */
#ifndef SQSCOPE_POST_RECV_BPF_H
#define SQSCOPE_POST_RECV_BPF_H

SEC("uprobe")
int BPF_KPROBE(post_recv_entry, void *qp, void *wr, void *bad_wr)
{
	struct thread_state *st;

	if ((targ_mode == SQ_MODE_COUNTERS && bpf_get_attach_cookie(ctx) == SQ_REC_SRQ_RECV) || past_cut())
		return 0;
	st = thread_state(bpf_get_current_pid_tgid(), 1);
	if (st)
		enter(&st->post, (__u64)qp, (__u64)wr, (__u64)bad_wr, 0, SQ_OP_POST_RECV);
	return 0;
}

struct rwalk {
	__u64 cur;
	__u64 bad;
	__u32 i;
	__u32 accepted;
	__u8 found_bad;
};

static long walk_recv(__u32 idx, struct rwalk *w)
{
	__u64 next = 0;

	if (!w->cur)
		return 1;
	if (w->bad && w->cur == w->bad && !w->found_bad) {
		w->accepted = idx;
		w->found_bad = 1;
	}
	if (bpf_probe_read_user(&next, sizeof(next), (void *)(w->cur + IBV_RECV_WR_NEXT)))
		return 1;
	w->cur = next;
	w->i = idx + 1;
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(post_recv_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct thread_state *st;
	struct call_args *a;
	struct rwalk w = {};
	struct sq_recv_rec r = {};
	__u32 accepted;

	if (!wanted(id >> 32))
		return 0;
	st = thread_state(id, 0);
	if (!st)
		return 0;
	a = leave(&st->post, SQ_OP_POST_RECV);
	if (!a)
		return 0;
	w.cur = a->a1;
	if (ret)
		w.bad = read_u64(a->a2);
	bpf_loop(SQ_MAX_RECV_WALK, walk_recv, &w, 0);
	accepted = ret ? (w.found_bad ? w.accepted : 0) : w.i;
	if (targ_mode == SQ_MODE_COUNTERS) {
		count_recv(id >> 32, a->a0, ret, accepted);
		return 0;
	}
	if (bpf_get_attach_cookie(ctx) == SQ_REC_SRQ_RECV) {
		fill_hdr(&r.hdr, SQ_REC_SRQ_RECV, id, a->ts);
		r.qp_num = 0; /* an ibv_srq has none */
	} else {
		fill_hdr(&r.hdr, SQ_REC_RECV, id, a->ts);
		r.qp_num = qp_num_of(st, a->a0);
	}
	r.qp = a->a0;
	r.n = w.i;
	r.ret = ret;
	r.accepted = accepted;
	output(&r, sizeof(r));
	return 0;
}

#endif
