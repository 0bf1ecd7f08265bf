/* Part of verbs.bpf.c: the lives of CQs and SRQs. A CQ's create
 * (ibv_create_cq, ibv_create_cq_ex and the simulated HCA's, in
 * cq_control.bpf.h) ends with cq_born, which gives the CQ its generation
 * and a fresh entry in cq_stats, so that the polls of a CQ created at a
 * freed CQ's address are never added to the old one's; ibv_create_srq and
 * ibv_destroy_srq do the same for SRQs. Each sends one sq_obj_rec. */
#ifndef SQSCOPE_LIFECYCLE_BPF_H
#define SQSCOPE_LIFECYCLE_BPF_H

/* call_args.op of the calls below (apart from enum sq_qp_op) */
#define SQ_CTL_SRQ_CREATE  32
#define SQ_CTL_SRQ_DESTROY 33

/* new_obj reserves and starts a lifecycle record; 0 (counted lost) when
 * the ring is full. */
static __always_inline struct sq_obj_rec *new_obj(__u64 id, __u8 type, __u8 op, __u8 via, __u64 addr, __u32 gen)
{
	struct sq_obj_rec *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count_lost();
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, SQ_REC_OBJ, id, 0);
	r->addr = addr;
	r->gen = gen;
	r->type = type;
	r->op = op;
	r->via = via;
	return r;
}

/* cq_seq_raise makes gen the newest CQ generation, unless a newer one is
 * (creates racing on every try of the bounded compare-and-swap leave it
 * lower: threads then hand their pending polls over once more). */
static __always_inline void cq_seq_raise(__u64 gen)
{
	__u64 seen = cq_seq, was;

	for (int i = 0; i < 16 && seen < gen; i++) {
		was = __sync_val_compare_and_swap(&cq_seq, seen, gen);
		if (was == seen)
			break;
		seen = was;
	}
}

/* cq_born starts the life of a new CQ: the counts of the CQ that held its
 * address before (the creating thread's pending ones included) go to user
 * space in the record, with that CQ's generation, and the address starts
 * over; counts other threads still keep pending of the old CQ follow it
 * (flush_polls). Every call that creates a CQ ends with it. */
static __always_inline void cq_born(__u64 id, __u64 cq, __u8 via)
{
	__u32 tgid = id >> 32;
	struct sq_key k = { .pid = tgid, .addr = cq };
	struct sq_cq_stats fresh = {}, *old;
	struct thread_state *st;
	struct sq_obj_rec *r;

	st = thread_state(id, 0);
	if (st && st->pend_cq == cq)
		flush_polls(st, tgid);
	fresh.gen = obj_born(tgid, SQ_OBJ_CQ, cq, 0);
	r = new_obj(id, SQ_OBJ_CQ, SQ_OBJ_CREATE, via, cq, fresh.gen);
	old = bpf_map_lookup_elem(&cq_stats, &k);
	if (old) {
		fresh.prev_gen = old->gen;
		if (r)
			r->prev = *old;
	}
	if (r)
		r->size = read_u32(cq + IBV_CQ_CQE);
	bpf_map_update_elem(&cq_stats, &k, &fresh, BPF_ANY);
	cq_seq_raise(fresh.gen);
	if (r)
		bpf_ringbuf_submit(r, 0);
}

SEC("uprobe")
int BPF_KPROBE(create_srq_entry, void *pd, void *attr)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)pd, (__u64)attr, 0, 0, SQ_CTL_SRQ_CREATE, bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(create_srq_ret, void *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 srq = (__u64)ret;
	struct call_args a;
	struct sq_obj_rec *r;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a) || a.op != SQ_CTL_SRQ_CREATE || !srq)
		return 0;
	r = new_obj(id, SQ_OBJ_SRQ, SQ_OBJ_CREATE, a.via, srq, obj_born(id >> 32, SQ_OBJ_SRQ, srq, 0));
	if (!r)
		return 0;
	/* the provider has written what the SRQ really got */
	r->size = read_u32(a.a1 + IBV_SRQ_INIT_ATTR_MAX_WR);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(destroy_srq_entry, void *srq)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!wanted(tgid))
		return 0;
	save_args(&ctl_args, (__u64)srq, 0, obj_gen(tgid, SQ_OBJ_SRQ, (__u64)srq), 0, SQ_CTL_SRQ_DESTROY,
		  bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(destroy_srq_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct sq_obj_rec *r;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a) || a.op != SQ_CTL_SRQ_DESTROY)
		return 0;
	if (ret == 0)
		obj_died(id >> 32, SQ_OBJ_SRQ, a.a0, (__u32)a.a2);
	r = new_obj(id, SQ_OBJ_SRQ, SQ_OBJ_DESTROY, a.via, a.a0, (__u32)a.a2);
	if (!r)
		return 0;
	r->ret = ret;
	bpf_ringbuf_submit(r, 0);
	return 0;
}

#endif
