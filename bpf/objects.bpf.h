/* Part of verbs.bpf.c: which object lives at an address. Each QP, CQ and
 * SRQ created while tracing gets the next generation of one creation
 * sequence; the generation stays the object's until its destroy, so a
 * new object at a freed address (malloc gives it back at once) is told
 * from the old one. The counters mode keys its per-QP totals by it. */
#ifndef SQSCOPE_OBJECTS_BPF_H
#define SQSCOPE_OBJECTS_BPF_H

struct life_key {
	__u32 pid;
	__u32 type; /* enum sq_obj_type */
	__u64 addr;
};

struct life {
	__u32 gen;
	__u32 qpn; /* QPs: the number it was created with */
};

/* The live objects created while tracing. LRU: a process that never
 * destroys what it creates must not fill it for good (an evicted object
 * is then counted as one created before tracing, generation 0). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct life_key);
	__type(value, struct life);
} obj_life SEC(".maps");

/* The last generation given out. */
__u64 obj_seq = 0; /* 64 bits: the compare-and-swap below needs them */

/* next_gen takes the next generation. The value of an atomic add cannot
 * be used below -mcpu=v3: a compare-and-swap takes it, retried a bounded
 * number of times (creates are rare; only creates racing on every try
 * would share a generation). */
static __always_inline __u32 next_gen(void)
{
	__u64 g = obj_seq, seen;

	for (int i = 0; i < 16; i++) {
		seen = __sync_val_compare_and_swap(&obj_seq, g, g + 1);
		if (seen == g)
			break;
		g = seen;
	}
	return (__u32)(g + 1);
}

/* obj_born gives a new object its generation and makes it the one at its
 * address. */
static __always_inline __u32 obj_born(__u32 tgid, __u32 type, __u64 addr, __u32 qpn)
{
	struct life_key k = { .pid = tgid, .type = type, .addr = addr };
	struct life l = { .gen = next_gen(), .qpn = qpn };

	bpf_map_update_elem(&obj_life, &k, &l, BPF_ANY);
	return l.gen;
}

/* obj_gen is the generation of the object at addr; 0 when it was created
 * before tracing began (or its entry was evicted). */
static __always_inline __u32 obj_gen(__u32 tgid, __u32 type, __u64 addr)
{
	struct life_key k = { .pid = tgid, .type = type, .addr = addr };
	struct life *l = bpf_map_lookup_elem(&obj_life, &k);

	return l ? l->gen : 0;
}

/* obj_died ends the life of generation gen at addr (a destroy that
 * succeeded); a newer object already there is left alone. */
static __always_inline void obj_died(__u32 tgid, __u32 type, __u64 addr, __u32 gen)
{
	struct life_key k = { .pid = tgid, .type = type, .addr = addr };
	struct life *l = bpf_map_lookup_elem(&obj_life, &k);

	if (l && l->gen == gen)
		bpf_map_delete_elem(&obj_life, &k);
}

#endif
