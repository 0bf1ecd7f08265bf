//go:build ignore

/* Less than a tracer must do at sqscope's probes, in each of its modes.
 *
 * Full events (least_post_*, least_poll_*): per-thread
 * state at post_send and poll_cq (entry and return), every WR of a post's
 * list (up to LEAST_WRS) with the length of its first SGE, and one
 * timestamped ring-buffer record per post and per poll that returned a
 * completion (an empty poll is counted in the thread's state). A one-WR
 * list is two small reads; a longer one is one read of the WRs and one of
 * the span their SGEs lie in, which is all it takes when the list and the
 * SGEs are arrays (as the benchmark's are: it reads no WR outside the first
 * read). It handles no errors, no lists past LEAST_WRS and no slot
 * collisions, and builds a long list's record in a reservation of
 * LEAST_WRS entries, wasting ring space.
 *
 * Counters (least_cpost_*, least_cpoll_*): per-thread state at three of
 * the four probes and the same reads at post_send's entry, adding to
 * per-thread totals; post_send's return does nothing.
 *
 * `make bench` runs them beside sqscope: what no tracer of either kind can
 * go below here, measured.
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "../events.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct least_slot {
	__u64 owner;
	__u64 a0, a1;
	__u64 empty;
	__u64 last_n; /* WRs in the thread's last list */
	/* counters */
	__u64 calls, wrs, inline_wrs, signaled, bytes, polls, cqes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct least_slot);
} least_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} least_ring SEC(".maps");

/* records the ring had no room for (the reader must keep up: 0) */
volatile __u64 least_lost;

/* what a post and a completion must be recorded with, and no more
 * (sqscope's records are 88 bytes each) */
struct least_post {
	__u64 ts, qp, wr_id;
	__u32 tid, flags, bytes, opcode;
};

#define LEAST_WRS 16

/* a list's post: each WR's id, flags, first SGE's length and opcode */
struct least_list_wr {
	__u64 wr_id;
	__u32 flags, bytes, opcode, pad;
};

struct least_list {
	__u64 ts, qp;
	__u32 tid, n;
	struct least_list_wr wrs[LEAST_WRS];
};

struct least_poll {
	__u64 ts, cq, wr_id, empty;
	__u32 tid, qp_num, status, pad;
};

/* Let bpf2go see the records, which sqbench tells apart by their sizes. */
const struct least_post *unused_post __attribute__((unused));
const struct least_list *unused_list __attribute__((unused));
const struct least_poll *unused_poll __attribute__((unused));

static __always_inline struct least_slot *slot(void)
{
	__u32 tid = bpf_get_current_pid_tgid();
	__u32 idx = tid & 4095;
	struct least_slot *s = bpf_map_lookup_elem(&least_slots, &idx);

	if (s && s->owner != tid)
		s->owner = tid;
	return s;
}

/* save keeps two arguments from entry to return. */
static __always_inline void save(__u64 a0, __u64 a1)
{
	struct least_slot *s = slot();

	if (s) {
		s->a0 = a0;
		s->a1 = a1;
	}
}

/* Copies of the verbs structs read whole, pinned to the events.h offsets
 * (which abi_test.go checks against <infiniband/verbs.h>). */
#define pin_field(type, field, off) \
	_Static_assert(__builtin_offsetof(type, field) == (off), #type "." #field " is not at " #off)

/* the head of a struct ibv_send_wr */
struct least_wr {
	__u64 wr_id, next, sg_list;
	__s32 num_sge;
	__u32 opcode, send_flags, pad;
};
pin_field(struct least_wr, wr_id, IBV_SEND_WR_WR_ID);
pin_field(struct least_wr, next, IBV_SEND_WR_NEXT);
pin_field(struct least_wr, sg_list, IBV_SEND_WR_SG_LIST);
pin_field(struct least_wr, num_sge, IBV_SEND_WR_NUM_SGE);
pin_field(struct least_wr, opcode, IBV_SEND_WR_OPCODE);
pin_field(struct least_wr, send_flags, IBV_SEND_WR_SEND_FLAGS);
_Static_assert(sizeof(struct least_wr) <= IBV_SEND_WR_SIZE, "struct least_wr is longer than struct ibv_send_wr");

/* a struct ibv_sge */
struct least_sge {
	__u64 addr;
	__u32 length, lkey;
};
pin_field(struct least_sge, addr, IBV_SGE_ADDR);
pin_field(struct least_sge, length, IBV_SGE_LENGTH);
pin_field(struct least_sge, lkey, IBV_SGE_LKEY);
_Static_assert(sizeof(struct least_sge) == IBV_SGE_SIZE, "struct least_sge is not the size of struct ibv_sge");

/* the head of a struct ibv_wc */
struct least_wc {
	__u64 wr_id;
	__u32 status, opcode, vendor_err, byte_len, imm, qp_num;
};
pin_field(struct least_wc, wr_id, IBV_WC_WR_ID);
pin_field(struct least_wc, status, IBV_WC_STATUS);
pin_field(struct least_wc, opcode, IBV_WC_OPCODE);
pin_field(struct least_wc, byte_len, IBV_WC_BYTE_LEN);
pin_field(struct least_wc, qp_num, IBV_WC_QP_NUM);
_Static_assert(sizeof(struct least_wc) <= IBV_WC_SIZE, "struct least_wc is longer than struct ibv_wc");

/* A list's WRs and SGEs, read in bulk: per CPU, too large for the stack. */
#define LEAST_SPAN (LEAST_WRS * IBV_SEND_WR_SIZE)

struct least_buf {
	__u8 wrs[LEAST_SPAN];
	__u8 sges[LEAST_SPAN + IBV_SGE_SIZE];
	__u64 sg; /* the user address of sges[0] */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct least_buf);
} least_bufs SEC(".maps");

/* read_list reads the list at head, when it is longer than one WR, into b:
 * its WRs in one read and the span from the first WR's SGEs to the last's
 * in another (an array, in order, as the benchmark's). Returns the WRs
 * read, 0 if none. */
static __always_inline __u32 read_list(struct least_buf *b, __u64 head)
{
	__u32 n = LEAST_WRS;
	__u64 span;

	if (bpf_probe_read_user(b->wrs, sizeof(b->wrs), (void *)head))
		return 0;
	for (__u32 i = 0; i < LEAST_WRS; i++) {
		struct least_wr *h = (struct least_wr *)&b->wrs[i * IBV_SEND_WR_SIZE];

		if (h->next != head + (i + 1) * IBV_SEND_WR_SIZE) {
			n = i + 1;
			break;
		}
	}
	b->sg = ((struct least_wr *)b->wrs)->sg_list;
	span = ((struct least_wr *)&b->wrs[((n - 1) & (LEAST_WRS - 1)) * IBV_SEND_WR_SIZE])->sg_list - b->sg +
	       IBV_SGE_SIZE;
	if (span > LEAST_SPAN)
		span = LEAST_SPAN;
	bpf_probe_read_user(b->sges, span, (void *)b->sg);
	return n;
}

/* sge_len is the length of the first SGE of the WR at h, out of b. */
static __always_inline __u32 sge_len(struct least_buf *b, struct least_wr *h)
{
	__u64 off = (h->sg_list - b->sg) & (LEAST_SPAN - 1);

	return ((struct least_sge *)&b->sges[off])->length;
}

/* read_wr reads a list's first WR and the length of its first SGE. */
static __always_inline int read_wr(__u64 wr, struct least_wr *h, __u32 *len)
{
	struct least_sge sge = {};

	if (bpf_probe_read_user(h, sizeof(*h), (void *)wr))
		return -1;
	bpf_probe_read_user(&sge, sizeof(sge), (void *)h->sg_list);
	*len = sge.length;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(least_post_entry, void *qp, void *wr)
{
	save((__u64)qp, (__u64)wr);
	return 0;
}

/* list_of reads the list at head into this CPU's buffer and notes its
 * length in s; NULL when it is one WR (or unreadable). */
static __always_inline struct least_buf *list_of(struct least_slot *s, __u64 head, __u32 *n)
{
	__u32 zero = 0;
	struct least_buf *b = bpf_map_lookup_elem(&least_bufs, &zero);

	*n = b ? read_list(b, head) : 0;
	s->last_n = *n > 1 ? *n : 1;
	return *n > 1 ? b : 0;
}

/* list_post records a list of more than one WR; 0 when it was one. */
static __always_inline int list_post(struct least_slot *s)
{
	struct least_list *r;
	struct least_buf *b;
	__u32 n;

	if (!(b = list_of(s, s->a1, &n)))
		return 0;
	r = bpf_ringbuf_reserve(&least_ring, sizeof(*r), 0);
	if (!r) {
		least_lost++;
		return 1;
	}
	r->ts = bpf_ktime_get_ns();
	r->qp = s->a0;
	r->tid = s->owner;
	r->n = n;
	for (__u32 i = 0; i < LEAST_WRS; i++) {
		struct least_wr *h = (struct least_wr *)&b->wrs[i * IBV_SEND_WR_SIZE];

		if (i >= n)
			break;
		r->wrs[i].wr_id = h->wr_id;
		r->wrs[i].flags = h->send_flags;
		r->wrs[i].bytes = sge_len(b, h);
		r->wrs[i].opcode = h->opcode;
	}
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 1;
}

SEC("uretprobe")
int BPF_KRETPROBE(least_post_ret, int ret)
{
	struct least_slot *s = slot();
	struct least_wr h;
	struct least_post r = {};
	__u32 len;

	if (!s || (s->last_n > 1 && list_post(s)) || read_wr(s->a1, &h, &len))
		return 0;
	if (h.next) { /* longer than last time: read in bulk from now on */
		list_post(s);
		return 0;
	}
	r.ts = bpf_ktime_get_ns();
	r.qp = s->a0;
	r.wr_id = h.wr_id;
	r.tid = s->owner;
	r.flags = h.send_flags;
	r.bytes = len;
	r.opcode = h.opcode;
	if (bpf_ringbuf_output(&least_ring, &r, sizeof(r), BPF_RB_NO_WAKEUP))
		least_lost++;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(least_poll_entry, void *cq, int n, void *wc)
{
	save((__u64)cq, (__u64)wc);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(least_poll_ret, int ret)
{
	struct least_slot *s = slot();
	struct least_wc wc;
	struct least_poll r = {};

	if (!s)
		return 0;
	if (ret <= 0) {
		s->empty++;
		return 0;
	}
	if (bpf_probe_read_user(&wc, sizeof(wc), (void *)s->a1))
		return 0;
	r.ts = bpf_ktime_get_ns();
	r.cq = s->a0;
	r.wr_id = wc.wr_id;
	r.empty = s->empty;
	r.tid = s->owner;
	r.qp_num = wc.qp_num;
	r.status = wc.status;
	s->empty = 0;
	if (bpf_ringbuf_output(&least_ring, &r, sizeof(r), BPF_RB_NO_WAKEUP))
		least_lost++;
	return 0;
}

/* list_count adds up a list of more than one WR; 0 when it was one. */
static __always_inline int list_count(struct least_slot *s, __u64 head)
{
	struct least_buf *b;
	__u32 n;

	if (!(b = list_of(s, head, &n)))
		return 0;
	s->calls++;
	for (__u32 i = 0; i < LEAST_WRS; i++) {
		struct least_wr *h = (struct least_wr *)&b->wrs[i * IBV_SEND_WR_SIZE];

		if (i >= n)
			break;
		s->wrs++;
		s->inline_wrs += (h->send_flags / SQ_IBV_SEND_INLINE) & 1;
		s->signaled += (h->send_flags / SQ_IBV_SEND_SIGNALED) & 1;
		s->bytes += sge_len(b, h);
	}
	return 1;
}

SEC("uprobe")
int BPF_KPROBE(least_cpost_entry, void *qp, void *wr)
{
	struct least_slot *s = slot();
	struct least_wr h;
	__u32 len;

	if (!s || (s->last_n > 1 && list_count(s, (__u64)wr)) || read_wr((__u64)wr, &h, &len))
		return 0;
	if (h.next) { /* longer than last time: read in bulk from now on */
		list_count(s, (__u64)wr);
		return 0;
	}
	s->calls++;
	s->wrs++;
	s->inline_wrs += (h.send_flags / SQ_IBV_SEND_INLINE) & 1;
	s->signaled += (h.send_flags / SQ_IBV_SEND_SIGNALED) & 1;
	s->bytes += len;
	return 0;
}

SEC("uretprobe")
int least_cpost_ret(void *ctx)
{
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(least_cpoll_entry, void *cq)
{
	save((__u64)cq, 0);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(least_cpoll_ret, int ret)
{
	struct least_slot *s = slot();

	if (!s)
		return 0;
	s->polls++;
	if (ret > 0)
		s->cqes += ret;
	else
		s->empty++;
	return 0;
}
