/* Part of verbs.bpf.c: the ibv_wr_* probes. A batch from wr_start to
 * wr_complete or wr_abort is built in wr_batches, then sent as one post
 * record (or, in the counters mode, added to its QP's totals). */
#ifndef SQSCOPE_WR_API_BPF_H
#define SQSCOPE_WR_API_BPF_H

static __always_inline struct sq_post_rec *batch_of(__u32 tgid, __u64 qpx)
{
	struct sq_key k = { .pid = tgid, .addr = qpx };
	struct sq_post_rec *b = bpf_map_lookup_elem(&wr_batches, &k);

	if (b && b->hdr.kind == SQ_REC_POST)
		return b; /* kind is cleared when the batch ends */
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(wr_start, void *qpx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct sq_key k = { .pid = tgid, .addr = (__u64)qpx };
	struct sq_post_rec *b;

	if (!wanted(tgid))
		return 0;
	b = bpf_map_lookup_elem(&wr_batches, &k);
	if (!b) {
		claim_cpu(id); /* the scratch slot is the template */
		b = scratch_buf();
		if (!b)
			return 0;
		b->hdr.kind = 0;
		bpf_map_update_elem(&wr_batches, &k, b, BPF_ANY);
		b = bpf_map_lookup_elem(&wr_batches, &k);
		if (!b)
			return 0;
	}
	b->hdr.kind = SQ_REC_POST;
	b->hdr.entry_ts = call_times ? bpf_ktime_get_ns() : 0;
	b->hdr.tid = (__u32)id;
	b->qp = (__u64)qpx;
	b->n = 0;
	b->truncated = 0;
	b->api = SQ_API_WR;
	b->sge_cut = 0;
	return 0;
}

/* One program for every opcode call; the attach cookie is the opcode. */
SEC("uprobe")
int BPF_KPROBE(wr_opcode, void *qpx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct sq_post_rec *b;
	struct qpx_wr f = {};
	__u32 i;

	if (!wanted(tgid))
		return 0;
	b = batch_of(tgid, (__u64)qpx);
	if (!b)
		return 0;
	i = b->n;
	if (i >= max_wrs || i >= SQ_MAX_WRS) {
		b->truncated++;
		return 0;
	}
	bpf_probe_read_user(&f, __builtin_offsetof(struct qpx_wr, wr_flags) + sizeof(f.wr_flags),
			    (void *)((__u64)qpx + IBV_QPX_WR_ID));
	i = wr_index(i);
	b->wrs[i].wr_id = f.wr_id;
	b->wrs[i].send_flags = f.wr_flags;
	b->wrs[i].opcode = bpf_get_attach_cookie(ctx);
	b->wrs[i].bytes = 0;
	b->wrs[i].num_sge = 0;
	b->wrs[i].sge_over = 0;
	b->wrs[i].pad = 0;
	b->n = i + 1;
	return 0;
}

/* batch_wr is the WR the set_* calls apply to, in batch b: the last one
 * begun, unless it fell past the bound. */
static __always_inline struct sq_wr *batch_wr(struct sq_post_rec *b)
{
	__u32 i;

	if (!b || b->truncated || !b->n)
		return 0;
	i = b->n - 1;
	if (i >= SQ_MAX_WRS)
		return 0;
	return &b->wrs[wr_index(i)];
}

static __always_inline struct sq_wr *cur_wr(void *qpx)
{
	return batch_wr(batch_of(bpf_get_current_pid_tgid() >> 32, (__u64)qpx));
}

/* note_sge_cut marks batch b when its current WR has SGEs past the bound,
 * so that the counters mode looks for them at the end of the batch (and
 * only then). */
static __always_inline void note_sge_cut(struct sq_post_rec *b, __u8 over)
{
	if (targ_mode == SQ_MODE_COUNTERS && over)
		b->sge_cut = 1;
}

/* The data is copied into the WQE: the WR is inline whatever wr_flags say
 * (as in the mlx5 provider). */
SEC("uprobe")
int BPF_KPROBE(wr_set_inline_data, void *qpx, void *addr, __u64 length)
{
	struct sq_wr *w;

	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	w = cur_wr(qpx);
	if (!w)
		return 0;
	w->send_flags |= SQ_IBV_SEND_INLINE;
	w->bytes = length;
	w->num_sge = 1;
	w->sge_over = 0;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(wr_set_inline_data_list, void *qpx, __u64 num_buf, void *buf_list)
{
	struct sq_post_rec *b;
	struct sq_wr *w;
	__u32 bytes = 0, n;

	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	n = num_buf > 0xffff ? 0xffff : num_buf;
	for (__u32 j = 0; j < SQ_MAX_SGES; j++) {
		__u64 len = 0;

		if (j >= n || j >= max_sges)
			break;
		bpf_probe_read_user(&len, sizeof(len),
				    (void *)((__u64)buf_list + j * IBV_DATA_BUF_SIZE + IBV_DATA_BUF_LENGTH));
		bytes += len;
	}
	b = batch_of(bpf_get_current_pid_tgid() >> 32, (__u64)qpx);
	w = batch_wr(b);
	if (!w)
		return 0;
	w->send_flags |= SQ_IBV_SEND_INLINE;
	w->bytes = bytes;
	w->num_sge = n;
	w->sge_over = n > max_sges ? (n - max_sges > 255 ? 255 : n - max_sges) : 0;
	note_sge_cut(b, w->sge_over);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(wr_set_sge, void *qpx, __u32 lkey, __u64 addr, __u32 length)
{
	struct sq_wr *w;

	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	w = cur_wr(qpx);
	if (!w)
		return 0;
	w->send_flags &= ~SQ_IBV_SEND_INLINE;
	w->bytes = length;
	w->num_sge = 1;
	w->sge_over = 0;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(wr_set_sge_list, void *qpx, __u64 num_sge, void *sg_list)
{
	struct sq_post_rec *b;
	struct sq_wr *w;
	__u32 n, nonempty = 0, bytes;
	__u8 over = 0;

	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	n = num_sge > 0x7fffffff ? 0x7fffffff : num_sge;
	bytes = sum_sges((__u64)sg_list, (__s32)n, &over, &nonempty);
	b = batch_of(bpf_get_current_pid_tgid() >> 32, (__u64)qpx);
	w = batch_wr(b);
	if (!w)
		return 0;
	w->send_flags &= ~SQ_IBV_SEND_INLINE;
	w->bytes = bytes;
	w->num_sge = n;
	w->sge_over = over;
	note_sge_cut(b, over);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(wr_complete_entry, void *qpx)
{
	struct thread_state *st;

	if (past_cut()) /* decided here, like a post_send */
		return 0;
	st = thread_state(bpf_get_current_pid_tgid(), 1);
	if (st)
		enter(&st->post, (__u64)qpx, 0, 0, 0, SQ_OP_WR_COMPLETE);
	return 0;
}

static __always_inline void end_batch(struct sq_post_rec *b, __u64 id, int ret, int aborted)
{
	__u32 n = b->n, total = b->n + b->truncated;

	b->hdr.kind = 0; /* the batch is over whatever happens below */
	if (n > SQ_MAX_WRS)
		n = SQ_MAX_WRS;
	if (targ_mode == SQ_MODE_COUNTERS) {
		__u32 inline_wrs = 0, signaled = 0, sges = 0, accepted = 0, cut_wrs = 0, not_summed = 0;
		__u64 inline_bytes = 0, payload_bytes = 0;

		if (!ret && !aborted) {
			accepted = total;
			for (__u32 i = 0; i < SQ_MAX_WRS; i++) {
				struct sq_wr *w;

				if (i >= n)
					break;
				w = &b->wrs[i];
				/* Branch-free: the totals are tested later, and a
				 * branch per WR would multiply the verifier's states. */
				__u32 inl = (w->send_flags / SQ_IBV_SEND_INLINE) & 1;
				__u32 sig = (w->send_flags / SQ_IBV_SEND_SIGNALED) & 1;
				/* a READ's or an atomic's SGEs receive its response */
				__u32 out = (1 - inl) * sends_payload(w->opcode);

				inline_wrs += inl;
				inline_bytes += (__u64)w->bytes * inl;
				payload_bytes += (__u64)w->bytes * out;
				/* the wr API gives lengths only in sum: count SGEs
				 * that carry bytes as one each when set_sge */
				sges += nonzero(w->bytes) * (w->num_sge + (1 - nonzero(w->num_sge))) * out;
				signaled += sig;
			}
			if (b->sge_cut) {
				for (__u32 i = 0; i < SQ_MAX_WRS; i++) {
					if (i >= n)
						break;
					cut_wrs += nonzero(b->wrs[i].sge_over);
					not_summed += b->wrs[i].sge_over;
				}
			}
		}
		if (aborted)
			return;
		{
			/* the send-queue model does not follow the wr API: said */
			struct sq_qp_occ *o = occ_of(id >> 32, read_u32(b->qp + IBV_QP_QP_NUM),
						     obj_gen(id >> 32, SQ_OBJ_QP, b->qp), b->qp);

			if (o)
				o->s.flags |= SQ_OCC_WR_API;
		}
		count_post(id >> 32, b->qp, ret, accepted, inline_wrs, signaled, inline_bytes,
			   payload_bytes, sges, cut_wrs, not_summed);
		return;
	}
	b->hdr.ts = bpf_ktime_get_ns();
	b->hdr.pid = id >> 32;
	b->hdr.tid = (__u32)id;
	b->hdr.kind = SQ_REC_POST;
	b->qp_num = read_u32(b->qp + IBV_QP_QP_NUM);
	b->ret = ret;
	b->accepted = (!ret && !aborted) ? total : 0;
	b->aborted = aborted;
	b->walk_capped = 0;
	output(b, rec_size(struct sq_post_rec, wrs, n, SQ_MAX_WRS));
	b->hdr.kind = 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(wr_complete_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct thread_state *st;
	struct call_args *a;
	struct sq_post_rec *b;

	if (!wanted(id >> 32))
		return 0;
	st = thread_state(id, 0);
	if (!st)
		return 0;
	a = leave(&st->post, SQ_OP_WR_COMPLETE);
	if (!a)
		return 0;
	b = batch_of(id >> 32, a->a0);
	if (!b)
		return 0;
	end_batch(b, id, ret, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(wr_abort, void *qpx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sq_post_rec *b;

	if (!wanted(id >> 32) || past_cut())
		return 0;
	b = batch_of(id >> 32, (__u64)qpx);
	if (!b)
		return 0;
	end_batch(b, id, 0, 1);
	return 0;
}

#endif
