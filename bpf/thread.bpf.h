/* Part of verbs.bpf.c: the calling thread's data-path state (a slot of
 * thread_slots, else task storage or the hash by thread id), a call's
 * arguments from entry to return, and the thread's cached QP numbers. */
#ifndef SQSCOPE_THREAD_BPF_H
#define SQSCOPE_THREAD_BPF_H

/* slot_of is the thread_slots slot of thread tid. */
static __always_inline struct thread_state *slot_of(__u32 tid)
{
	__u32 idx = tid & slot_mask & (SQ_THREAD_SLOTS - 1);

	return use_thread_slots ? bpf_map_lookup_elem(&thread_slots, &idx) : 0;
}

/* fallback_state is thread tid's state outside thread_slots (task is the
 * thread's task_struct for task storage). */
static __always_inline struct thread_state *fallback_state(void *task, __u32 tid, int create)
{
	struct thread_state *st;

	if (have_task_storage)
		return bpf_task_storage_get(&threads, task, 0, create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	st = bpf_map_lookup_elem(&threads_by_tid, &tid);
	if (!st && create) {
		__u32 zero = 0;
		struct thread_state *init = bpf_map_lookup_elem(&thread_zero, &zero);

		if (!init)
			return 0;
		bpf_map_update_elem(&threads_by_tid, &tid, init, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&threads_by_tid, &tid);
	}
	return st;
}

/* thread_state is the calling thread's data-path state; create it on
 * entry, only look it up on return. A thread takes a free slot only if it
 * has no state elsewhere, so its state is never split in two. */
static __always_inline struct thread_state *thread_state(__u64 id, int create)
{
	__u32 tid = (__u32)id;
	struct thread_state *slot = slot_of(tid);
	struct thread_state *st;
	__u32 zero = 0;

	if (slot && slot->owner == tid)
		return slot;
	st = fallback_state(bpf_get_current_task_btf(), tid, 0);
	if (st || !create)
		return st;
	if (slot && !slot->owner && __sync_val_compare_and_swap(&slot->owner, 0, (__u64)tid) == 0) {
		struct thread_state *init = bpf_map_lookup_elem(&thread_zero, &zero);

		/* a former owner's leftovers, all but the owner field; by a
		 * helper, since clang copies at most about 1 KiB inline and
		 * the state with its QP number cache is larger */
		if (init)
			bpf_probe_read_kernel((void *)slot + sizeof(slot->owner), sizeof(*slot) - sizeof(slot->owner),
					      (void *)init + sizeof(init->owner));
		return slot;
	}
	return fallback_state(bpf_get_current_task_btf(), tid, 1);
}

/* enter saves a data-path call's arguments, in place (no map update). */
static __always_inline void enter(struct call_args *c, __u64 a0, __u64 a1, __u64 a2, __u32 a3, __u8 op)
{
	c->a0 = a0;
	c->a1 = a1;
	c->a2 = a2;
	c->a3 = a3;
	c->op = op;
	/* the counters mode has no use for the entry time */
	c->ts = targ_mode == SQ_MODE_EVENTS && call_times ? bpf_ktime_get_ns() : 0;
	c->live = 1;
}

/* leave consumes what enter saved; 0 when there is nothing for op (the
 * entry probe was not in place yet, or the call was not seen). */
static __always_inline struct call_args *leave(struct call_args *c, __u8 op)
{
	if (!c->live || c->op != op)
		return 0;
	c->live = 0;
	return c;
}

/* qp_num_of reads a QP's number, or takes it from the thread's cache: a
 * thread posts to the same few QPs again and again. */
static __always_inline __u32 qp_num_of(struct thread_state *st, __u64 qp)
{
	__u32 gen = qp_gen;
	struct qpn_way *s = qpn_set(st->qpns, qp, SQ_QPN_SET_BITS);
	struct qpn_way *w = qpn_find(s, qp, gen);
	__u32 qpn;

	if (w)
		return w->qpn;
	qpn = read_u32(qp + IBV_QP_QP_NUM);
	qpn_put(s, qp, gen, qpn);
	return qpn;
}

#endif
