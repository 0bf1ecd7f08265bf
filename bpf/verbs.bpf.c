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
	__u32 a3;
	__u8 op;
	__u8 via;
	__u8 live;
	__u8 pad;
};

/* Arguments saved at entry for the return probe, per thread. LRU: a thread
 * that dies inside a call must not leak its slot forever. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct call_args);
} post_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct call_args);
} poll_args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct call_args);
} ctl_args SEC(".maps");

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
 * with bpf_ringbuf_output at their used length. Uprobe programs run with
 * preemption disabled, so one slot per CPU is enough. */
union scratch {
	struct sq_post_rec post;
	struct sq_poll_rec poll;
	struct sq_qp_rec qp;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, union scratch);
} scratch SEC(".maps");

/* Let bpf2go see the record types that only user space decodes. */
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
static __always_inline void output(void *data, __u64 size)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&events, data, size, flags))
		count_lost();
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
	struct sq_qp_rec *out;
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
	/* Reserve first: a process is stopped only when the record that tells
	 * user space to continue it is sure to arrive. */
	out = bpf_ringbuf_reserve(&events, sizeof(*out), 0);
	if (!out) {
		count_lost();
		return;
	}
	if (unknown && stop_on_new && tgid != self_tgid && !bpf_send_signal(SIGSTOP))
		r->stopped = 1;
	__builtin_memcpy(out, r, sizeof(*out));
	bpf_ringbuf_submit(out, BPF_RB_FORCE_WAKEUP);
}

static __always_inline struct sq_qp_rec *new_ctl(__u64 pid_tgid, __u8 op, __u8 via, __u64 entry_ts)
{
	struct sq_qp_rec *r = scratch_buf();

	if (!r)
		return 0;
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
	r = new_ctl(id, SQ_QP_DESTROY, a.via, a.ts);
	if (!r)
		return 0;
	r->qp = a.a0;
	r->qp_num = a.a3;
	r->ret = ret;
	output(r, sizeof(*r)); /* reveals nothing: no stop */
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

/* ---- ibv_post_send ------------------------------------------------------ */

SEC("uprobe")
int BPF_KPROBE(post_send_entry, void *qp, void *wr, void *bad_wr)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&post_args, (__u64)qp, (__u64)wr, (__u64)bad_wr, 0, 0, 0);
	return 0;
}

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
	__u32 accepted;
	__u8 failed;     /* ret != 0 */
	__u8 found_bad;
	__u8 ended;      /* reached the end of the list (or unreadable memory) */
	__u8 pad;
	/* counters mode: totals over the accepted WRs */
	__u32 inline_wrs, signaled, payload_sges, pad2;
	__u64 inline_bytes, payload_bytes;
};

/* sum_sges adds up the SGE lengths of one WR (the first max_sges of them)
 * and says how many it could not look at. */
static __always_inline __u32 sum_sges(__u64 sg_list, __s32 num_sge, __u8 *over, __u32 *nonempty)
{
	__u32 bytes = 0, n = 0;
	__u32 want = num_sge > 0 ? (__u32)num_sge : 0;

	for (__u32 j = 0; j < SQ_MAX_SGES; j++) {
		__u32 len = 0;

		if (j >= want || j >= max_sges)
			break;
		bpf_probe_read_user(&len, sizeof(len), (void *)(sg_list + j * IBV_SGE_SIZE + IBV_SGE_LENGTH));
		bytes += len;
		if (len)
			n++;
	}
	*nonempty = n;
	if (want > max_sges)
		*over = want - max_sges > 255 ? 255 : want - max_sges;
	else
		*over = 0;
	return bytes;
}

/* walk_wr is the bpf_loop body over a send WR list. It decides with idx,
 * which the verifier treats as unknown, never with a counter kept in w:
 * that keeps the callback's states converging. */
static long walk_wr(__u32 idx, struct walk *w)
{
	struct wr_head h;
	__u32 nonempty = 0, bytes;
	__u8 over = 0;

	if (!w->cur) {
		w->ended = 1;
		return 1;
	}
	if (w->failed && w->cur == w->bad && !w->found_bad) {
		w->accepted = idx;
		w->found_bad = 1;
	}
	if (targ_mode == SQ_MODE_EVENTS && idx >= max_wrs) {
		/* past the record bound: only count it */
		__u64 next = 0;

		if (bpf_probe_read_user(&next, sizeof(next), (void *)(w->cur + IBV_SEND_WR_NEXT))) {
			w->ended = 1;
			return 1;
		}
		w->cur = next;
		w->i = idx + 1;
		return 0;
	}
	if (bpf_probe_read_user(&h, sizeof(h), (void *)w->cur)) {
		w->ended = 1;
		return 1;
	}
	bytes = sum_sges(h.sg_list, h.num_sge, &over, &nonempty);
	if (targ_mode == SQ_MODE_EVENTS) {
		struct sq_post_rec *r = scratch_buf();

		if (r && idx < SQ_MAX_WRS) {
			struct sq_wr *o = &r->wrs[wr_index(idx)];

			o->wr_id = h.wr_id;
			o->send_flags = h.send_flags;
			o->bytes = bytes;
			o->num_sge = h.num_sge;
			o->opcode = h.opcode;
			o->sge_over = over;
			o->pad = 0;
		}
	} else if (!w->found_bad) {
		if (h.send_flags & SQ_IBV_SEND_INLINE) {
			w->inline_wrs++;
			w->inline_bytes += bytes;
		} else {
			w->payload_bytes += bytes;
			w->payload_sges += nonempty + over; /* past the bound: assumed non-empty */
		}
		if (h.send_flags & SQ_IBV_SEND_SIGNALED)
			w->signaled++;
	}
	w->cur = h.next;
	w->i = idx + 1;
	return 0;
}

static __always_inline struct sq_qp_counters *qp_counters_of(__u32 tgid, __u64 qp)
{
	struct sq_key k = { .pid = tgid, .addr = qp };
	struct sq_qp_counters *c = bpf_map_lookup_elem(&qp_counters, &k);

	if (!c) {
		struct sq_qp_counters init = { .qp_num = read_u32(qp + IBV_QP_QP_NUM) };

		bpf_map_update_elem(&qp_counters, &k, &init, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&qp_counters, &k);
	}
	return c;
}

static __always_inline void count_post(__u32 tgid, __u64 qp, int ret, __u32 n, __u32 accepted,
				       __u32 inline_wrs, __u32 signaled, __u64 inline_bytes,
				       __u64 payload_bytes, __u32 payload_sges)
{
	struct sq_qp_counters *c = qp_counters_of(tgid, qp);

	(void)n;
	if (!c)
		return;
	__sync_fetch_and_add(&c->post_calls, 1);
	__sync_fetch_and_add(&c->wrs, accepted);
	__sync_fetch_and_add(&c->inline_wrs, inline_wrs);
	__sync_fetch_and_add(&c->signaled, signaled);
	if (accepted)
		__sync_fetch_and_add(&c->doorbells, 1);
	if (ret) {
		__sync_fetch_and_add(&c->errors, 1);
		if (ret == ENOMEM)
			__sync_fetch_and_add(&c->enomem, 1);
		else if (ret == EINVAL)
			__sync_fetch_and_add(&c->einval, 1);
	}
	__sync_fetch_and_add(&c->inline_bytes, inline_bytes);
	__sync_fetch_and_add(&c->payload_bytes, payload_bytes);
	__sync_fetch_and_add(&c->payload_sges, payload_sges);
	if (accepted > c->max_wrs_per_call)
		c->max_wrs_per_call = accepted; /* a racing larger value may be lost: a peak, not a sum */
}

SEC("uretprobe")
int BPF_KRETPROBE(post_send_ret, int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct call_args a;
	struct walk w = {};
	__u32 n, total;

	if (!wanted(id >> 32) || take_args(&post_args, &a) || a.op != 0)
		return 0;
	w.cur = a.a1;
	if (ret) {
		w.failed = 1;
		w.bad = read_u64(a.a2);
	}
	bpf_loop(max_walk, walk_wr, &w, 0);

	total = w.i;
	if (!ret)
		w.accepted = total;
	else if (!w.found_bad)
		w.accepted = 0;

	if (targ_mode == SQ_MODE_COUNTERS) {
		count_post(id >> 32, a.a0, ret, total, w.accepted, w.inline_wrs, w.signaled,
			   w.inline_bytes, w.payload_bytes, w.payload_sges);
		return 0;
	}

	struct sq_post_rec *r = scratch_buf();

	if (!r)
		return 0;
	n = total < max_wrs ? total : max_wrs;
	if (n > SQ_MAX_WRS)
		n = SQ_MAX_WRS;
	fill_hdr(&r->hdr, SQ_REC_POST, id, a.ts);
	r->qp = a.a0;
	r->qp_num = read_u32(a.a0 + IBV_QP_QP_NUM);
	r->ret = ret;
	r->n = n;
	r->truncated = total - n;
	r->accepted = w.accepted;
	r->api = SQ_API_POST_SEND;
	r->aborted = 0;
	r->walk_capped = !w.ended && w.cur;
	output(r, rec_size(struct sq_post_rec, wrs, n, SQ_MAX_WRS));
	return 0;
}

/* ---- ibv_poll_cq -------------------------------------------------------- */

SEC("uprobe")
int BPF_KPROBE(poll_cq_entry, void *cq, int num_entries, void *wc)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&poll_args, (__u64)cq, (__u64)wc, 0, (__u32)num_entries, 0, 0);
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
	__u32 tgid = id >> 32;
	struct call_args a;
	struct sq_cq_stats *s;
	struct sq_poll_rec *r;
	__u32 n;

	if (!wanted(tgid) || take_args(&poll_args, &a))
		return 0;
	/* Empty polls are the most frequent call of a busy poller: a counter
	 * here, carried by the next record or flushed by user space. */
	if (ret == 0 || targ_mode == SQ_MODE_COUNTERS) {
		s = cq_stats_of(tgid, a.a0);
		if (!s)
			return 0;
		if (ret == 0)
			__sync_fetch_and_add(&s->empty, 1);
		if (targ_mode == SQ_MODE_COUNTERS) {
			__sync_fetch_and_add(&s->polls, 1);
			if (ret > 0)
				__sync_fetch_and_add(&s->cqes, ret);
		}
		return 0;
	}

	r = scratch_buf();
	if (!r)
		return 0;
	n = ret > 0 ? (__u32)ret : 0;
	if (n > max_wcs)
		n = max_wcs;
	if (n > SQ_MAX_WCS)
		n = SQ_MAX_WCS;
	fill_hdr(&r->hdr, SQ_REC_POLL, id, a.ts);
	r->cq = a.a0;
	r->max = (__s32)a.a3;
	r->ret = ret;
	r->n = n;
	r->truncated = ret > 0 ? (__u32)ret - n : 0;
	{
		struct sq_key k = { .pid = tgid, .addr = a.a0 };

		s = bpf_map_lookup_elem(&cq_stats, &k);
		r->empty_total = s ? s->empty : 0;
	}
	for (__u32 i = 0; i < SQ_MAX_WCS; i++) {
		struct wc_head h;
		struct sq_wc *o;

		if (i >= n)
			break;
		o = &r->wcs[i];
		if (bpf_probe_read_user(&h, sizeof(h), (void *)(a.a1 + i * IBV_WC_SIZE)))
			__builtin_memset(&h, 0, sizeof(h));
		o->wr_id = h.wr_id;
		o->byte_len = h.byte_len;
		o->qp_num = h.qp_num;
		o->status = h.status;
		o->opcode = h.opcode;
	}
	output(r, rec_size(struct sq_poll_rec, wcs, n, SQ_MAX_WCS));
	return 0;
}

/* ---- ibv_post_recv ------------------------------------------------------ */

SEC("uprobe")
int BPF_KPROBE(post_recv_entry, void *qp, void *wr, void *bad_wr)
{
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	if (targ_mode == SQ_MODE_COUNTERS)
		return 0;
	save_args(&post_args, (__u64)qp, (__u64)wr, (__u64)bad_wr, 0, 1, 0);
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
	struct call_args a;
	struct rwalk w = {};
	struct sq_recv_rec r = {};

	if (!wanted(id >> 32) || take_args(&post_args, &a) || a.op != 1)
		return 0;
	w.cur = a.a1;
	if (ret)
		w.bad = read_u64(a.a2);
	bpf_loop(SQ_MAX_RECV_WALK, walk_recv, &w, 0);
	fill_hdr(&r.hdr, SQ_REC_RECV, id, a.ts);
	r.qp = a.a0;
	r.qp_num = read_u32(a.a0 + IBV_QP_QP_NUM);
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
	b->hdr.entry_ts = bpf_ktime_get_ns();
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
	if (!wanted(bpf_get_current_pid_tgid() >> 32))
		return 0;
	save_args(&ctl_args, (__u64)qpx, 0, 0, 0, 0xff, 0);
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
				if (w->send_flags & SQ_IBV_SEND_INLINE) {
					inline_wrs++;
					inline_bytes += w->bytes;
				} else {
					payload_bytes += w->bytes;
					/* the wr API gives lengths only in sum: count
					 * SGEs that carry bytes as one each when set_sge */
					sges += w->bytes ? (w->num_sge ? w->num_sge : 1) : 0;
				}
				if (w->send_flags & SQ_IBV_SEND_SIGNALED)
					signaled++;
			}
		}
		if (aborted)
			return;
		count_post(id >> 32, b->qp, ret, total, accepted, inline_wrs, signaled, inline_bytes,
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
	struct call_args a;
	struct sq_post_rec *b;

	if (!wanted(id >> 32) || take_args(&ctl_args, &a) || a.op != 0xff)
		return 0;
	b = batch_of(id >> 32, a.a0);
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
	struct signal_struct___sq *signal;
} __attribute__((preserve_access_index));

SEC("raw_tracepoint/sched_process_exit")
int proc_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct task_struct___sq *task = (void *)bpf_get_current_task();
	struct sq_exit_rec r = {};

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
