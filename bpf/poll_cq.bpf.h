/* Part of verbs.bpf.c: the ibv_poll_cq probes, and the per-CQ poll counts
 * both modes keep. */
#ifndef SQSCOPE_POLL_CQ_BPF_H
#define SQSCOPE_POLL_CQ_BPF_H

SEC("uprobe")
int BPF_KPROBE(poll_cq_entry, void *cq, int num_entries, void *wc)
{
	struct thread_state *st = thread_state(bpf_get_current_pid_tgid(), 1);

	if (st)
		enter(&st->poll, (__u64)cq, (__u64)wc, 0, (__u32)num_entries, 0);
	return 0;
}

/* cq_stats_of finds, creating them, the poll counts of the CQ at cq:
 * with gen 0 those of its current life; with a generation, the counts of
 * that earlier CQ at cq handed over after its life ended (user space adds
 * them to its last totals). */
static __always_inline struct sq_cq_stats *cq_stats_of(__u32 tgid, __u64 cq, __u32 gen)
{
	struct sq_key k = { .pid = tgid, .pad = gen, .addr = cq };
	struct sq_cq_stats *s = bpf_map_lookup_elem(&cq_stats, &k);

	if (!s) {
		struct sq_cq_stats init = { .gen = gen };

		bpf_map_update_elem(&cq_stats, &k, &init, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&cq_stats, &k);
	}
	return s;
}

/* flush_polls adds the thread's pending poll counts to its CQ's stats:
 * to the CQ they were counted of, which a CQ born at the address since
 * is not (it is the one before it, or, if the address changed hands
 * twice or its CQ was created before tracing, none known: then they are
 * not added to any). */
static __always_inline void flush_polls(struct thread_state *st, __u32 tgid)
{
	struct sq_cq_stats *s;

	if (!st->pend_empty && !st->pend_polls)
		return;
	s = cq_stats_of(tgid, st->pend_cq, 0);
	if (s && s->gen > st->pend_cq_seq)
		s = s->prev_gen && s->prev_gen <= st->pend_cq_seq ? cq_stats_of(tgid, st->pend_cq, s->prev_gen) : 0;
	if (s) {
		if (st->pend_empty)
			__sync_fetch_and_add(&s->empty, st->pend_empty);
		if (st->pend_polls)
			__sync_fetch_and_add(&s->polls, st->pend_polls);
		if (st->pend_cqes)
			__sync_fetch_and_add(&s->cqes, st->pend_cqes);
		if (st->pend_ex_cqes)
			__sync_fetch_and_add(&s->ex_cqes, st->pend_ex_cqes);
	}
	st->pend_empty = 0;
	st->pend_polls = 0;
	st->pend_cqes = 0;
	st->pend_ex_cqes = 0;
}

/* pending_cq makes cq the CQ the thread's pending poll counts are of. They
 * are handed over first when the thread moves to another CQ, or when a CQ
 * was born anywhere since they began (cq_seq moved): the address may now
 * be another CQ's. */
static __always_inline void pending_cq(struct thread_state *st, __u32 tgid, __u64 cq)
{
	__u32 seq = (__u32)cq_seq;

	if (st->pend_cq != cq || st->pend_cq_seq != seq) {
		flush_polls(st, tgid);
		st->pend_cq = cq;
		st->pend_cq_seq = seq;
	}
}

/* count_poll counts a poll of cq that found nothing (empty) or cqes
 * completions in the thread's pending counts. Returns 1 when that is all
 * there is to do (an empty poll, or any poll in the counters mode), 0 when
 * the poll is to be recorded. */
static __always_inline int count_poll(struct thread_state *st, __u32 tgid, __u64 cq, int empty, __u32 cqes)
{
	pending_cq(st, tgid, cq);
	if (empty)
		st->pend_empty++;
	if (targ_mode == SQ_MODE_COUNTERS) {
		st->pend_polls++;
		st->pend_cqes += cqes;
	} else if (!empty) {
		return 0;
	}
	if (st->pend_empty + st->pend_polls >= SQ_PEND_MAX)
		flush_polls(st, tgid);
	return 1;
}

/* poll_one records a poll that returned one completion straight into the
 * ring, as post_one does a one-WR post: no per-CPU slot to claim, no copy.
 * -1 when the ring had no room (counted). */
static __always_inline int poll_one(struct thread_state *st, struct call_args *a, __u64 id, int ret)
{
	struct sq_poll_rec *r;
	struct wc_head h = {};

	/* read before the reservation: a fault handled while a record is
	 * reserved would keep the reader waiting on it */
	bpf_probe_read_user(&h, sizeof(h), (void *)a->a1); /* zeroed if unreadable */
	r = bpf_ringbuf_reserve(&events, one_rec_size(struct sq_poll_rec, wcs), 0);
	if (!r) {
		count_lost();
		return -1;
	}
	__builtin_memset(r, 0, one_rec_size(struct sq_poll_rec, wcs));
	fill_hdr(&r->hdr, SQ_REC_POLL, id, a->ts);
	r->cq = a->a0;
	r->max = (__s32)a->a3;
	r->ret = ret;
	r->n = 1;
	r->empty_before = st->pend_empty;
	r->wcs[0].wr_id = h.wr_id;
	r->wcs[0].byte_len = h.byte_len;
	r->wcs[0].qp_num = h.qp_num;
	r->wcs[0].status = h.status;
	r->wcs[0].opcode = h.opcode;
	bpf_ringbuf_submit(r, wake_flags());
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(poll_cq_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, zero = 0;
	struct thread_state *st;
	struct call_args *a;
	struct sq_poll_rec *r;
	struct windows *ws;
	__u32 n;

	if (!wanted(tgid))
		return 0;
	st = thread_state(id, 0);
	if (!st)
		return 0;
	a = leave(&st->poll, 0);
	if (!a || past_cut()) /* decided at the return */
		return 0;
	/* the counters mode's send-queue model retires what was completed */
	if (targ_mode == SQ_MODE_COUNTERS && ret > 0)
		occ_poll(tgid, a->a1, ret);
	/* Empty polls are the most frequent call of a busy poller: a count
	 * here, carried by the next record or flushed by user space. */
	if (count_poll(st, tgid, a->a0, ret == 0, ret > 0 ? (__u32)ret : 0))
		return 0;
	if (ret == 1 && max_wcs) {
		if (!poll_one(st, a, id, ret))
			st->pend_empty = 0; /* reported; else they stay pending */
		return 0;
	}
	claim_cpu(id);
	r = scratch_buf();
	ws = bpf_map_lookup_elem(&windows, &zero);
	if (!r || !ws)
		return 0;
	n = ret > 0 ? (__u32)ret : 0;
	if (n > max_wcs)
		n = max_wcs;
	if (n > SQ_MAX_WCS)
		n = SQ_MAX_WCS;
	fill_hdr(&r->hdr, SQ_REC_POLL, id, a->ts);
	r->cq = a->a0;
	r->max = (__s32)a->a3;
	r->ret = ret;
	r->n = n;
	r->truncated = ret > 0 ? (__u32)ret - n : 0;
	/* the record carries this thread's empty polls of the CQ not handed
	 * over yet: no shared map is touched on the way */
	r->empty_before = st->pend_empty;
	/* all the completions in one read (zeroed if unreadable) */
	if (n)
		bpf_probe_read_user(ws->sge.b, clamp_len(n * IBV_WC_SIZE, SQ_MAX_WCS * IBV_WC_SIZE),
				    (void *)a->a1);
	for (__u32 i = 0; i < SQ_MAX_WCS; i++) {
		struct wc_head h;
		struct sq_wc *o;

		if (i >= n)
			break;
		o = &r->wcs[i];
		h = *(struct wc_head *)&ws->sge.b[i * IBV_WC_SIZE];
		o->wr_id = h.wr_id;
		o->byte_len = h.byte_len;
		o->qp_num = h.qp_num;
		o->status = h.status;
		o->opcode = h.opcode;
	}
	if (!output_claimed(r, rec_size(struct sq_poll_rec, wcs, n, SQ_MAX_WCS), one_rec_size(struct sq_poll_rec, wcs), id))
		st->pend_empty = 0; /* reported; else they stay pending */
	return 0;
}

#endif
