/* Part of verbs.bpf.c: reading the application's memory. Plain reads,
 * the verbs structs read whole (hand copies, each pinned to the events.h
 * offsets that abi_test.go checks against <infiniband/verbs.h>), and the
 * windows that read WR and SGE arrays in bulk. */
#ifndef SQSCOPE_USER_MEM_BPF_H
#define SQSCOPE_USER_MEM_BPF_H

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

/* ---- verbs structs read whole ------------------------------------------
 * Copies of the application's structs (or of their heads), pinned field by
 * field to the events.h offsets: abi_test.go checks those against
 * <infiniband/verbs.h>, these checks hold the copies to them. */

#define pin_field(type, field, off) \
	_Static_assert(__builtin_offsetof(type, field) == (off), #type "." #field " is not at " #off)

/* The head of a struct ibv_send_wr, up to send_flags. */
struct wr_head {
	__u64 wr_id;
	__u64 next;
	__u64 sg_list;
	__s32 num_sge;
	__u32 opcode;
	__u32 send_flags;
	__u32 pad;
};
pin_field(struct wr_head, wr_id, IBV_SEND_WR_WR_ID);
pin_field(struct wr_head, next, IBV_SEND_WR_NEXT);
pin_field(struct wr_head, sg_list, IBV_SEND_WR_SG_LIST);
pin_field(struct wr_head, num_sge, IBV_SEND_WR_NUM_SGE);
pin_field(struct wr_head, opcode, IBV_SEND_WR_OPCODE);
pin_field(struct wr_head, send_flags, IBV_SEND_WR_SEND_FLAGS);
_Static_assert(sizeof(struct wr_head) <= IBV_SEND_WR_SIZE, "struct wr_head is longer than struct ibv_send_wr");

/* A struct ibv_sge. */
struct sge {
	__u64 addr;
	__u32 length;
	__u32 lkey;
};
pin_field(struct sge, addr, IBV_SGE_ADDR);
pin_field(struct sge, length, IBV_SGE_LENGTH);
pin_field(struct sge, lkey, IBV_SGE_LKEY);
_Static_assert(sizeof(struct sge) == IBV_SGE_SIZE, "struct sge is not the size of struct ibv_sge");

/* The head of a struct ibv_wc, up to qp_num. */
struct wc_head {
	__u64 wr_id;
	__u32 status;
	__u32 opcode;
	__u32 vendor_err;
	__u32 byte_len;
	__u32 imm_data;
	__u32 qp_num;
};
pin_field(struct wc_head, wr_id, IBV_WC_WR_ID);
pin_field(struct wc_head, status, IBV_WC_STATUS);
pin_field(struct wc_head, opcode, IBV_WC_OPCODE);
pin_field(struct wc_head, byte_len, IBV_WC_BYTE_LEN);
pin_field(struct wc_head, qp_num, IBV_WC_QP_NUM);
_Static_assert(sizeof(struct wc_head) <= IBV_WC_SIZE, "struct wc_head is longer than struct ibv_wc");

/* wr_id and wr_flags of a struct ibv_qp_ex, read from its wr_id on. */
struct qpx_wr {
	__u64 wr_id;
	__u32 wr_flags;
};
pin_field(struct qpx_wr, wr_flags, IBV_QPX_WR_FLAGS - IBV_QPX_WR_ID);

/* status and wr_id of a struct ibv_cq_ex, read from its status on: the
 * completion ibv_start_poll or ibv_next_poll just returned. */
struct cqx_cur {
	__u32 status;
	__u64 wr_id; /* right after status: at 4 in the copy */
} __attribute__((packed));
pin_field(struct cqx_cur, wr_id, IBV_CQX_WR_ID - IBV_CQX_STATUS);

/* ---- windows ------------------------------------------------------------
 * One bpf_probe_read_user costs about as much as copying a few hundred
 * bytes, so user memory is read through windows: the first miss of a call
 * reads exactly what is needed (a one-WR post stays at one read per
 * object), later misses read SQ_WIN bytes at once, which covers the WR and
 * SGE arrays applications post from in one or two reads. */
#define SQ_WIN       2048
#define SQ_WIN_SLACK 256   /* reads at offsets < SQ_WIN may run this far past it */
#define SQ_PAGE      4096

/* Aligned, so that a struct read out of it through a cast pointer is
 * copied in words: clang copies from a plain byte array a byte at a time,
 * about 150 instructions for one WR head. */
struct uwin {
	__u8 b[SQ_WIN + SQ_WIN_SLACK] __attribute__((aligned(8)));
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

#endif
