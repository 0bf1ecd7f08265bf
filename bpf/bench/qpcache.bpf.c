//go:build ignore

/* The hit rate of a thread's cache of QP numbers (bpf/qpn_cache.bpf.h):
 * attached to post_send's entry, qpcache_entry looks the QP up, per
 * thread, in caches of every shape at once and counts hits and misses per
 * shape: the one entry of the QP last posted to (what sqscope kept
 * before), sets of two ways as sqscope keeps them (qpn_set, qpn_find,
 * qpn_put) from 4 to 128 entries, and direct-mapped ones of the same sizes
 * with the same hash. It reads no user memory: the hit rate depends on
 * the QP addresses alone (no QP is created while the workload posts, so
 * the generation stays 0).
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "../qpn_cache.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* The shapes, in the order of qpc_counts: see qpcache.go. */
#define QPC_ONE      0
#define QPC_TWO_WAY  1 /* 1..6: two ways, 2 << i entries */
#define QPC_DIRECT   7 /* 7..12: direct-mapped, 2 << (i - 6) entries */
#define QPC_SHAPES   13
#define QPC_SLOTS    256

struct qpc_slot {
	__u64 owner;
	__u64 last; /* the QP last posted to */
	struct qpn_way w1[2 << 1], w2[2 << 2], w3[2 << 3], w4[2 << 4], w5[2 << 5], w6[2 << 6];
	struct qpn_way d1[2 << 1], d2[2 << 2], d3[2 << 3], d4[2 << 4], d5[2 << 5], d6[2 << 6];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, QPC_SLOTS);
	__type(key, __u32);
	__type(value, struct qpc_slot);
} qpc_slots SEC(".maps");

struct qpc_count {
	__u64 hits, misses;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, QPC_SHAPES);
	__type(key, __u32);
	__type(value, struct qpc_count);
} qpc_counts SEC(".maps");

/* posts of threads whose slot another thread held (not counted above) */
volatile __u64 qpc_unslotted;

static __always_inline void count(__u32 shape, int hit)
{
	struct qpc_count *c = bpf_map_lookup_elem(&qpc_counts, &shape);

	if (!c)
		return;
	if (hit)
		c->hits++;
	else
		c->misses++;
}

/* two_way is the lookup sqscope's qp_num_of does. */
static __always_inline int two_way(struct qpn_way *c, __u64 qp, unsigned int bits)
{
	struct qpn_way *s = qpn_set(c, qp, bits);

	if (qpn_find(s, qp, 0))
		return 1;
	qpn_put(s, qp, 0, 0);
	return 0;
}

/* direct is a cache of 1 << bits entries, one per set. */
static __always_inline int direct(struct qpn_way *c, __u64 qp, unsigned int bits)
{
	struct qpn_way *e = c + qpn_hash(qp, bits);

	if (e->qp == qp)
		return 1;
	e->qp = qp;
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(qpcache_entry, void *qp_ptr)
{
	__u64 qp = (__u64)qp_ptr;
	__u32 tid = bpf_get_current_pid_tgid();
	__u32 idx = tid & (QPC_SLOTS - 1);
	struct qpc_slot *s = bpf_map_lookup_elem(&qpc_slots, &idx);

	if (!s)
		return 0;
	if (s->owner != tid && !(s->owner == 0 && __sync_val_compare_and_swap(&s->owner, 0, (__u64)tid) == 0)) {
		__sync_fetch_and_add(&qpc_unslotted, 1);
		return 0;
	}
	count(QPC_ONE, s->last == qp);
	s->last = qp;
	count(QPC_TWO_WAY + 0, two_way(s->w1, qp, 1));
	count(QPC_TWO_WAY + 1, two_way(s->w2, qp, 2));
	count(QPC_TWO_WAY + 2, two_way(s->w3, qp, 3));
	count(QPC_TWO_WAY + 3, two_way(s->w4, qp, 4));
	count(QPC_TWO_WAY + 4, two_way(s->w5, qp, 5));
	count(QPC_TWO_WAY + 5, two_way(s->w6, qp, 6));
	count(QPC_DIRECT + 0, direct(s->d1, qp, 2));
	count(QPC_DIRECT + 1, direct(s->d2, qp, 3));
	count(QPC_DIRECT + 2, direct(s->d3, qp, 4));
	count(QPC_DIRECT + 3, direct(s->d4, qp, 5));
	count(QPC_DIRECT + 4, direct(s->d5, qp, 6));
	count(QPC_DIRECT + 5, direct(s->d6, qp, 7));
	return 0;
}
