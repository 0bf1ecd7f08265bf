/* A thread's cache of QP numbers (part of verbs.bpf.c, also included by
 * bpf/bench/qpcache.bpf.c, which measures its hit rate): sets of two ways,
 * chosen by a hash of the QP address, each way valid only while the QP
 * generation it was filled at (qp_gen) is unchanged. It lives in the
 * thread's state, so a hit costs a few loads and compares, no map lookup:
 * the cost of the bpf_probe_read_user it saves is what the hit wins. */
#ifndef SQSCOPE_QPN_CACHE_BPF_H
#define SQSCOPE_QPN_CACHE_BPF_H

struct qpn_way {
	__u64 qp; /* the QP's address (0: empty) */
	__u32 qpn;
	__u32 gen; /* qp_gen when it was read */
};

/* Sets of the thread's cache (a power of two), two ways each: 128 QP
 * numbers, 2 KiB. `make bench` (sqbench -only qpcache) measured the hit
 * rate by size: two ways of N entries held every QP of a thread posting
 * to up to N/2 in turn, and 128 entries are what 64 QPs per thread need. */
#define SQ_QPN_SET_BITS 6
#define SQ_QPN_SETS     (1 << SQ_QPN_SET_BITS)

/* qpn_hash is the set of 1 << bits (1 <= bits <= 16) QP address qp maps
 * to. QPs are heap objects, 16-byte aligned and often a fixed stride
 * apart: the multiplier spreads a stride over the high bits and the fold
 * brings them down. Simulated over 64 sets for 4 QPs at every stride of
 * 16 B to 8 KiB, the high bits alone put all four in one set for 3 of
 * the 512 strides, the fold for none. */
static __always_inline __u32 qpn_hash(__u64 qp, unsigned int bits)
{
	__u64 x = (qp >> 4) * 0x9E3779B97F4A7C15ull;

	return (__u32)(x ^ (x >> 32)) & ((1u << bits) - 1);
}

/* qpn_set is the first way of the set qp maps to in cache c of 1 << bits
 * sets of two ways. */
static __always_inline struct qpn_way *qpn_set(struct qpn_way *c, __u64 qp, unsigned int bits)
{
	return c + 2 * qpn_hash(qp, bits);
}

/* qpn_find is the way of set s holding qp at generation gen, or 0. */
static __always_inline struct qpn_way *qpn_find(struct qpn_way *s, __u64 qp, __u32 gen)
{
	if (s[0].qp == qp && s[0].gen == gen)
		return &s[0];
	if (s[1].qp == qp && s[1].gen == gen)
		return &s[1];
	return 0;
}

/* qpn_put fills set s's first way, the older moving to the second: a
 * thread that posts to its QPs in turn then misses only where more than
 * two of them share a set. */
static __always_inline void qpn_put(struct qpn_way *s, __u64 qp, __u32 gen, __u32 qpn)
{
	s[1] = s[0];
	s[0].qp = qp;
	s[0].qpn = qpn;
	s[0].gen = gen;
}

#endif
