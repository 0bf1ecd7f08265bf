/* Part of verbs.bpf.c: record sizes and headers, and how records reach the
 * ring buffer (waking the reader or not, and only while this CPU's slots
 * are still the caller's); also the small helpers every part uses. */
#ifndef SQSCOPE_OUTPUT_BPF_H
#define SQSCOPE_OUTPUT_BPF_H

/* wr_index bounds an index into wrs[] in a way the compiler cannot fold
 * away, so the verifier sees it. */
static __always_inline __u32 wr_index(__u32 i)
{
	asm volatile("%[i] &= %[m]" : [i] "+r"(i) : [m] "i"(SQ_MAX_WRS - 1));
	return i;
}

/* rec_size is the used length of a record with n array entries, clamped
 * so that the verifier sees it within the record. */
#define rec_size(type, field, n, max) ({					\
	__u64 __n = (n);							\
	asm volatile("if %[n] <= %[m] goto +1; %[n] = %[m]"			\
		     : [n] "+r"(__n) : [m] "i"(max));				\
	__builtin_offsetof(type, field) + __n * sizeof(((type *)0)->field[0]);	\
})

/* one_rec_size is the length of a record with one array entry. */
#define one_rec_size(type, field) \
	(__builtin_offsetof(type, field) + sizeof(((type *)0)->field[0]))

/* nonzero is 1 when v != 0, computed without a branch. */
static __always_inline __u32 nonzero(__u32 v)
{
	return ((__u64)v + 0xffffffffULL) >> 32;
}

/* stop_self sends SIGSTOP to the calling process and notes it in
 * stopped_pids; 1 when sent. The hold is taken first: another tracer
 * that stopped the process at the same call continues it only when no
 * hold but its own is left, and this one's must be there by then. */
static __always_inline int stop_self(__u32 tgid)
{
	struct sq_hold_key k = { .pid = tgid, .holder = self_tgid, .tracer = hold_tracer };
	struct sq_hold h = { .holder_start = self_start, .ts = bpf_ktime_get_ns() };
	__u32 zero = 0, *off = bpf_map_lookup_elem(&stops_off, &zero);
	__u8 one = 1;

	if (off && *off)
		return 0; /* the tracer has died */
	bpf_map_update_elem(&sq_holds_v1, &k, &h, BPF_ANY);
	if (bpf_send_signal(SIGSTOP)) {
		bpf_map_delete_elem(&sq_holds_v1, &k);
		return 0;
	}
	bpf_map_update_elem(&stopped_pids, &tgid, &one, BPF_ANY);
	return 1;
}

/* sends_payload is 0 for a READ or an atomic (compare-and-swap,
 * fetch-and-add), whose local SGEs receive the response the HCA writes,
 * and 1 for every other opcode, whose SGEs hold what it reads; computed
 * without a branch. The three are consecutive. */
_Static_assert(SQ_IBV_WR_ATOMIC_CMP_AND_SWP == SQ_IBV_WR_RDMA_READ + 1 &&
	       SQ_IBV_WR_ATOMIC_FETCH_AND_ADD == SQ_IBV_WR_RDMA_READ + 2,
	       "READ and the atomics are consecutive opcodes");
static __always_inline __u32 sends_payload(__u32 op)
{
	__u64 d = (__u64)op - SQ_IBV_WR_RDMA_READ; /* wraps (top bit set) below READ */
	__u64 responds = ((d - 3) >> 63) & (1 - (d >> 63));

	return 1 - (__u32)responds;
}

/* wanted: tgid is traced. The target itself costs a compare; only a
 * followed process (follow mode) costs a lookup of tree. */
static __always_inline int wanted(__u32 tgid)
{
	return !targ_tgid || tgid == targ_tgid || (follow && bpf_map_lookup_elem(&tree, &tgid));
}

/* past_cut: the trace has stopped (see cut in maps.bpf.h); one load. */
static __always_inline int past_cut(void)
{
	return *(volatile __u8 *)&cut;
}

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&lost, &zero);

	if (v)
		*v += 1; /* per-CPU slot: no other writer */
}

static __always_inline void *scratch_buf(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&scratch, &zero);
}

static __always_inline void fill_hdr(struct sq_hdr *h, __u8 kind, __u64 pid_tgid, __u64 entry_ts)
{
	h->ts = bpf_ktime_get_ns();
	h->entry_ts = entry_ts;
	h->pid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->kind = kind;
}

/* output sends a data-path record without waking the reader: user space
 * polls every few milliseconds, and a wakeup per record (an irq_work and a
 * task wakeup) costs more than the probe itself. Past wakeup_bytes of
 * unread data the reader is woken so that it drains before the ring fills.
 * The ring is asked how much is unread at every SQ_WAKE_EVERY-th record of
 * a CPU only: the question is a helper call, and the records between two
 * questions (at most SQ_WAKE_EVERY * sizeof(struct sq_post_rec) bytes per
 * CPU) are far below a quarter of the default rings. */
#define SQ_WAKE_EVERY 16

static __always_inline __u64 wake_flags(void)
{
	__u32 zero = 0;
	__u32 *tick = bpf_map_lookup_elem(&wake_ticks, &zero);

	if (tick && ++*tick % SQ_WAKE_EVERY)
		return BPF_RB_NO_WAKEUP;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									     : BPF_RB_NO_WAKEUP;
}

static __always_inline void output(void *data, __u64 size)
{
	if (bpf_ringbuf_output(&events, data, size, wake_flags()))
		count_lost();
}

/* claim_cpu makes the calling thread (id: pid_tgid) the user of this
 * CPU's slots. */
static __always_inline void claim_cpu(__u64 id)
{
	__u32 zero = 0;
	__u64 *o = bpf_map_lookup_elem(&cpu_owner, &zero);

	if (o)
		*o = id;
}

static __always_inline int cpu_still_mine(__u64 id)
{
	__u32 zero = 0;
	__u64 *o = bpf_map_lookup_elem(&cpu_owner, &zero);

	return o && *o == id;
}

/* output_claimed is output for a record built in this CPU's slots: it is
 * copied into the ring, then published only if no other program took the
 * slots over meanwhile (the copy included). A record of at most small
 * bytes (a constant: the common one-WR post, one-CQE poll) takes a plain
 * reservation of that size, which costs less than a dynptr's. */
static __always_inline int output_claimed(void *data, __u64 size, const __u64 small, __u64 id)
{
	__u64 flags = wake_flags();

	if (size <= small) {
		void *r = bpf_ringbuf_reserve(&events, small, 0);

		if (!r) {
			count_lost();
			return -1;
		}
		/* both 8-aligned (a ring reservation, a map value): said, so
		 * that clang copies words, not bytes */
		__builtin_memcpy(__builtin_assume_aligned(r, 8), __builtin_assume_aligned(data, 8), small);
		if (!cpu_still_mine(id)) {
			bpf_ringbuf_discard(r, 0);
			count_lost();
			return -1;
		}
		bpf_ringbuf_submit(r, flags);
		return 0;
	}

	struct bpf_dynptr p;

	if (bpf_ringbuf_reserve_dynptr(&events, size, 0, &p)) {
		bpf_ringbuf_discard_dynptr(&p, 0);
		count_lost();
		return -1;
	}
	if (bpf_dynptr_write(&p, 0, data, size, 0) || !cpu_still_mine(id)) {
		bpf_ringbuf_discard_dynptr(&p, 0);
		count_lost();
		return -1;
	}
	bpf_ringbuf_submit_dynptr(&p, flags);
	return 0;
}

/* output_now sends a record user space must act on at once (it may have
 * stopped the process, or the process has exited). */
static __always_inline void output_now(void *data, __u64 size)
{
	if (bpf_ringbuf_output(&events, data, size, BPF_RB_FORCE_WAKEUP))
		count_lost();
}

/* proc_joined sends the record of tgid joining; stop asks for it to be
 * stopped (the caller is that process), which is done only once the record
 * that tells user space to continue it is reserved. comm is the task's
 * (NULL: the caller's). */
static __always_inline void proc_joined(__u32 tgid, __u32 parent, __u8 op, const char *comm, int stop)
{
	struct sq_proc_rec *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count_lost();
		return;
	}
	fill_hdr(&r->hdr, SQ_REC_PROC, (__u64)tgid << 32 | tgid, 0);
	r->parent = parent;
	r->op = op;
	r->stopped = 0;
	r->pad[0] = r->pad[1] = 0;
	if (comm)
		bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), comm);
	else
		bpf_get_current_comm(r->comm, sizeof(r->comm));
	if (stop && stop_on_new && tgid != self_tgid && stop_self(tgid))
		r->stopped = 1;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

#endif
