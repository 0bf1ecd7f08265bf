/* Part of verbs.bpf.c: the counters mode's send-queue model (struct
 * sq_occ in events.h). A post counts its WRs in at its entry, as the
 * counters do, and keeps each signaled one in the QP's ring with the
 * number of WRs posted through it; a failed call's return takes back what
 * was refused. A poll's send completions retire, in order: the oldest
 * signaled WR's completion retires every WR up to it. Posts and polls
 * touch the model under no lock (tracing programs cannot take one): the
 * poster alone moves posted and the ring's tail, the poller retired and
 * its head. Two threads posting to one QP at the same instant may each
 * count from the same base (the larger count wins, a peak may be lost). */
#ifndef SQSCOPE_OCCUPANCY_BPF_H
#define SQSCOPE_OCCUPANCY_BPF_H

#define barrier() asm volatile("" ::: "memory")

/* Room for 4,096 QPs with the slack of a hash map that allocates on
 * update; a QP that finds it full has no model (counted in occ_full). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, struct sq_qpn_key);
	__type(value, struct sq_qp_occ);
} qp_occ SEC(".maps");

/* A zeroed model, never written: a new entry is copied from it (the value
 * is larger than a program's stack). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sq_qp_occ);
} occ_zero SEC(".maps");

/* QPs that found qp_occ full, and completions of polls past SQ_OCC_WCS
 * (the oldest of the poll's: a later one of the same QP retires them). */
__u64 occ_full = 0;
__u64 occ_wcs_past = 0;

/* occ_reset starts a model over for generation gen. */
static __always_inline void occ_reset(struct sq_qp_occ *o, __u32 gen, __u64 qp, __u32 sig_all)
{
	struct sq_occ z = {};

	z.gen = gen;
	z.flags = (gen ? SQ_OCC_SYNCED : 0) | (sig_all ? SQ_OCC_SIG_ALL : 0);
	z.send_cq = read_u64(qp + IBV_QP_SEND_CQ);
	o->s = z;
}

/* occ_of finds the model of the QP numbered qpn of generation gen, making
 * it when there is none (or it was another generation's). */
static __always_inline struct sq_qp_occ *occ_of(__u32 tgid, __u32 qpn, __u32 gen, __u64 qp)
{
	struct sq_qpn_key k = { .pid = tgid, .qpn = qpn };
	struct sq_qp_occ *o = bpf_map_lookup_elem(&qp_occ, &k);
	__u32 zero = 0;

	if (o) {
		if (o->s.gen != gen)
			occ_reset(o, gen, qp, 0);
		return o;
	}
	o = bpf_map_lookup_elem(&occ_zero, &zero);
	if (!o)
		return 0;
	if (bpf_map_update_elem(&qp_occ, &k, o, BPF_NOEXIST) && !bpf_map_lookup_elem(&qp_occ, &k)) {
		__sync_fetch_and_add(&occ_full, 1);
		return 0;
	}
	o = bpf_map_lookup_elem(&qp_occ, &k);
	if (o && !o->s.posted && !o->s.flags && !o->s.send_cq)
		occ_reset(o, gen, qp, 0);
	return o;
}

/* occ_born starts the model of a QP created in the trace (counters mode). */
static __always_inline void occ_born(__u32 tgid, __u32 qpn, __u32 gen, __u64 qp, __u32 sig_all)
{
	struct sq_qp_occ *o = occ_of(tgid, qpn, gen, qp);

	if (o)
		occ_reset(o, gen, qp, sig_all);
}

/* occ_push keeps a signaled WR, the cum-th posted. */
static __always_inline void occ_push(struct sq_qp_occ *o, __u64 wr_id, __u64 cum, __u32 ts)
{
	__u32 t = o->s.tail;
	struct sq_sig *e;

	if (t - o->s.head >= SQ_SIG_RING) {
		o->s.unkept++;
		return;
	}
	if (o->s.tail != o->s.head && wr_id == o->s.last_wr_id)
		o->s.flags |= SQ_OCC_IDS_REPEAT;
	o->s.last_wr_id = wr_id;
	e = &o->ring[t & (SQ_SIG_RING - 1)];
	e->wr_id = wr_id;
	e->cum = (__u32)cum;
	e->ts = ts;
	barrier(); /* the entry before the tail that shows it */
	o->s.tail = t + 1;
}

/* occ_runs moves the unsignaled runs past a call of wrs WRs whose signaled
 * ones were the first-th and the last-th (1-based; 0: none), the longest
 * run between two of them gap. */
static __always_inline void occ_runs(struct sq_qp_occ *o, __u32 wrs, __u32 first, __u32 last, __u32 gap)
{
	__u64 run;

	if (o->s.flags & SQ_OCC_SIG_ALL) {
		o->s.cur_run = 0;
		return;
	}
	if (!(o->s.flags & SQ_OCC_SIG_SEEN)) {
		o->s.first_run = first ? o->s.cur_run + first - 1 : o->s.cur_run + wrs;
		if (first)
			o->s.flags |= SQ_OCC_SIG_SEEN;
	}
	if (!first) {
		run = o->s.cur_run + wrs;
	} else {
		run = o->s.cur_run + first - 1;
		if (gap > run)
			run = gap;
		if (run > o->s.longest_run)
			o->s.longest_run = run;
		run = wrs - last;
	}
	if (run > o->s.longest_run)
		o->s.longest_run = run;
	o->s.cur_run = run;
}

/* occ_in counts wrs WRs in after the ring took the call's signaled ones. */
static __always_inline void occ_in(struct sq_qp_occ *o, __u64 base, __u32 wrs)
{
	__u64 out;

	o->s.posted = base + wrs;
	out = o->s.posted - o->s.retired;
	if ((__s64)out > 0 && out > o->s.peak)
		o->s.peak = out;
}

/* occ_save keeps in the thread what a call's entry changes, for its
 * return to take back if it fails. */
static __always_inline void occ_save(struct thread_state *st, struct sq_qp_occ *o)
{
	st->occ_run = o->s.cur_run;
	st->occ_longest = o->s.longest_run;
	st->occ_peak = o->s.peak;
	st->occ_unkept = o->s.unkept;
	st->occ_sigs = o->s.signaled;
	st->occ_first_run = o->s.first_run;
	st->occ_flags = o->s.flags;
}

/* occ_post_one counts in a post of one WR (the thread's call tally). */
static __always_inline void occ_post_one(struct thread_state *st, struct sq_qp_occ *o, __u64 wr_id)
{
	__u64 base = o->s.posted;
	__u32 sig = st->call_signaled && !(o->s.flags & SQ_OCC_SIG_ALL);

	occ_save(st, o);
	if (sig) {
		occ_push(o, wr_id, base + 1, (__u32)(bpf_ktime_get_ns() >> SQ_SIG_TS_SHIFT));
		o->s.signaled++;
	}
	occ_runs(o, 1, sig, sig, 0);
	occ_in(o, base, 1);
}

struct occ_call_ctx {
	__u64 base;  /* posted before the call */
	__u32 tgid, qpn;
	__u32 n;     /* signaled WRs of the walk to keep */
	__u32 ts;
};

/* occ_push_sig is the bpf_loop body that keeps the j-th signaled WR of
 * this CPU's walk (a loop in the program itself would multiply the
 * verifier's states with the post's). */
static long occ_push_sig(__u32 j, void *data)
{
	struct occ_call_ctx *c = data;
	struct sq_qpn_key k = { .pid = c->tgid, .qpn = c->qpn };
	struct walk *w = bpf_map_lookup_elem(&walks, &(__u32){0});
	struct sq_qp_occ *o = bpf_map_lookup_elem(&qp_occ, &k);

	j++; /* the first was kept before the loop */
	if (!w || !o || j >= c->n)
		return 1;
	j &= SQ_SIG_PER_CALL - 1;
	occ_push(o, w->sigs[j].wr_id, c->base + w->sigs[j].idx + 1, c->ts);
	return 0;
}

/* occ_post_walk counts in the accepted WRs of this CPU's walk, w, on the
 * QP numbered qpn. */
static __always_inline void occ_post_walk(struct sq_qp_occ *o, struct walk *w, __u32 tgid, __u32 qpn)
{
	__u64 base = o->s.posted;
	__u32 n = w->sig_n < SQ_SIG_PER_CALL ? w->sig_n : SQ_SIG_PER_CALL;

	if (o->s.flags & SQ_OCC_SIG_ALL) {
		occ_runs(o, w->accepted, 0, 0, 0);
		occ_in(o, base, w->accepted);
		return;
	}
	if (n) {
		__u32 ts = (__u32)(bpf_ktime_get_ns() >> SQ_SIG_TS_SHIFT);

		/* the first here (most lists signal one WR), the rest in a loop */
		occ_push(o, w->sigs[0].wr_id, base + w->sigs[0].idx + 1, ts);
		if (n > 1) {
			struct occ_call_ctx c = { .base = base, .tgid = tgid, .qpn = qpn, .n = n, .ts = ts };

			bpf_loop(n - 1, occ_push_sig, &c, 0);
		}
	}
	o->s.unkept += w->sig_n - n;
	o->s.signaled += w->sig_n;
	occ_runs(o, w->accepted, w->sig_first, w->sig_last, w->sig_gap);
	occ_in(o, base, w->accepted);
}

/* occ_undo takes back what a failed call's entry counted in (wrs WRs):
 * its signaled WRs leave the ring from the tail, and the runs and the
 * peak are as they were before it. */
static long occ_pop_refused(__u32 j, void *data)
{
	struct occ_call_ctx *c = data;
	struct sq_qpn_key k = { .pid = c->tgid, .qpn = c->qpn };
	struct sq_qp_occ *o = bpf_map_lookup_elem(&qp_occ, &k);
	__u32 t;

	if (!o)
		return 1;
	t = o->s.tail;
	if (t == o->s.head || (__s32)(o->ring[(t - 1) & (SQ_SIG_RING - 1)].cum - (__u32)c->base) <= 0)
		return 1;
	o->s.tail = t - 1;
	return 0;
}

static __always_inline void occ_undo(struct thread_state *st, struct sq_qp_occ *o, __u32 wrs, __u32 tgid,
				     __u32 qpn)
{
	struct occ_call_ctx c = { .tgid = tgid, .qpn = qpn };

	o->s.posted -= wrs;
	c.base = o->s.posted;
	bpf_loop(SQ_SIG_PER_CALL, occ_pop_refused, &c, 0);
	o->s.cur_run = st->occ_run;
	o->s.longest_run = st->occ_longest;
	o->s.peak = st->occ_peak;
	o->s.unkept = st->occ_unkept;
	o->s.signaled = st->occ_sigs;
	o->s.first_run = st->occ_first_run;
	o->s.flags = (o->s.flags & ~(SQ_OCC_IDS_REPEAT | SQ_OCC_SIG_SEEN)) |
		     (st->occ_flags & (SQ_OCC_IDS_REPEAT | SQ_OCC_SIG_SEEN));
}

/* occ_oldest_ns is when the oldest signaled WR outstanding was posted, on
 * the clock of bpf_ktime_get_ns (0: none kept). */
static __always_inline __u64 occ_oldest_ns(struct sq_qp_occ *o)
{
	__u64 now, ts;

	if (o->s.head == o->s.tail)
		return 0;
	now = bpf_ktime_get_ns();
	ts = (now & ~((1ULL << (32 + SQ_SIG_TS_SHIFT)) - 1)) |
	     (__u64)o->ring[o->s.head & (SQ_SIG_RING - 1)].ts << SQ_SIG_TS_SHIFT;
	if (ts > now)
		ts -= 1ULL << (32 + SQ_SIG_TS_SHIFT);
	return ts;
}

/* occ_retire applies one completion of the QP, wr_id and status read
 * from its work completion. A completion of the oldest signaled WR kept
 * retires up to it; one of a later one (the ring lost the earlier
 * completions' WRs: a late attach) retires up to that one and makes the
 * model exact; one that matches none retires one WR when the ring is
 * empty (an sq_sig_all QP: a completion per WR). */
static __always_inline void occ_retire(struct sq_qp_occ *o, __u64 wr_id, __u32 status)
{
	__u32 h = o->s.head, t = o->s.tail;
	__u64 retired = 0;
	int found = 0;

	o->s.send_cqes++;
	if (status)
		o->s.cqe_errors++;
	for (__u32 j = 0; j < SQ_SIG_RING; j++) {
		struct sq_sig *e;

		if (h + j == t)
			break;
		e = &o->ring[(h + j) & (SQ_SIG_RING - 1)];
		if (e->wr_id == wr_id) {
			/* posted is at most 2^32 WRs past the entry */
			retired = o->s.posted - (__u32)((__u32)o->s.posted - e->cum);
			o->s.head = h + j + 1;
			found = 1;
			break;
		}
	}
	if (found) {
		if (retired > o->s.retired)
			o->s.retired = retired;
		o->s.flags |= SQ_OCC_SYNCED;
		return;
	}
	o->s.unmatched++;
	if (status) {
		o->s.flags |= SQ_OCC_ERR;
		return;
	}
	if (h == t && o->s.retired < o->s.posted)
		o->s.retired++;
}

struct occ_poll_ctx {
	__u64 wc;  /* the poll's work completions */
	__u32 tgid;
	__u32 n;
};

/* occ_wc is the bpf_loop body over a poll's work completions. */
static long occ_wc(__u32 i, void *data)
{
	struct occ_poll_ctx *c = data;
	struct sq_qpn_key k = { .pid = c->tgid };
	struct sq_qp_occ *o;
	struct wc_head h;

	if (i >= c->n)
		return 1;
	if (bpf_probe_read_user(&h, sizeof(h), (void *)(c->wc + (__u64)i * IBV_WC_SIZE)))
		return 1;
	/* a receive's completion (its opcode has IBV_WC_RECV) is no send's;
	 * an error's opcode is not set: the ring tells whose it is */
	if (!h.status && (h.opcode & SQ_IBV_WC_RECV))
		return 0;
	k.qpn = h.qp_num;
	o = bpf_map_lookup_elem(&qp_occ, &k);
	if (o)
		occ_retire(o, h.wr_id, h.status);
	return 0;
}

/* occ_poll applies the completions an ibv_poll_cq returned (ret > 0) to
 * their QPs' models: the last SQ_OCC_WCS of them (counted past that). */
static __always_inline void occ_poll(__u32 tgid, __u64 wc, int ret)
{
	struct occ_poll_ctx c = { .wc = wc, .tgid = tgid, .n = (__u32)ret };

	if (ret <= 0)
		return;
	if (ret == 1) { /* the commonest poll: no loop */
		occ_wc(0, &c);
		return;
	}
	if (c.n > SQ_OCC_WCS) {
		__sync_fetch_and_add(&occ_wcs_past, c.n - SQ_OCC_WCS);
		c.wc += (__u64)(c.n - SQ_OCC_WCS) * IBV_WC_SIZE;
		c.n = SQ_OCC_WCS;
	}
	bpf_loop(c.n, occ_wc, &c, 0);
}

/* occ_failed sends a failed call's record: the refused WR (bad, *bad_wr),
 * the QP's state and its send queue after the call. One like the QP's
 * last is only counted. */
static __always_inline void occ_failed(struct sq_qp_occ *o, __u64 id, __u64 qp, __u32 qpn, int ret,
				       __u32 accepted, __u64 bad, int capped)
{
	struct sq_occ_fail_rec *r;
	struct wr_head h = {};
	__u32 out = (__u32)(o->s.posted - o->s.retired), bytes = 0, has_wr = 0;
	__u8 over = 0;
	__s32 state;
	struct sge sge;

	if (o->s.fail_err == ret && o->s.fail_accepted == accepted && o->s.fail_out == out) {
		o->s.fail_repeats++;
		return;
	}
	/* user memory read before the reservation: a fault handled while a
	 * record is reserved would keep the reader waiting on it */
	if (bad && !bpf_probe_read_user(&h, sizeof(h), (void *)bad)) {
		has_wr = 1;
		/* one SGE at a time, as the sentinel's error site reads them: a
		 * buffer of them on the stack would pass older verifiers' bound
		 * on the stack of a program and the loops it calls together */
		for (int i = 0; i < SQ_FAIL_SGES; i++) {
			if (i >= h.num_sge)
				break;
			if (bpf_probe_read_user(&sge, sizeof(sge), (void *)(h.sg_list + i * IBV_SGE_SIZE)))
				break;
			bytes += sge.length;
		}
		if (h.num_sge > SQ_FAIL_SGES)
			over = h.num_sge - SQ_FAIL_SGES > 255 ? 255 : h.num_sge - SQ_FAIL_SGES;
	}
	state = (__s32)read_u32(qp + IBV_QP_STATE_FIELD);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_lost();
		return;
	}
	o->s.fail_err = ret;
	o->s.fail_accepted = accepted;
	o->s.fail_out = out;
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, SQ_REC_OCC_FAIL, id, 0);
	r->qp = qp;
	r->qp_num = qpn;
	r->err = ret;
	r->accepted = accepted;
	r->walk_capped = capped;
	r->state = state;
	r->has_wr = has_wr;
	r->wr_id = h.wr_id;
	r->send_flags = h.send_flags;
	r->num_sge = h.num_sge < 0 ? 0 : (__u32)h.num_sge;
	r->opcode = (__u8)h.opcode;
	r->bytes = bytes;
	r->sge_over = over;
	r->oldest_ns = occ_oldest_ns(o);
	r->o = o->s;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

#endif
