/* Part of verbs.bpf.c: the counters mode's per-QP totals. A thread counts
 * its posts at entry and hands them to qp_counters every SQ_PEND_MAX calls
 * or when it moves to another QP; a failed call's return probe corrects
 * what its entry counted. */
#ifndef SQSCOPE_COUNTERS_BPF_H
#define SQSCOPE_COUNTERS_BPF_H

/* qp_counters_of finds the totals of one QP's lifetime (gen), creating
 * them with qpn (or, when qpn is SQ_QPN_READ, the number read from the QP). */
#define SQ_QPN_READ 0xffffffffU

static __always_inline struct sq_qp_counters *qp_counters_of(__u32 tgid, __u64 qp, __u32 gen, __u32 qpn)
{
	struct sq_gen_key k = { .pid = tgid, .gen = gen, .addr = qp };
	struct sq_qp_counters *c = bpf_map_lookup_elem(&qp_counters, &k);

	if (!c) {
		struct sq_qp_counters init = {
			.qp_num = qpn == SQ_QPN_READ ? read_u32(qp + IBV_QP_QP_NUM) : qpn,
		};

		bpf_map_update_elem(&qp_counters, &k, &init, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&qp_counters, &k);
	}
	return c;
}

/* count_post adds one call to its QP's totals; fields that do not change
 * are not touched (each atomic add costs). */
static __always_inline void count_post(__u32 tgid, __u64 qp, int ret, __u32 accepted,
				       __u32 inline_wrs, __u32 signaled, __u64 inline_bytes,
				       __u64 payload_bytes, __u32 payload_sges, __u32 sge_cut_wrs,
				       __u32 sges_not_summed)
{
	struct sq_qp_counters *c = qp_counters_of(tgid, qp, obj_gen(tgid, SQ_OBJ_QP, qp), SQ_QPN_READ);

	if (!c)
		return;
	__sync_fetch_and_add(&c->post_calls, 1);
	if (accepted) {
		__sync_fetch_and_add(&c->wrs, accepted);
		__sync_fetch_and_add(&c->doorbells, 1);
		if (accepted > c->max_wrs_per_call)
			c->max_wrs_per_call = accepted; /* a racing larger value may be lost: a peak, not a sum */
	}
	if (inline_wrs) {
		__sync_fetch_and_add(&c->inline_wrs, inline_wrs);
		__sync_fetch_and_add(&c->inline_bytes, inline_bytes);
	}
	if (signaled)
		__sync_fetch_and_add(&c->signaled, signaled);
	if (payload_bytes)
		__sync_fetch_and_add(&c->payload_bytes, payload_bytes);
	if (payload_sges)
		__sync_fetch_and_add(&c->payload_sges, payload_sges);
	if (sge_cut_wrs) {
		__sync_fetch_and_add(&c->sge_cut_wrs, sge_cut_wrs);
		__sync_fetch_and_add(&c->sges_not_summed, sges_not_summed);
	}
	if (ret) {
		__sync_fetch_and_add(&c->errors, 1);
		if (ret == ENOMEM)
			__sync_fetch_and_add(&c->enomem, 1);
		else if (ret == EINVAL)
			__sync_fetch_and_add(&c->einval, 1);
	}
}

/* count_recv adds one ibv_post_recv call to its QP's totals. */
static __always_inline void count_recv(__u32 tgid, __u64 qp, int ret, __u32 accepted)
{
	struct sq_qp_counters *c = qp_counters_of(tgid, qp, obj_gen(tgid, SQ_OBJ_QP, qp), SQ_QPN_READ);

	if (!c)
		return;
	__sync_fetch_and_add(&c->recv_calls, 1);
	if (accepted)
		__sync_fetch_and_add(&c->recvs, accepted);
	if (ret)
		__sync_fetch_and_add(&c->recv_failed, 1);
}

/* flush_posts adds the thread's pending counters-mode totals to its QP's. */
static __always_inline void flush_posts(struct thread_state *st, __u32 tgid)
{
	struct sq_qp_counters *c;

	if (!st->pend_calls)
		return;
	c = qp_counters_of(tgid, st->pend_qp, st->pend_gen, st->pend_qpn);
	if (c) {
		__sync_fetch_and_add(&c->post_calls, st->pend_calls);
		if (st->pend_wrs)
			__sync_fetch_and_add(&c->wrs, st->pend_wrs);
		if (st->pend_doorbells)
			__sync_fetch_and_add(&c->doorbells, st->pend_doorbells);
		if (st->pend_inline)
			__sync_fetch_and_add(&c->inline_wrs, st->pend_inline);
		if (st->pend_inline_bytes)
			__sync_fetch_and_add(&c->inline_bytes, st->pend_inline_bytes);
		if (st->pend_signaled)
			__sync_fetch_and_add(&c->signaled, st->pend_signaled);
		if (st->pend_payload_bytes)
			__sync_fetch_and_add(&c->payload_bytes, st->pend_payload_bytes);
		if (st->pend_sges)
			__sync_fetch_and_add(&c->payload_sges, st->pend_sges);
		if (st->pend_errors) {
			__sync_fetch_and_add(&c->errors, st->pend_errors);
			if (st->pend_enomem)
				__sync_fetch_and_add(&c->enomem, st->pend_enomem);
			if (st->pend_einval)
				__sync_fetch_and_add(&c->einval, st->pend_einval);
		}
		if (st->pend_max_wrs > c->max_wrs_per_call)
			c->max_wrs_per_call = st->pend_max_wrs; /* a peak, not a sum: a race may lose a larger one */
	}
	if (st->pend_walk_capped | st->pend_sge_cut_wrs) {
		if (c) {
			if (st->pend_walk_capped)
				__sync_fetch_and_add(&c->walk_capped, st->pend_walk_capped);
			if (st->pend_sge_cut_wrs) {
				__sync_fetch_and_add(&c->sge_cut_wrs, st->pend_sge_cut_wrs);
				__sync_fetch_and_add(&c->sges_not_summed, st->pend_sges_not_summed);
			}
		}
		st->pend_walk_capped = 0;
		st->pend_sge_cut_wrs = 0;
		st->pend_sges_not_summed = 0;
	}
	st->pend_calls = 0;
	st->pend_wrs = 0;
	st->pend_doorbells = 0;
	st->pend_inline = 0;
	st->pend_inline_bytes = 0;
	st->pend_signaled = 0;
	st->pend_payload_bytes = 0;
	st->pend_sges = 0;
	st->pend_errors = 0;
	st->pend_enomem = 0;
	st->pend_einval = 0;
	st->pend_max_wrs = 0;
}

/* set_call takes a walk's totals as the tally of the post in progress. */
static __always_inline void set_call(struct thread_state *st, struct walk *w)
{
	st->call_wrs = w->accepted;
	st->call_inline = w->inline_wrs;
	st->call_signaled = w->signaled;
	st->call_sges = w->payload_sges;
	st->call_inline_bytes = w->inline_bytes;
	st->call_payload_bytes = w->payload_bytes;
}

/* add_call adds the tally of the post in progress to the pending counts. */
static __always_inline void add_call(struct thread_state *st)
{
	if (st->call_wrs) {
		st->pend_wrs += st->call_wrs;
		st->pend_doorbells++;
		if (st->call_wrs > st->pend_max_wrs)
			st->pend_max_wrs = st->call_wrs;
	}
	st->pend_inline += st->call_inline;
	st->pend_inline_bytes += st->call_inline_bytes;
	st->pend_signaled += st->call_signaled;
	st->pend_payload_bytes += st->call_payload_bytes;
	st->pend_sges += st->call_sges;
}

/* pend_call counts the post in progress in the thread's pending counts,
 * handing the earlier ones over first when the QP changed or enough have
 * piled up. They are handed over before a call is added, never after: a
 * failed call's return probe corrects what its entry added. A QP created
 * or destroyed anywhere (qp_gen moved) hands them over too: the address
 * may now be another QP's, whose generation is looked up again. */
static __always_inline void pend_call(struct thread_state *st, __u32 tgid, __u64 qp)
{
	__u32 epoch = qp_gen;

	if (st->pend_qp != qp || st->pend_epoch != epoch || !st->pend_calls || st->pend_calls >= SQ_PEND_MAX) {
		flush_posts(st, tgid);
		if (st->pend_qp != qp || st->pend_epoch != epoch) {
			st->pend_qp = qp;
			st->pend_qpn = qp_num_of(st, qp);
			st->pend_gen = obj_gen(tgid, SQ_OBJ_QP, qp);
			st->pend_epoch = epoch;
		}
	}
	st->call_prev_max = st->pend_max_wrs;
	st->pend_calls++;
	add_call(st);
}

/* tally_one is the tally of a post read_one_wr can take; -1, having set
 * nothing, for any other post. */
static __always_inline int tally_one(struct thread_state *st)
{
	struct wr_head h;
	__u32 bytes, inl;

	if (read_one_wr(st->post.a1, &h, &bytes))
		return -1;
	st->last_wrs = 1;
	inl = (h.send_flags / SQ_IBV_SEND_INLINE) & 1;
	st->call_wrs = 1;
	st->call_inline = inl;
	st->call_inline_bytes = (__u64)bytes * inl;
	/* a READ's or an atomic's SGE receives its response: no payload */
	st->call_payload_bytes = (__u64)bytes * (1 - inl) * sends_payload(h.opcode);
	st->call_sges = nonzero(bytes) * (1 - inl) * sends_payload(h.opcode);
	st->call_signaled = (h.send_flags / SQ_IBV_SEND_SIGNALED) & 1;
	st->call_wr_id = h.wr_id;
	return 0;
}

/* The counters mode counts a post at its entry, as if every WR will be
 * accepted: the return probe of a successful call then has nothing to do,
 * not even find the thread's state. A failed call's return probe walks
 * the list again and puts what was accepted in place of the guess. A cut
 * (a list past the walk bound, SGEs past the SGE bound) needs a walk, and
 * only a walk that saw one writes more. */
static __always_inline void count_entry(struct thread_state *st, __u64 id, __u64 qp)
{
	__u32 capped = 0, cut_wrs = 0, not_summed = 0;
	struct sq_qp_occ *o;
	struct walk *w = 0;

	st->call_counted = 0;
	st->occ_wrs = 0;
	if (st->last_wrs > 1 || tally_one(st)) {
		claim_cpu(id);
		w = walk_post(st, st->post.a1, 0, 0);
		if (!w)
			return;
		if (!cpu_still_mine(id)) {
			count_lost(); /* the walk's totals were overwritten */
			return;
		}
		set_call(st, w);
		capped = w->cur && !w->ended;
		cut_wrs = w->sge_cut_wrs;
		not_summed = w->sges_not_summed;
	}
	pend_call(st, id >> 32, qp);
	st->call_counted = SQ_CALL_COUNTED;
	o = occ_of(id >> 32, st->pend_qpn, st->pend_gen, qp);
	if (o) {
		if (w) {
			occ_save(st, o);
			occ_post_walk(o, w, id >> 32, st->pend_qpn);
			st->occ_wrs = w->accepted;
		} else {
			occ_post_one(st, o, st->call_wr_id);
			st->occ_wrs = 1;
		}
	}
	if (capped | cut_wrs) {
		/* after pend_call, which may hand the earlier counts over */
		st->pend_walk_capped += capped;
		st->pend_sge_cut_wrs += cut_wrs;
		st->pend_sges_not_summed += not_summed;
		st->call_sge_cut_wrs = cut_wrs;
		st->call_sges_not_summed = not_summed;
		st->call_counted = SQ_CALL_COUNTED | SQ_CALL_CUT;
	}
}

/* uncount_call takes back what count_entry added for the call, all but
 * the call itself. */
static __always_inline void uncount_call(struct thread_state *st)
{
	st->pend_wrs -= st->call_wrs;
	st->pend_doorbells -= st->call_wrs ? 1 : 0;
	st->pend_inline -= st->call_inline;
	st->pend_signaled -= st->call_signaled;
	st->pend_sges -= st->call_sges;
	st->pend_inline_bytes -= st->call_inline_bytes;
	st->pend_payload_bytes -= st->call_payload_bytes;
	st->pend_max_wrs = st->call_prev_max;
}

/* post_send_failed is the counters mode's return probe of a failed call. */
static __always_inline void post_send_failed(struct pt_regs *ctx, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct thread_state *st;
	struct call_args *a;
	struct walk *w;
	__u8 counted;

	if (!wanted(id >> 32))
		return;
	st = thread_state(id, 0);
	if (!st)
		return;
	a = leave(&st->post, SQ_OP_POST_SEND);
	counted = st->call_counted;
	/* a successful call leaves its arguments behind: only the frame the
	 * entry saw (its return address popped) makes them this call's */
	if (!a || !counted || a->sp + 8 != PT_REGS_SP(ctx))
		return;
	st->call_counted = 0;
	claim_cpu(id);
	w = walk_post(st, a->a1, 1, read_u64(a->a2));
	if (!w || !cpu_still_mine(id)) {
		count_lost();
		return;
	}
	uncount_call(st);
	set_call(st, w);
	add_call(st);
	/* SGEs cut count for the accepted WRs only; a capped walk counts for
	 * the call, which stays counted */
	if (counted & SQ_CALL_CUT) {
		st->pend_sge_cut_wrs -= st->call_sge_cut_wrs;
		st->pend_sges_not_summed -= st->call_sges_not_summed;
	}
	if (w->sge_cut_wrs) {
		st->pend_sge_cut_wrs += w->sge_cut_wrs;
		st->pend_sges_not_summed += w->sges_not_summed;
	}
	st->pend_errors++;
	if (ret == ENOMEM)
		st->pend_enomem++;
	else if (ret == EINVAL)
		st->pend_einval++;
	if (st->occ_wrs && st->pend_qp == a->a0) {
		struct sq_qp_occ *o = occ_of(id >> 32, st->pend_qpn, st->pend_gen, a->a0);

		if (o) {
			occ_undo(st, o, st->occ_wrs, id >> 32, st->pend_qpn);
			occ_post_walk(o, w, id >> 32, st->pend_qpn);
			occ_failed(o, id, a->a0, st->pend_qpn, ret, w->accepted, read_u64(a->a2), w->cur && !w->ended);
		}
	}
	st->occ_wrs = 0;
}

/* qp_final ends a destroyed QP's totals (counters mode): the destroying
 * thread's pending counts go in, then the totals go to user space in one
 * record and their entry is deleted. Counts another thread still keeps
 * pending arrive later under the same generation. If the record cannot be
 * sent the entry stays, for the next flush to read. */
static __always_inline void qp_final(__u64 id, __u64 qp, __u32 gen)
{
	struct sq_gen_key k = { .pid = id >> 32, .gen = gen, .addr = qp };
	struct thread_state *st = thread_state(id, 0);
	struct sq_qp_final_rec *r;
	struct sq_qp_counters *c;

	if (st && st->pend_qp == qp && st->pend_gen == gen)
		flush_posts(st, id >> 32);
	struct sq_qpn_key ok = { .pid = id >> 32 };
	struct sq_qp_occ *o;

	c = bpf_map_lookup_elem(&qp_counters, &k);
	if (!c)
		return;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r)
		return;
	fill_hdr(&r->hdr, SQ_REC_QP_FINAL, id, 0);
	r->key = k;
	r->c = *c;
	ok.qpn = c->qp_num;
	o = bpf_map_lookup_elem(&qp_occ, &ok);
	if (o && o->s.gen == gen) {
		r->o = o->s;
		r->oldest_ns = occ_oldest_ns(o);
		r->has_occ = 1;
		bpf_map_delete_elem(&qp_occ, &ok);
	} else {
		__builtin_memset(&r->o, 0, sizeof(r->o));
		r->oldest_ns = 0;
		r->has_occ = 0;
	}
	r->pad = 0;
	bpf_map_delete_elem(&qp_counters, &k);
	bpf_ringbuf_submit(r, 0);
}

#endif
