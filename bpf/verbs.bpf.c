//go:build ignore

/* sqscope's uprobes on the verbs control and data path.
 *
 * Control path (create/modify/destroy QP, qp_to_qp_ex, alloc_pd): one
 * sq_qp_rec per call, carrying the data-path function pointers the call
 * revealed so user space can attach to them. Data path (post_send, poll_cq,
 * post_recv, the ibv_wr_* batch): one record per call, or, in the counters
 * mode, per-QP and per-CQ totals kept here and no records at all.
 *
 * User memory is read at the ABI offsets of events.h. Every loop over it is
 * bounded; what lies past a bound is counted and reported, never dropped
 * silently.
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "events.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define SIGSTOP 19
#define ENOMEM 12
#define EINVAL 22

/* ---- knobs, set before load -------------------------------------------- */

const volatile __u32 targ_tgid = 0;    /* 0: every process */
const volatile __u32 self_tgid = 0;    /* the tracer: never stopped */
const volatile __u8 stop_on_new = 1;   /* SIGSTOP on unknown data-path fns */
const volatile __u8 targ_mode = SQ_MODE_EVENTS;
const volatile __u32 max_wrs = SQ_MAX_WRS;
const volatile __u32 max_walk = SQ_MAX_WALK;
const volatile __u32 max_sges = SQ_MAX_SGES;
const volatile __u32 max_wcs = SQ_MAX_WCS;
const volatile __u64 wakeup_bytes = 1 << 20; /* unread bytes that wake the reader */
const volatile __u8 have_task_storage = 1; /* 0: per-thread state in a hash */
const volatile __u8 use_thread_slots = 1;  /* 0: no thread_slots (tests of the fallback) */
const volatile __u32 slot_mask = 4095;     /* thread_slots index mask (tests: 0, one slot) */
/* 1: data-path records carry the call's entry time too. A clock read costs
 * about as much as the rest of an entry probe, and under a uprobe the
 * interval measures mostly the probe itself, so it is asked for. */
const volatile __u8 call_times = 0;

/* ---- maps -------------------------------------------------------------- */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* replaced at load by the size knob */
} events SEC(".maps");

/* Failed ring-buffer reservations (records lost), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Data-path function addresses user space has attached to (or gave up on).
 * An address missing here makes a control-path record stop the process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sq_key);
	__type(value, __u8);
} known_fns SEC(".maps");

/* Processes that used the verbs control path: their exit is reported. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} procs SEC(".maps");

struct call_args {
	__u64 a0, a1, a2;
	__u64 ts;
	__u64 sp;  /* counters-mode post_send: the stack pointer at entry */
	__u32 a3;
	__u8 op;
	__u8 via;
	__u8 live;
	__u8 pad;
};

/* Control-path arguments saved at entry for the return probe, per thread.
 * LRU: a thread that dies inside a call must not leak its slot forever. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct call_args);
} ctl_args SEC(".maps");

/* What a thread's data-path probes keep between entry and return. */
struct thread_state {
	__u64 owner; /* in thread_slots: the thread id the slot is for (0: free) */
	struct call_args post; /* post_send (op 0), post_recv (1), wr_complete (2) */
	struct call_args poll;
	/* qp_num of the QP this thread last posted to, while qp_gen is unchanged */
	__u64 qpn_qp;
	__u32 qpn;
	__u32 qpn_gen;
	/* Counts of this thread not yet added to the shared per-CQ and (counters
	 * mode) per-QP maps: a map lookup per call costs more than the rest of
	 * an empty poll's probe. Added when the thread moves to another CQ or
	 * QP, every SQ_PEND_MAX calls, before any record that reports them,
	 * and when the thread exits. */
	__u64 pend_cq;
	__u32 pend_empty;
	__u32 pend_polls;
	__u64 pend_cqes;
	__u64 pend_qp;
	__u32 pend_qpn;
	__u32 pend_calls;
	__u32 pend_wrs;
	__u32 pend_inline;
	__u32 pend_signaled;
	__u32 pend_doorbells;
	__u32 pend_errors;
	__u32 pend_enomem;
	__u32 pend_einval;
	__u32 pend_sges;
	__u32 pend_max_wrs;
	__u32 pad;
	__u64 pend_inline_bytes;
	__u64 pend_payload_bytes;
	/* WRs in this thread's last post_send list: applications post lists
	 * of the same length again and again, so a long last list makes the
	 * walk read in bulk from the first WR on */
	__u32 last_wrs;
	/* Counters mode: what the post in progress added to the pending
	 * counts at its entry, as if every WR would be accepted; a failed
	 * call's return probe takes it back and adds what was accepted. */
	__u32 call_wrs;
	__u32 call_inline;
	__u32 call_signaled;
	__u32 call_sges;
	__u32 call_prev_max; /* pend_max_wrs before the call */
	__u8 call_counted;
	__u8 pad3[3];
	__u64 call_inline_bytes;
	__u64 call_payload_bytes;
};

/* Calls a thread keeps counts of before adding them to the shared maps:
 * user space sees the per-thread remainder late by at most this many calls
 * (and a thread that exits hands it over in proc_exit). */
#define SQ_PEND_MAX 32

#define SQ_OP_POST_SEND   0
#define SQ_OP_POST_RECV   1
#define SQ_OP_WR_COMPLETE 2

/* Task-local storage, for a thread whose thread_slots slot another thread
 * holds: created on the thread's first call and freed with the thread. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} threads SEC(".maps");

/* The same, by thread id, for kernels whose uprobe programs cannot use
 * task storage (have_task_storage = 0). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct thread_state);
} threads_by_tid SEC(".maps");

/* Per-thread state, first choice: a slot indexed by the thread id, found
 * with an array lookup the verifier inlines, a fraction of the cost of
 * task storage. A thread whose slot another live thread holds keeps its
 * state in task storage (or threads_by_tid) instead; a slot is released
 * when its thread exits. */
#define SQ_THREAD_SLOTS 4096

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SQ_THREAD_SLOTS);
	__type(key, __u32);
	__type(value, struct thread_state);
} thread_slots SEC(".maps");

/* A zeroed thread_state, never written: a new entry of threads_by_tid is
 * copied from it, not from the stack (older kernels' verifiers limit a
 * program and the functions it calls to 512 bytes of stack together). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct thread_state);
} thread_zero SEC(".maps");

/* Bumped when a QP is created or destroyed: a cached qp_num is valid only
 * while it is unchanged (a new QP may reuse a freed one's address). */
__u32 qp_gen = 0;

/* ibv_wr_* batch under construction, per (process, qpx). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sq_key);
	__type(value, struct sq_post_rec);
} wr_batches SEC(".maps");

/* Empty polls (both modes), polls and CQEs (counters mode), per CQ. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sq_key);
	__type(value, struct sq_cq_stats);
} cq_stats SEC(".maps");

/* Counters mode: per-QP totals. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sq_key);
	__type(value, struct sq_qp_counters);
} qp_counters SEC(".maps");

/* Records too large for the BPF stack are built here, then copied out
 * at their used length. */
union scratch {
	struct sq_post_rec post;
	struct sq_poll_rec poll;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, union scratch);
} scratch SEC(".maps");

/* Who uses this CPU's scratch, walk and window slots. A uprobe program
 * runs with migration disabled but, on a preemptible kernel, not with
 * preemption disabled: another thread's program may run on the same CPU in
 * the middle of it and reuse the slots. Each data-path return probe claims
 * the CPU first, and a record is published only if the claim still holds
 * once it is in the ring; otherwise it is dropped and counted as lost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} cpu_owner SEC(".maps");

/* Let bpf2go see the record types that only user space decodes. */
const struct sq_qp_rec *unused_qp __attribute__((unused));
const struct sq_recv_rec *unused_recv __attribute__((unused));
const struct sq_exit_rec *unused_exit __attribute__((unused));
const enum sq_rec_kind *unused_kind __attribute__((unused));
const enum sq_qp_op *unused_op __attribute__((unused));
const enum sq_via *unused_via __attribute__((unused));
const enum sq_fn *unused_fn __attribute__((unused));

/* ---- helpers ----------------------------------------------------------- */

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

static __always_inline int wanted(__u32 tgid)
{
	return !targ_tgid || tgid == targ_tgid;
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
 * unread data the reader is woken so that it drains before the ring fills. */
static __always_inline __u64 wake_flags(void)
{
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
		__builtin_memcpy(r, data, small);
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

static __always_inline __u64 read_u64(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

static __always_inline __u32 read_u32(__u64 addr)
{
	__u32 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

static __always_inline void save_args(void *map, __u64 a0, __u64 a1, __u64 a2, __u32 a3, __u8 op, __u8 via)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_args a = {
		.a0 = a0, .a1 = a1, .a2 = a2, .a3 = a3,
		.ts = bpf_ktime_get_ns(), .op = op, .via = via, .live = 1,
	};

	bpf_map_update_elem(map, &tid, &a, BPF_ANY);
}

/* take_args copies and consumes the arguments saved at entry. */
static __always_inline int take_args(void *map, struct call_args *out)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct call_args *a = bpf_map_lookup_elem(map, &tid);

	if (!a || !a->live)
		return -1;
	*out = *a;
	a->live = 0;
	return 0;
}

/* ---- control path ------------------------------------------------------ */

/* read_ops fills the ops-table functions of an ibv_context, and the
 * provider's create_qp_ex when the context is a verbs_context that has one. */
static __always_inline void read_ops(struct sq_qp_rec *r, __u64 ctx)
{
	__u64 ops = ctx + IBV_CONTEXT_OPS;

	if (!ctx)
		return;
	r->fns[SQ_FN_POST_SEND] = read_u64(ops + IBV_OPS_POST_SEND);
	r->fns[SQ_FN_POLL_CQ] = read_u64(ops + IBV_OPS_POLL_CQ);
	r->fns[SQ_FN_POST_RECV] = read_u64(ops + IBV_OPS_POST_RECV);
	if (read_u64(ctx + IBV_CONTEXT_ABI_COMPAT) == VERBS_ABI_IS_EXTENDED &&
	    read_u64(ctx - VERBS_CTX_SZ_BACK) >= VERBS_CTX_CREATE_QP_EX_MIN_SZ)
		r->fns[SQ_FN_CREATE_QP_EX] = read_u64(ctx - VERBS_CTX_CREATE_QP_EX_BACK);
}

/* read_wr_fns fills the ibv_qp_ex function pointers, read in one go. */
static __always_inline void read_wr_fns(struct sq_qp_rec *r, __u64 qpx)
{
	__u64 f[(IBV_QPX_WR_ABORT + 8 - IBV_QPX_WR_RDMA_READ) / 8] = {};

#define QPX_FN(off) f[((off) - IBV_QPX_WR_RDMA_READ) / 8]
	if (bpf_probe_read_user(f, sizeof(f), (void *)(qpx + IBV_QPX_WR_RDMA_READ)))
		return;
	r->fns[SQ_FN_WR_START] = QPX_FN(IBV_QPX_WR_START);
	r->fns[SQ_FN_WR_COMPLETE] = QPX_FN(IBV_QPX_WR_COMPLETE);
	r->fns[SQ_FN_WR_ABORT] = QPX_FN(IBV_QPX_WR_ABORT);
	r->fns[SQ_FN_WR_SEND] = QPX_FN(IBV_QPX_WR_SEND);
	r->fns[SQ_FN_WR_SEND_IMM] = QPX_FN(IBV_QPX_WR_SEND_IMM);
	r->fns[SQ_FN_WR_RDMA_WRITE] = QPX_FN(IBV_QPX_WR_RDMA_WRITE);
	r->fns[SQ_FN_WR_RDMA_WRITE_IMM] = QPX_FN(IBV_QPX_WR_RDMA_WRITE_IMM);
	r->fns[SQ_FN_WR_RDMA_READ] = QPX_FN(IBV_QPX_WR_RDMA_READ);
	r->fns[SQ_FN_WR_SET_INLINE_DATA] = QPX_FN(IBV_QPX_WR_SET_INLINE_DATA);
	r->fns[SQ_FN_WR_SET_INLINE_DATA_LIST] = QPX_FN(IBV_QPX_WR_SET_INLINE_DATA_LIST);
	r->fns[SQ_FN_WR_SET_SGE] = QPX_FN(IBV_QPX_WR_SET_SGE);
	r->fns[SQ_FN_WR_SET_SGE_LIST] = QPX_FN(IBV_QPX_WR_SET_SGE_LIST);
#undef QPX_FN
}

static __always_inline void read_qp(struct sq_qp_rec *r, __u64 qp)
{
	if (!qp)
		return;
	r->qp = qp;
	r->ctx = read_u64(qp + IBV_QP_CONTEXT);
	r->send_cq = read_u64(qp + IBV_QP_SEND_CQ);
	r->recv_cq = read_u64(qp + IBV_QP_RECV_CQ);
	r->qp_num = read_u32(qp + IBV_QP_QP_NUM);
	r->qp_type = read_u32(qp + IBV_QP_QP_TYPE);
	read_ops(r, r->ctx);
}

/* emit_ctl sends a control-path record. If it reveals a data-path function
 * user space has not attached to yet, the process is stopped first: the
 * next thing it does may well be a post through that function, and a uprobe
 * attached after the fact would miss it. User space sends SIGCONT once the
 * probes are in place (the record says so in `stopped`). */
static __always_inline void emit_ctl(struct sq_qp_rec *r, __u64 pid_tgid)
{
	__u32 tgid = pid_tgid >> 32;
	struct sq_key k = { .pid = tgid };
	int unknown = 0;
	__u8 one = 1;

#pragma unroll
	for (int i = 0; i < SQ_FN_COUNT; i++) {
		if (!r->fns[i])
			continue;
		k.addr = r->fns[i];
		if (!bpf_map_lookup_elem(&known_fns, &k))
			unknown = 1;
	}
	bpf_map_update_elem(&procs, &tgid, &one, BPF_ANY);
	/* The record is already reserved: a process is stopped only when the
	 * record that tells user space to continue it is sure to arrive. */
	if (unknown && stop_on_new && tgid != self_tgid && !bpf_send_signal(SIGSTOP))
		r->stopped = 1;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

/* new_ctl reserves a control-path record in the ring and starts it; the
 * caller fills it in and ends with emit_ctl (or submits it itself). */
static __always_inline struct sq_qp_rec *new_ctl(__u64 pid_tgid, __u8 op, __u8 via, __u64 entry_ts)
{
	struct sq_qp_rec *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);

	if (!r) {
		count_lost();
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	fill_hdr(&r->hdr, SQ_REC_QP, pid_tgid, entry_ts);
	r->op = op;
	r->via = via;
	r->state = -1;
	return r;
}

SEC("uprobe")
int BPF_KPROBE(create_qp_entry, void *pd, void *attr)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)pd, (__u64)attr, 0, 0, SQ_QP_CREATE, bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(create_qp_ex_entry, void *context, void *attr_ex)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)context, (__u64)attr_ex, 0, 0, SQ_QP_CREATE_EX, bpf_get_attach_cookie(ctx));
	return 0;
}

/* Shared by both create flavours: the init attrs share their prefix, and
 * the provider has rewritten attr->cap with what the QP really got. */
SEC("uretprobe")
int BPF_KRETPROBE(create_qp_ret, void *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct sq_qp_rec *r;
	__u64 qp = (__u64)ret;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a))
		return 0;
	if (!qp || (a.op != SQ_QP_CREATE && a.op != SQ_QP_CREATE_EX))
		return 0;
	__sync_fetch_and_add(&qp_gen, 1);
	r = new_ctl(id, a.op, a.via, a.ts);
	if (!r)
		return 0;
	read_qp(r, qp);
	bpf_probe_read_user(&r->caps, sizeof(r->caps), (void *)(a.a1 + IBV_QP_INIT_ATTR_CAP));
	r->sig_all = read_u32(a.a1 + IBV_QP_INIT_ATTR_SQ_SIG_ALL);
	emit_ctl(r, id);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(qp_to_qp_ex_ret, void *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sq_qp_rec *r;
	__u64 qpx = (__u64)ret;

	if (!wanted(id >> 32) || !qpx)
		return 0;
	r = new_ctl(id, SQ_QP_TO_QP_EX, bpf_get_attach_cookie(ctx), 0);
	if (!r)
		return 0;
	read_qp(r, qpx); /* qp_base is at offset 0 */
	read_wr_fns(r, qpx);
	emit_ctl(r, id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(modify_qp_entry, void *qp, void *attr, int mask)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)qp, (__u64)attr, 0, (__u32)mask, SQ_QP_MODIFY, bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(modify_qp_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct sq_qp_rec *r;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a) || a.op != SQ_QP_MODIFY)
		return 0;
	r = new_ctl(id, SQ_QP_MODIFY, a.via, a.ts);
	if (!r)
		return 0;
	read_qp(r, a.a0);
	r->ret = ret;
	r->mask = a.a3;
	if (a.a3 & SQ_IBV_QP_STATE_MASK)
		r->state = (__s32)read_u32(a.a1 + IBV_QP_ATTR_QP_STATE);
	emit_ctl(r, id);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(destroy_qp_entry, void *qp)
{
	__u64 q = (__u64)qp;

	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	/* the QP is freed by the call: read its number now */
	save_args(&ctl_args, q, 0, 0, q ? read_u32(q + IBV_QP_QP_NUM) : 0, SQ_QP_DESTROY,
		  bpf_get_attach_cookie(ctx));
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(destroy_qp_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct sq_qp_rec *r;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a) || a.op != SQ_QP_DESTROY)
		return 0;
	__sync_fetch_and_add(&qp_gen, 1);
	r = new_ctl(id, SQ_QP_DESTROY, a.via, a.ts);
	if (!r)
		return 0;
	r->qp = a.a0;
	r->qp_num = a.a3;
	r->ret = ret;
	bpf_ringbuf_submit(r, 0); /* reveals nothing: no stop */
	return 0;
}

/* A protection domain is allocated before any QP: its context already
 * shows the data-path functions, so the probes can be in place before the
 * first QP exists. */
SEC("uretprobe")
int BPF_KRETPROBE(alloc_pd_ret, void *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sq_qp_rec *r;
	__u64 pd = (__u64)ret;

	if (!wanted(id >> 32) || !pd)
		return 0;
	r = new_ctl(id, SQ_QP_ALLOC_PD, bpf_get_attach_cookie(ctx), 0);
	if (!r)
		return 0;
	r->ctx = read_u64(pd + IBV_PD_CONTEXT);
	r->qp = r->ctx;
	read_ops(r, r->ctx);
	emit_ctl(r, id);
	return 0;
}

/* ---- per-thread state and user-memory windows ----------------------------- */

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

		/* a former owner's leftovers, all but the owner field */
		if (init)
			__builtin_memcpy((void *)slot + sizeof(slot->owner), (void *)init + sizeof(init->owner),
					 sizeof(*slot) - sizeof(slot->owner));
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
 * thread usually posts to the same QP again and again. */
static __always_inline __u32 qp_num_of(struct thread_state *st, __u64 qp)
{
	__u32 gen = qp_gen;

	if (st->qpn_qp != qp || st->qpn_gen != gen) {
		st->qpn = read_u32(qp + IBV_QP_QP_NUM);
		st->qpn_qp = qp;
		st->qpn_gen = gen;
	}
	return st->qpn;
}

/* One bpf_probe_read_user costs about as much as copying a few hundred
 * bytes, so user memory is read through windows: the first miss of a call
 * reads exactly what is needed (a one-WR post stays at one read per
 * object), later misses read SQ_WIN bytes at once, which covers the WR and
 * SGE arrays applications post from in one or two reads. */
#define SQ_WIN       2048
#define SQ_WIN_SLACK 256   /* reads at offsets < SQ_WIN may run this far past it */
#define SQ_PAGE      4096

struct uwin {
	__u8 b[SQ_WIN + SQ_WIN_SLACK];
};

struct windows {
	struct uwin wr;  /* over the WR list */
	struct uwin sge; /* over SGE arrays (and completions) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct windows);
} windows SEC(".maps");

struct win {
	__u64 base;  /* user address of b[0] */
	__u32 len;   /* bytes valid (0: empty) */
	__u8 missed;      /* read in bulk on a miss; a flag, not a count: the verifier's states must converge */
	__u8 bulk_failed;
};

/* clamp_len bounds a read size for the verifier: 1..max. */
#define clamp_len(val, bound) ({					\
	__u64 __v = (val);						\
	asm volatile("if %[v] <= %[m] goto +1; %[v] = %[m]"		\
		     : [v] "+r"(__v) : [m] "i"(bound));			\
	asm volatile("if %[v] > 0 goto +1; %[v] = 1" : [v] "+r"(__v));	\
	__v;								\
})

/* win_fill reads [addr, addr+len) into the window, and more when the
 * window missed before. A global function: the verifier checks it once,
 * not once per WR of the unrolled walk. */
__noinline long win_fill(struct uwin *u, struct win *w, __u64 addr, __u32 len)
{
	__u64 size;

	if (!u || !w)
		return -1;
	if (w->missed && !w->bulk_failed) {
		/* A bulk read faults when the window runs into an unmapped
		 * page: then read up to the end of this page instead. */
		size = SQ_WIN;
		if (!bpf_probe_read_user(u->b, SQ_WIN, (void *)addr))
			goto done;
		w->bulk_failed = 1;
		size = SQ_PAGE - (addr & (SQ_PAGE - 1));
		if (size < len)
			size = len;
		size = clamp_len(size, SQ_WIN);
		if (!bpf_probe_read_user(u->b, size, (void *)addr))
			goto done;
	}
	size = clamp_len(len, SQ_WIN_SLACK);
	if (bpf_probe_read_user(u->b, size, (void *)addr)) {
		w->len = 0;
		return -1;
	}
done:
	w->missed = 1;
	w->base = addr;
	w->len = size;
	return 0;
}

/* win_off returns the offset in b of [addr, addr+len), reading it in
 * first when the window does not hold it, or -1 when it is unreadable.
 * len must be at most SQ_WIN_SLACK. */
static __always_inline long win_off(struct uwin *u, struct win *w, __u64 addr, __u32 len)
{
	__u64 off = addr - w->base;

	if (addr >= w->base && off < SQ_WIN && off + len <= w->len)
		return off;
	return win_fill(u, w, addr, len) ? -1 : 0;
}

/* win_ptr bounds an offset from win_off for the verifier. */
static __always_inline void *win_ptr(struct uwin *u, long off)
{
	__u64 o = off;

	asm volatile("%[o] &= %[m]" : [o] "+r"(o) : [m] "i"(SQ_WIN - 1));
	return &u->b[o];
}

/* ---- ibv_post_send ------------------------------------------------------ */

struct wr_head {
	__u64 wr_id;
	__u64 next;
	__u64 sg_list;
	__s32 num_sge;
	__u32 opcode;
	__u32 send_flags;
	__u32 pad;
};

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
	__u32 inline_wrs, signaled, payload_sges, pad2;
	__u64 inline_bytes, payload_bytes;
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

/* note_wr puts one walked WR in the record (events) or in the totals of
 * the accepted WRs (counters), and moves on. The totals are branch-free:
 * a branch per WR multiplies the states the verifier walks. */
static __always_inline void note_wr(struct walk *w, __u32 idx, struct wr_head *h, __u32 bytes,
				    __u32 nonempty, __u8 over)
{
	if (targ_mode == SQ_MODE_EVENTS) {
		struct sq_post_rec *r = scratch_buf();

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

		w->inline_wrs += inl;
		w->inline_bytes += (__u64)bytes * inl;
		w->payload_bytes += (__u64)bytes * (1 - inl);
		/* SGEs past the bound are assumed non-empty */
		w->payload_sges += (nonempty + over) * (1 - inl);
		w->signaled += (h->send_flags / SQ_IBV_SEND_SIGNALED) & 1;
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
			__builtin_memcpy(&h, win_ptr(&ws->wr, off), sizeof(h));
		}
		if (h.num_sge > 1 || h.num_sge < 0)
			return;
		if (w->failed && w->cur == w->bad && !w->found_bad) {
			w->accepted = i;
			w->found_bad = 1;
		}
		if (h.num_sge == 1 && i == 0 && !w->sge.missed) {
			struct {
				__u64 addr;
				__u32 length;
				__u32 lkey;
			} sge;

			if (!bpf_probe_read_user(&sge, sizeof(sge), (void *)h.sg_list))
				bytes = sge.length;
			w->sge.missed = 1;
		} else if (h.num_sge == 1) {
			off = win_off(&ws->sge, &w->sge, h.sg_list, IBV_SGE_SIZE);
			if (off >= 0)
				bytes = *(__u32 *)(win_ptr(&ws->sge, off) + IBV_SGE_LENGTH);
		}
		note_wr(w, i, &h, bytes, nonzero(bytes), 0);
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
	__builtin_memcpy(&h, win_ptr(&ws->wr, off), sizeof(h));
	if (targ_mode == SQ_MODE_EVENTS && idx >= max_wrs) {
		/* past the record bound: only count it */
		w->cur = h.next;
		w->i = idx + 1;
		return 0;
	}
	bytes = sges_from(&ws->sge, &w->sge, h.sg_list, h.num_sge, &over, &nonempty);
	note_wr(w, idx, &h, bytes, nonempty, over);
	return 0;
}

/* qp_counters_of finds a QP's totals, creating them with qpn (or, when
 * qpn is SQ_QPN_READ, the number read from the QP). */
#define SQ_QPN_READ 0xffffffffU

static __always_inline struct sq_qp_counters *qp_counters_of(__u32 tgid, __u64 qp, __u32 qpn)
{
	struct sq_key k = { .pid = tgid, .addr = qp };
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
				       __u64 payload_bytes, __u32 payload_sges)
{
	struct sq_qp_counters *c = qp_counters_of(tgid, qp, SQ_QPN_READ);

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
	if (ret) {
		__sync_fetch_and_add(&c->errors, 1);
		if (ret == ENOMEM)
			__sync_fetch_and_add(&c->enomem, 1);
		else if (ret == EINVAL)
			__sync_fetch_and_add(&c->einval, 1);
	}
}

/* flush_posts adds the thread's pending counters-mode totals to its QP's. */
static __always_inline void flush_posts(struct thread_state *st, __u32 tgid)
{
	struct sq_qp_counters *c;

	if (!st->pend_calls)
		return;
	c = qp_counters_of(tgid, st->pend_qp, st->pend_qpn);
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
 * failed call's return probe corrects what its entry added. */
static __always_inline void pend_call(struct thread_state *st, __u32 tgid, __u64 qp)
{
	if (st->pend_qp != qp || !st->pend_calls || st->pend_calls >= SQ_PEND_MAX) {
		flush_posts(st, tgid);
		st->pend_qp = qp;
		st->pend_qpn = qp_num_of(st, qp);
	}
	st->call_prev_max = st->pend_max_wrs;
	st->pend_calls++;
	add_call(st);
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
	__builtin_memset(w, 0, sizeof(*w));
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
	struct {
		__u64 addr;
		__u32 length;
		__u32 lkey;
	} sge = {};

	if (bpf_probe_read_user(h, sizeof(*h), (void *)wr) || h->next || h->num_sge < 0 || h->num_sge > 1 ||
	    !max_sges)
		return -1;
	if (h->num_sge && bpf_probe_read_user(&sge, sizeof(sge), (void *)h->sg_list))
		sge.length = 0; /* unreadable: as the walk does */
	*bytes = sge.length;
	return 0;
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
	st->call_payload_bytes = (__u64)bytes * (1 - inl);
	st->call_sges = nonzero(bytes) * (1 - inl);
	st->call_signaled = (h.send_flags / SQ_IBV_SEND_SIGNALED) & 1;
	return 0;
}

/* The counters mode counts a post at its entry, as if every WR will be
 * accepted: the return probe of a successful call then has nothing to do,
 * not even find the thread's state. A failed call's return probe walks
 * the list again and puts what was accepted in place of the guess. */
static __always_inline void count_entry(struct thread_state *st, __u64 id, __u64 qp)
{
	struct walk *w;

	st->call_counted = 0;
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
	}
	pend_call(st, id >> 32, qp);
	st->call_counted = 1;
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

/* The uprobes are attached for the traced process only: entry probes do
 * not check the PID again (return probes do, for the header anyway). */
SEC("uprobe")
int BPF_KPROBE(post_send_entry, void *qp, void *wr, void *bad_wr)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct thread_state *st = thread_state(id, 1);

	if (!st)
		return 0;
	enter(&st->post, (__u64)qp, (__u64)wr, (__u64)bad_wr, 0, SQ_OP_POST_SEND);
	if (targ_mode == SQ_MODE_COUNTERS) {
		st->post.sp = PT_REGS_SP(ctx);
		count_entry(st, id, (__u64)qp);
	}
	return 0;
}

/* post_send_failed is the counters mode's return probe of a failed call. */
static __always_inline void post_send_failed(struct pt_regs *ctx, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct thread_state *st;
	struct call_args *a;
	struct walk *w;

	if (!wanted(id >> 32))
		return;
	st = thread_state(id, 0);
	if (!st)
		return;
	a = leave(&st->post, SQ_OP_POST_SEND);
	/* a successful call leaves its arguments behind: only the frame the
	 * entry saw (its return address popped) makes them this call's */
	if (!a || !st->call_counted || a->sp + 8 != PT_REGS_SP(ctx))
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
	st->pend_errors++;
	if (ret == ENOMEM)
		st->pend_enomem++;
	else if (ret == EINVAL)
		st->pend_einval++;
}

/* post_one records a successful post read_one_wr can take straight into
 * the ring; -1, having recorded nothing, for any other post. */
static __always_inline int post_one(struct thread_state *st, struct call_args *a, __u64 id)
{
	struct wr_head h;
	struct sq_post_rec *r;
	__u32 bytes;

	if (!max_wrs || read_one_wr(a->a1, &h, &bytes))
		return -1;
	st->last_wrs = 1;
	r = bpf_ringbuf_reserve(&events, one_rec_size(struct sq_post_rec, wrs), 0);
	if (!r) {
		count_lost();
		return 0;
	}
	__builtin_memset(r, 0, one_rec_size(struct sq_post_rec, wrs));
	fill_hdr(&r->hdr, SQ_REC_POST, id, a->ts);
	r->qp = a->a0;
	r->qp_num = qp_num_of(st, a->a0);
	r->n = 1;
	r->accepted = 1;
	r->api = SQ_API_POST_SEND;
	r->wrs[0].wr_id = h.wr_id;
	r->wrs[0].send_flags = h.send_flags;
	r->wrs[0].bytes = bytes;
	r->wrs[0].num_sge = h.num_sge;
	r->wrs[0].opcode = h.opcode;
	bpf_ringbuf_submit(r, wake_flags());
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(post_send_ret, int ret)
{
	__u64 id;
	struct thread_state *st;
	struct call_args *a;
	struct walk *w;
	__u32 n, total;

	if (targ_mode == SQ_MODE_COUNTERS) {
		if (ret) /* success was counted at entry */
			post_send_failed(ctx, ret);
		return 0;
	}
	id = bpf_get_current_pid_tgid();
	if (!wanted(id >> 32))
		return 0;
	st = thread_state(id, 0);
	if (!st)
		return 0;
	a = leave(&st->post, SQ_OP_POST_SEND);
	if (!a)
		return 0;
	if (!ret && st->last_wrs <= 1 && !post_one(st, a, id))
		return 0;
	claim_cpu(id);
	w = walk_post(st, a->a1, ret != 0, ret ? read_u64(a->a2) : 0);
	if (!w)
		return 0;
	total = w->i;

	struct sq_post_rec *r = scratch_buf();

	if (!r)
		return 0;
	n = total < max_wrs ? total : max_wrs;
	if (n > SQ_MAX_WRS)
		n = SQ_MAX_WRS;
	fill_hdr(&r->hdr, SQ_REC_POST, id, a->ts);
	r->qp = a->a0;
	r->qp_num = qp_num_of(st, a->a0);
	r->ret = ret;
	r->n = n;
	r->truncated = total - n;
	r->accepted = w->accepted;
	r->api = SQ_API_POST_SEND;
	r->aborted = 0;
	r->walk_capped = !w->ended && w->cur;
	output_claimed(r, rec_size(struct sq_post_rec, wrs, n, SQ_MAX_WRS), one_rec_size(struct sq_post_rec, wrs), id);
	return 0;
}

/* ---- ibv_poll_cq -------------------------------------------------------- */

SEC("uprobe")
int BPF_KPROBE(poll_cq_entry, void *cq, int num_entries, void *wc)
{
	struct thread_state *st = thread_state(bpf_get_current_pid_tgid(), 1);

	if (st)
		enter(&st->poll, (__u64)cq, (__u64)wc, 0, (__u32)num_entries, 0);
	return 0;
}

static __always_inline struct sq_cq_stats *cq_stats_of(__u32 tgid, __u64 cq)
{
	struct sq_key k = { .pid = tgid, .addr = cq };
	struct sq_cq_stats *s = bpf_map_lookup_elem(&cq_stats, &k);

	if (!s) {
		struct sq_cq_stats init = {};

		bpf_map_update_elem(&cq_stats, &k, &init, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&cq_stats, &k);
	}
	return s;
}

/* flush_polls adds the thread's pending poll counts to its CQ's stats. */
static __always_inline void flush_polls(struct thread_state *st, __u32 tgid)
{
	struct sq_cq_stats *s;

	if (!st->pend_empty && !st->pend_polls)
		return;
	s = cq_stats_of(tgid, st->pend_cq);
	if (s) {
		if (st->pend_empty)
			__sync_fetch_and_add(&s->empty, st->pend_empty);
		if (st->pend_polls)
			__sync_fetch_and_add(&s->polls, st->pend_polls);
		if (st->pend_cqes)
			__sync_fetch_and_add(&s->cqes, st->pend_cqes);
	}
	st->pend_empty = 0;
	st->pend_polls = 0;
	st->pend_cqes = 0;
}

struct wc_head {
	__u64 wr_id;
	__u32 status;
	__u32 opcode;
	__u32 vendor_err;
	__u32 byte_len;
	__u32 imm_data;
	__u32 qp_num;
};

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
	if (!a)
		return 0;
	/* Empty polls are the most frequent call of a busy poller: a count
	 * here, carried by the next record or flushed by user space. */
	if (st->pend_cq != a->a0) {
		flush_polls(st, tgid);
		st->pend_cq = a->a0;
	}
	if (ret == 0)
		st->pend_empty++;
	if (targ_mode == SQ_MODE_COUNTERS) {
		st->pend_polls++;
		if (ret > 0)
			st->pend_cqes += ret;
	}
	if (ret == 0 || targ_mode == SQ_MODE_COUNTERS) {
		if (st->pend_empty + st->pend_polls >= SQ_PEND_MAX)
			flush_polls(st, tgid);
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
		__builtin_memcpy(&h, &ws->sge.b[i * IBV_WC_SIZE], sizeof(h));
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

/* ---- ibv_post_recv ------------------------------------------------------ */

SEC("uprobe")
int BPF_KPROBE(post_recv_entry, void *qp, void *wr, void *bad_wr)
{
	struct thread_state *st;

	if (targ_mode == SQ_MODE_COUNTERS)
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
	fill_hdr(&r.hdr, SQ_REC_RECV, id, a->ts);
	r.qp = a->a0;
	r.qp_num = qp_num_of(st, a->a0);
	r.n = w.i;
	r.ret = ret;
	r.accepted = ret ? (w.found_bad ? w.accepted : 0) : w.i;
	output(&r, sizeof(r));
	return 0;
}

/* ---- ibv_wr_* ----------------------------------------------------------- */

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
	return 0;
}

/* One program for every opcode call; the attach cookie is the opcode. */
SEC("uprobe")
int BPF_KPROBE(wr_opcode, void *qpx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct sq_post_rec *b;
	struct {
		__u64 wr_id;
		__u32 wr_flags;
	} f = {};
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
	bpf_probe_read_user(&f, 12, (void *)((__u64)qpx + IBV_QPX_WR_ID));
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

/* cur_wr is the WR the set_* calls apply to: the last one begun, unless it
 * fell past the bound. */
static __always_inline struct sq_wr *cur_wr(void *qpx)
{
	struct sq_post_rec *b = batch_of(bpf_get_current_pid_tgid() >> 32, (__u64)qpx);
	__u32 i;

	if (!b || b->truncated || !b->n)
		return 0;
	i = b->n - 1;
	if (i >= SQ_MAX_WRS)
		return 0;
	return &b->wrs[wr_index(i)];
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
	w = cur_wr(qpx);
	if (!w)
		return 0;
	w->send_flags |= SQ_IBV_SEND_INLINE;
	w->bytes = bytes;
	w->num_sge = n;
	w->sge_over = n > max_sges ? (n - max_sges > 255 ? 255 : n - max_sges) : 0;
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
	struct sq_wr *w;
	__u32 n, nonempty = 0, bytes;
	__u8 over = 0;

	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	n = num_sge > 0x7fffffff ? 0x7fffffff : num_sge;
	bytes = sum_sges((__u64)sg_list, (__s32)n, &over, &nonempty);
	w = cur_wr(qpx);
	if (!w)
		return 0;
	w->send_flags &= ~SQ_IBV_SEND_INLINE;
	w->bytes = bytes;
	w->num_sge = n;
	w->sge_over = over;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(wr_complete_entry, void *qpx)
{
	struct thread_state *st = thread_state(bpf_get_current_pid_tgid(), 1);

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
		__u32 inline_wrs = 0, signaled = 0, sges = 0, accepted = 0;
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

				inline_wrs += inl;
				inline_bytes += (__u64)w->bytes * inl;
				payload_bytes += (__u64)w->bytes * (1 - inl);
				/* the wr API gives lengths only in sum: count SGEs
				 * that carry bytes as one each when set_sge */
				sges += nonzero(w->bytes) * (w->num_sge + (1 - nonzero(w->num_sge))) * (1 - inl);
				signaled += sig;
			}
		}
		if (aborted)
			return;
		count_post(id >> 32, b->qp, ret, accepted, inline_wrs, signaled, inline_bytes,
			   payload_bytes, sges);
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

	if (!wanted(id >> 32))
		return 0;
	b = batch_of(id >> 32, (__u64)qpx);
	if (!b)
		return 0;
	end_batch(b, id, 0, 1);
	return 0;
}

/* ---- process exit ------------------------------------------------------- */

struct signal_struct___sq {
	struct {
		int counter;
	} live;
} __attribute__((preserve_access_index));

struct task_struct___sq {
	int exit_code;
	int pid;
	int tgid;
	struct signal_struct___sq *signal;
} __attribute__((preserve_access_index));

SEC("raw_tracepoint/sched_process_exit")
int proc_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct task_struct___sq *task = (void *)bpf_get_current_task();
	struct thread_state *st = thread_state(id, 0);
	struct sq_exit_rec r = {};

	/* every exiting thread hands over its pending counts, then its slot */
	if (st) {
		__u32 tid = (__u32)id;

		flush_polls(st, tgid);
		flush_posts(st, tgid);
		if (st->owner == tid)
			st->owner = 0;
		else if (!have_task_storage)
			bpf_map_delete_elem(&threads_by_tid, &tid);
	}
	if (targ_tgid ? tgid != targ_tgid : !bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	/* the last thread of the group decremented live before this point */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	bpf_map_delete_elem(&procs, &tgid);
	fill_hdr(&r.hdr, SQ_REC_EXIT, id, 0);
	r.exit_code = BPF_CORE_READ(task, exit_code);
	output_now(&r, sizeof(r));
	return 0;
}

/* ---- hand-over when detaching ------------------------------------------- */

struct bpf_iter__task___sq {
	void *meta;
	struct task_struct___sq *task;
} __attribute__((preserve_access_index));

/* hand_over runs once over every thread when user space detaches from a
 * target that keeps running: the counts its threads keep pending (up to
 * SQ_PEND_MAX calls each) go to the shared maps user space reads last.
 * The data-path probes are gone by then, so nothing adds to them. */
SEC("iter/task")
int hand_over(struct bpf_iter__task___sq *ctx)
{
	struct task_struct___sq *task = ctx->task;
	struct thread_state *st;
	__u32 tgid, tid;

	if (!task)
		return 0;
	tgid = task->tgid;
	if (!wanted(tgid))
		return 0;
	tid = task->pid;
	st = slot_of(tid);
	if (!st || st->owner != tid)
		st = fallback_state(task, tid, 0);
	if (st) {
		flush_polls(st, tgid);
		flush_posts(st, tgid);
	}
	return 0;
}
