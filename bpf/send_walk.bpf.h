/* Part of verbs.bpf.c: the walk over the WR list of an ibv_post_send call,
 * into the post record (events mode) or the totals of the accepted WRs
 * (counters mode). */
#ifndef SQSCOPE_SEND_WALK_BPF_H
#define SQSCOPE_SEND_WALK_BPF_H

struct walk {
	__u64 cur;       /* next WR to read */
	__u64 bad;       /* *bad_wr when the call failed, else 0 */
	__u32 i;         /* WRs walked */
	__u32 base;      /* first WR walk_wr sees (walk_fast did those before) */
	__u32 accepted;
	__u8 failed;     /* ret != 0 */
	__u8 found_bad;
	__u8 ended;      /* reached the end of the list (or unreadable memory) */
	__u8 pad;
	struct win wr, sge;
	/* counters mode: totals over the accepted WRs */
	__u32 inline_wrs, signaled, payload_sges;
	__u32 sge_cut_wrs, sges_not_summed; /* WRs with SGEs past the SGE bound, and those SGEs */
	__u32 pad2;
	__u64 inline_bytes, payload_bytes;
	/* counters mode: the signaled WRs among the accepted ones, for the
	 * send-queue model (occupancy.bpf.h): how many, the first and last
	 * (index + 1), the longest unsignaled run between two, and the first
	 * SQ_SIG_PER_CALL of them */
	__u32 sig_n, sig_first, sig_last, sig_gap;
	struct {
		__u64 wr_id;
		__u32 idx;
		__u32 pad;
	} sigs[SQ_SIG_PER_CALL];
};

/* The walk state lives in a per-CPU slot, not on the stack: the verifier
 * of older kernels (6.1) limits the stack of a program and the bpf_loop
 * callback it calls to 512 bytes together. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} walks SEC(".maps");

/* sges_from adds up the SGE lengths of one WR (the first max_sges of them)
 * read through the window, and says how many it could not look at. */
static __always_inline __u32 sges_from(struct uwin *u, struct win *w, __u64 sg_list, __s32 num_sge,
				       __u8 *over, __u32 *nonempty)
{
	__u32 bytes = 0, n = 0;
	__u32 want = num_sge > 0 ? (__u32)num_sge : 0;
	__u32 look = want < max_sges ? want : max_sges;
	long off;

	*over = want > max_sges ? (want - max_sges > 255 ? 255 : want - max_sges) : 0;
	*nonempty = 0;
	if (!look)
		return 0;
	if (look > SQ_MAX_SGES)
		look = SQ_MAX_SGES;
	off = win_off(u, w, sg_list, look * IBV_SGE_SIZE);
	if (off < 0)
		return 0;
	__u8 *p = win_ptr(u, off);

	for (__u32 j = 0; j < SQ_MAX_SGES; j++) {
		__u32 len;

		if (j >= look)
			break;
		len = *(__u32 *)(p + j * IBV_SGE_SIZE + IBV_SGE_LENGTH);
		bytes += len;
		/* without a branch: one per SGE would multiply the states
		 * the verifier walks */
		n += nonzero(len);
	}
	*nonempty = n;
	return bytes;
}

/* sum_sges is sges_from for one SGE array on its own, read onto the
 * stack: the ibv_wr_* probes keep nothing in per-CPU slots. */
static __always_inline __u32 sum_sges(__u64 sg_list, __s32 num_sge, __u8 *over, __u32 *nonempty)
{
	__u8 buf[SQ_MAX_SGES * IBV_SGE_SIZE];
	__u32 want = num_sge > 0 ? (__u32)num_sge : 0;
	__u32 look = want < max_sges ? want : max_sges;
	__u32 bytes = 0, n = 0;

	*over = want > max_sges ? (want - max_sges > 255 ? 255 : want - max_sges) : 0;
	*nonempty = 0;
	if (look > SQ_MAX_SGES)
		look = SQ_MAX_SGES;
	if (!look || bpf_probe_read_user(buf, clamp_len(look * IBV_SGE_SIZE, sizeof(buf)), (void *)sg_list))
		return 0;
	for (__u32 j = 0; j < SQ_MAX_SGES; j++) {
		__u32 len;

		if (j >= look)
			break;
		len = *(__u32 *)(buf + j * IBV_SGE_SIZE + IBV_SGE_LENGTH);
		bytes += len;
		n += nonzero(len);
	}
	*nonempty = n;
	return bytes;
}

/* note_sig notes the idx-th WR of the list, signaled, for the counters
 * mode's send-queue model. */
static __always_inline void note_sig(struct walk *w, __u32 idx, __u64 wr_id)
{
	__u32 n = w->sig_n;

	if (w->sig_last && idx - w->sig_last > w->sig_gap)
		w->sig_gap = idx - w->sig_last;
	if (!w->sig_first)
		w->sig_first = idx + 1;
	w->sig_last = idx + 1;
	if (n < SQ_SIG_PER_CALL) {
		w->sigs[n & (SQ_SIG_PER_CALL - 1)].wr_id = wr_id;
		w->sigs[n & (SQ_SIG_PER_CALL - 1)].idx = idx;
	}
	w->sig_n = n + 1;
}

/* note_wr puts one walked WR in the record (events) or in the totals of
 * the accepted WRs (counters), and moves on. The totals are branch-free:
 * a branch per WR multiplies the states the verifier walks. */
static __always_inline void note_wr(struct walk *w, struct sq_post_rec *r, __u32 idx, struct wr_head *h,
				    __u32 bytes, __u32 nonempty, __u8 over)
{
	if (targ_mode == SQ_MODE_EVENTS) {
		if (r && idx < SQ_MAX_WRS) {
			struct sq_wr *o = &r->wrs[wr_index(idx)];

			o->wr_id = h->wr_id;
			o->send_flags = h->send_flags;
			o->bytes = bytes;
			o->num_sge = h->num_sge;
			o->opcode = h->opcode;
			o->sge_over = over;
			o->pad = 0;
		}
	} else if (!w->found_bad) {
		__u32 inl = (h->send_flags / SQ_IBV_SEND_INLINE) & 1;
		/* a READ's or an atomic's SGEs receive its response: no payload */
		__u32 out = (1 - inl) * sends_payload(h->opcode);

		w->inline_wrs += inl;
		w->inline_bytes += (__u64)bytes * inl;
		w->payload_bytes += (__u64)bytes * out;
		/* SGEs past the bound are assumed non-empty */
		w->payload_sges += (nonempty + over) * out;
		w->signaled += (h->send_flags / SQ_IBV_SEND_SIGNALED) & 1;
		if (h->send_flags & SQ_IBV_SEND_SIGNALED)
			note_sig(w, idx, h->wr_id);
		/* over is 0 in walk_fast, where these vanish */
		w->sge_cut_wrs += nonzero(over);
		w->sges_not_summed += over;
	}
	w->cur = h->next;
	w->i = idx + 1;
}

/* walk_fast walks the head of the list, as long as its WRs have at most
 * one SGE, in a plain loop: most lists are that, and a bpf_loop callback
 * per WR costs more than the WR itself. walk_wr takes over where it stops. */
#define SQ_FAST_WRS 16

static __noinline void walk_fast(struct walk *w, struct windows *ws)
{
	/* the record, looked up once for the loop (events mode) */
	struct sq_post_rec *r = targ_mode == SQ_MODE_EVENTS ? scratch_buf() : 0;

	for (__u32 i = 0; i < SQ_FAST_WRS; i++) {
		struct wr_head h;
		__u32 bytes = 0;
		long off;

		if (!w->cur) {
			w->ended = 1;
			return;
		}
		if (targ_mode == SQ_MODE_EVENTS && i >= max_wrs)
			return;
		if (i == 0 && !w->wr.missed) {
			/* the first WR of a call that does not expect a long list:
			 * straight onto the stack, the window is for the rest */
			if (bpf_probe_read_user(&h, sizeof(h), (void *)w->cur)) {
				w->ended = 1;
				return;
			}
			w->wr.missed = 1;
		} else {
			off = win_off(&ws->wr, &w->wr, w->cur, sizeof(h));
			if (off < 0) {
				w->ended = 1;
				return;
			}
			h = *(struct wr_head *)win_ptr(&ws->wr, off);
		}
		if (h.num_sge > 1 || h.num_sge < 0)
			return;
		if (w->failed && w->cur == w->bad && !w->found_bad) {
			w->accepted = i;
			w->found_bad = 1;
		}
		if (h.num_sge == 1 && i == 0 && !w->sge.missed) {
			struct sge sge;

			if (!bpf_probe_read_user(&sge, sizeof(sge), (void *)h.sg_list))
				bytes = sge.length;
			w->sge.missed = 1;
		} else if (h.num_sge == 1) {
			off = win_off(&ws->sge, &w->sge, h.sg_list, IBV_SGE_SIZE);
			if (off >= 0)
				bytes = *(__u32 *)(win_ptr(&ws->sge, off) + IBV_SGE_LENGTH);
		}
		note_wr(w, r, i, &h, bytes, nonzero(bytes), 0);
	}
}

/* walk_wr is the bpf_loop body over the rest of a send WR list (from WR
 * w->base on). It decides with idx, which the verifier treats as unknown,
 * never with a counter kept in w: that keeps the callback's states
 * converging. */
static long walk_wr(__u32 idx, void *unused)
{
	__u32 zero = 0;
	struct windows *ws = bpf_map_lookup_elem(&windows, &zero);
	struct walk *w = bpf_map_lookup_elem(&walks, &zero);
	struct wr_head h;
	__u32 nonempty = 0, bytes;
	__u8 over = 0;
	long off;

	if (!w)
		return 1;
	idx += w->base;
	if (!ws || !w->cur) {
		w->ended = 1;
		return 1;
	}
	if (w->failed && w->cur == w->bad && !w->found_bad) {
		w->accepted = idx;
		w->found_bad = 1;
	}
	off = win_off(&ws->wr, &w->wr, w->cur, sizeof(h));
	if (off < 0) {
		w->ended = 1;
		return 1;
	}
	h = *(struct wr_head *)win_ptr(&ws->wr, off);
	if (targ_mode == SQ_MODE_EVENTS && idx >= max_wrs) {
		/* past the record bound: only count it */
		w->cur = h.next;
		w->i = idx + 1;
		return 0;
	}
	bytes = sges_from(&ws->sge, &w->sge, h.sg_list, h.num_sge, &over, &nonempty);
	note_wr(w, targ_mode == SQ_MODE_EVENTS ? scratch_buf() : 0, idx, &h, bytes, nonempty, over);
	return 0;
}

/* walk_post walks a post's WR list from its head, into the record
 * (events) or the totals of the accepted WRs (counters); bad is *bad_wr of
 * a failed call. The walk state is in this CPU's slot: claim it first. */
static __always_inline struct walk *walk_post(struct thread_state *st, __u64 head, int failed, __u64 bad)
{
	__u32 zero = 0;
	struct walk *w = bpf_map_lookup_elem(&walks, &zero);
	struct windows *ws = bpf_map_lookup_elem(&windows, &zero);

	if (!w || !ws)
		return 0;
	/* the signaled WRs kept are read only below sig_n: not zeroed */
	__builtin_memset(w, 0, __builtin_offsetof(struct walk, sigs));
	w->cur = head;
	w->wr.missed = w->sge.missed = st->last_wrs > 1;
	w->failed = failed;
	w->bad = bad;
	walk_fast(w, ws);
	if (w->cur && !w->ended && w->i < max_walk) {
		w->base = w->i;
		bpf_loop(max_walk - w->i, walk_wr, NULL, 0);
	}
	st->last_wrs = w->i;
	if (!failed)
		w->accepted = w->i;
	else if (!w->found_bad)
		w->accepted = 0;
	return w;
}

/* read_one_wr reads the WR at wr onto the stack, with the length of its
 * SGE, when it is alone in its list and has at most one SGE: the commonest
 * post, which needs no walk and no per-CPU slot. -1: something else. */
static __always_inline int read_one_wr(__u64 wr, struct wr_head *h, __u32 *bytes)
{
	struct sge sge = {};

	if (bpf_probe_read_user(h, sizeof(*h), (void *)wr) || h->next || h->num_sge < 0 || h->num_sge > 1 ||
	    !max_sges)
		return -1;
	if (h->num_sge && bpf_probe_read_user(&sge, sizeof(sge), (void *)h->sg_list))
		sge.length = 0; /* unreadable: as the walk does */
	*bytes = sge.length;
	return 0;
}

#endif
