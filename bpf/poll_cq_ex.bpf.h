/* Part of verbs.bpf.c: extended CQ polling on an ibv_cq_ex, ibv_start_poll,
 * then ibv_next_poll until it returns ENOENT, then ibv_end_poll. A session
 * that returned completions is built in ex_polls and sent, as one
 * SQ_REC_POLL_EX record, when ibv_next_poll finds no more (or fails) or at
 * ibv_end_poll, whichever comes first; an ibv_start_poll that found none is an
 * empty poll, counted as poll_cq.bpf.h counts them. Only the status and
 * wr_id of a completion are fields of the ibv_cq_ex: its QP and opcode come
 * through the read_* functions, which are not probed (user space matches
 * the completion to its WR by wr_id). */
#ifndef SQSCOPE_POLL_CQ_EX_BPF_H
#define SQSCOPE_POLL_CQ_EX_BPF_H

/* thread_state.poll's op for the two calls (poll_cq uses 0) */
#define SQ_OP_START_POLL 3
#define SQ_OP_NEXT_POLL  4

/* Sessions in progress, per (process, CQ). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct sq_key);
	__type(value, struct sq_poll_rec);
} ex_polls SEC(".maps");

static __always_inline struct sq_poll_rec *ex_session(__u32 tgid, __u64 cq)
{
	struct sq_key k = { .pid = tgid, .addr = cq };
	struct sq_poll_rec *b = bpf_map_lookup_elem(&ex_polls, &k);

	if (b && b->hdr.kind == SQ_REC_POLL_EX)
		return b; /* kind is cleared when the session ends */
	return 0;
}

/* ex_add_wc appends the completion the CQ points at now. */
static __always_inline void ex_add_wc(struct sq_poll_rec *b, __u64 cq)
{
	struct cqx_cur c = {};
	__u32 i = b->n;

	if (i >= max_wcs || i >= SQ_MAX_WCS) {
		b->truncated++;
		return;
	}
	bpf_probe_read_user(&c, sizeof(c), (void *)(cq + IBV_CQX_STATUS));
	asm volatile("%[i] &= %[m]" : [i] "+r"(i) : [m] "i"(SQ_MAX_WCS - 1));
	b->wcs[i].wr_id = c.wr_id;
	b->wcs[i].status = c.status;
	b->wcs[i].opcode = 0;
	b->wcs[i].byte_len = 0;
	b->wcs[i].qp_num = 0;
	b->n = i + 1;
}

/* ex_end sends a session and closes it. */
static __always_inline void ex_end(struct sq_poll_rec *b, __u64 id)
{
	__u32 n = b->n;

	b->hdr.ts = bpf_ktime_get_ns();
	b->hdr.pid = id >> 32;
	b->hdr.tid = (__u32)id;
	if (b->ret >= 0)
		b->ret = n + b->truncated;
	output(b, rec_size(struct sq_poll_rec, wcs, n, SQ_MAX_WCS));
	b->hdr.kind = 0;
}

SEC("uprobe")
int BPF_KPROBE(start_poll_entry, void *cq)
{
	struct thread_state *st = thread_state(bpf_get_current_pid_tgid(), 1);

	if (st)
		enter(&st->poll, (__u64)cq, 0, 0, 0, SQ_OP_START_POLL);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(start_poll_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct thread_state *st;
	struct call_args *a;
	struct sq_poll_rec *b;
	struct sq_key k = { .pid = tgid };
	__u64 cq;

	if (!wanted(tgid))
		return 0;
	st = thread_state(id, 0);
	if (!st)
		return 0;
	a = leave(&st->poll, SQ_OP_START_POLL);
	if (!a || past_cut()) /* decided at the return, like a poll_cq */
		return 0;
	cq = a->a0;
	if (count_poll(st, tgid, cq, ret == SQ_IBV_ENOENT, ret == 0)) {
		if (targ_mode == SQ_MODE_COUNTERS && ret == 0)
			st->pend_ex_cqes++; /* after count_poll, which may hand the CQ's over */
		return 0;
	}
	k.addr = cq;
	b = bpf_map_lookup_elem(&ex_polls, &k);
	/* a session not ended (ibv_end_poll not seen) is sent as it is */
	if (b && b->hdr.kind == SQ_REC_POLL_EX)
		ex_end(b, id);
	if (!b) {
		claim_cpu(id); /* the scratch slot is the template */
		b = scratch_buf();
		if (!b)
			return 0;
		b->hdr.kind = 0;
		bpf_map_update_elem(&ex_polls, &k, b, BPF_ANY);
		b = bpf_map_lookup_elem(&ex_polls, &k);
		if (!b)
			return 0;
	}
	fill_hdr(&b->hdr, SQ_REC_POLL_EX, id, a->ts);
	b->cq = cq;
	b->max = 0;
	b->ret = 0;
	b->n = 0;
	b->truncated = 0;
	/* the record carries the thread's empty polls of the CQ so far */
	b->empty_before = st->pend_empty;
	st->pend_empty = 0;
	if (ret) {
		/* an error: no ibv_end_poll follows */
		b->ret = ret > 0 ? -ret : ret;
		ex_end(b, id);
		return 0;
	}
	ex_add_wc(b, cq);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(next_poll_entry, void *cq)
{
	struct thread_state *st = thread_state(bpf_get_current_pid_tgid(), 1);

	if (st)
		enter(&st->poll, (__u64)cq, 0, 0, 0, SQ_OP_NEXT_POLL);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(next_poll_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct thread_state *st;
	struct call_args *a;
	struct sq_poll_rec *b;

	if (!wanted(tgid))
		return 0;
	st = thread_state(id, 0);
	if (!st)
		return 0;
	a = leave(&st->poll, SQ_OP_NEXT_POLL);
	if (!a || past_cut()) /* a session open at the cut is not sent */
		return 0;
	if (targ_mode == SQ_MODE_COUNTERS) {
		if (ret == 0) {
			pending_cq(st, tgid, a->a0);
			st->pend_cqes++;
			st->pend_ex_cqes++;
		}
		return 0;
	}
	b = ex_session(tgid, a->a0);
	if (!b)
		return 0;
	if (ret == 0) {
		ex_add_wc(b, a->a0);
		return 0;
	}
	if (ret != SQ_IBV_ENOENT)
		b->ret = ret > 0 ? -ret : ret;
	/* No completion follows: the session is sent now, not at
	 * ibv_end_poll, which rxe before rdma-core 55 wants no call of after
	 * this (its next_poll has ended the session itself). */
	ex_end(b, id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(end_poll_entry, void *cq)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sq_poll_rec *b;

	if (!wanted(id >> 32) || targ_mode == SQ_MODE_COUNTERS || past_cut())
		return 0;
	b = ex_session(id >> 32, (__u64)cq);
	if (b)
		ex_end(b, id);
	return 0;
}

#endif
