/* Everything the BPF programs share with Go: record layouts, map keys and
 * values, enums, bounds, and the verbs ABI offsets the programs read user
 * memory with.
 *
 * The BPF side does not include <infiniband/verbs.h>: it reads the
 * application's structs at the offsets mirrored below. They are public ABI
 * of rdma-core (x86-64); abi_test.go pins every one against offsetof() and
 * sizeof() of the installed headers, and the Go types generated from this
 * file against their C sizes.
 */
#ifndef SQSCOPE_EVENTS_H
#define SQSCOPE_EVENTS_H

#include <linux/types.h>

/* ---- verbs ABI (rdma-core 44, x86-64) ---------------------------------- */

/* struct ibv_context / struct ibv_context_ops */
#define IBV_CONTEXT_OPS                8
#define IBV_CONTEXT_ABI_COMPAT         320
#define IBV_OPS_POLL_CQ                88
#define IBV_OPS_POST_SEND              200
#define IBV_OPS_POST_RECV              208
#define IBV_OPS_POST_SRQ_RECV          160

/* struct verbs_context is laid out just before its struct ibv_context:
 * these are the distances back from the ibv_context to the fields. */
#define VERBS_CTX_CREATE_QP_EX_BACK    56
#define VERBS_CTX_SZ_BACK              8
/* vctx->sz must reach create_qp_ex: sizeof(struct verbs_context) -
 * offsetof(struct verbs_context, create_qp_ex), as verbs_get_ctx_op() checks. */
#define VERBS_CTX_CREATE_QP_EX_MIN_SZ  384
/* The same for the CQ ops found there: create_cq_ex (ibv_create_cq_ex)
 * and modify_cq (ibv_modify_cq), both static inline in verbs.h. */
#define VERBS_CTX_CREATE_CQ_EX_BACK    120
#define VERBS_CTX_CREATE_CQ_EX_MIN_SZ  448
#define VERBS_CTX_MODIFY_CQ_BACK       184
#define VERBS_CTX_MODIFY_CQ_MIN_SZ     512
/* ibv_context.abi_compat of an extended (verbs_context) context */
#define VERBS_ABI_IS_EXTENDED          0xffffffffffffffffULL

/* struct ibv_pd */
#define IBV_PD_CONTEXT                 0

/* struct ibv_srq_init_attr */
#define IBV_SRQ_INIT_ATTR_MAX_WR       8

/* struct ibv_qp */
#define IBV_QP_CONTEXT                 0
#define IBV_QP_SEND_CQ                 24
#define IBV_QP_RECV_CQ                 32
#define IBV_QP_QP_NUM                  52
/* IBV_QP_STATE is an enum of verbs.h: the field gets a longer name */
#define IBV_QP_STATE_FIELD             56
#define IBV_QP_QP_TYPE                 60
#define IBV_QP_SIZE                    160

/* struct ibv_send_wr */
#define IBV_SEND_WR_WR_ID              0
#define IBV_SEND_WR_NEXT               8
#define IBV_SEND_WR_SG_LIST            16
#define IBV_SEND_WR_NUM_SGE            24
#define IBV_SEND_WR_OPCODE             28
#define IBV_SEND_WR_SEND_FLAGS         32
#define IBV_SEND_WR_SIZE               128

/* struct ibv_recv_wr */
#define IBV_RECV_WR_NEXT               8
#define IBV_RECV_WR_NUM_SGE            24
#define IBV_RECV_WR_SIZE               32

/* struct ibv_sge */
#define IBV_SGE_ADDR                   0
#define IBV_SGE_LENGTH                 8
#define IBV_SGE_LKEY                   12
#define IBV_SGE_SIZE                   16

/* struct ibv_data_buf (ibv_wr_set_inline_data_list) */
#define IBV_DATA_BUF_ADDR              0
#define IBV_DATA_BUF_LENGTH            8
#define IBV_DATA_BUF_SIZE              16

/* struct ibv_wc */
#define IBV_WC_WR_ID                   0
#define IBV_WC_STATUS                  8
#define IBV_WC_OPCODE                  12
#define IBV_WC_BYTE_LEN                20
#define IBV_WC_QP_NUM                  28
#define IBV_WC_SIZE                    48

/* struct ibv_qp_ex (its struct ibv_qp qp_base is at 0: qpx == qp) */
#define IBV_QPX_WR_ID                  168
#define IBV_QPX_WR_FLAGS               176
#define IBV_QPX_WR_ATOMIC_CMP_SWP      184
#define IBV_QPX_WR_ATOMIC_FETCH_ADD    192
#define IBV_QPX_WR_BIND_MW             200
#define IBV_QPX_WR_LOCAL_INV           208
#define IBV_QPX_WR_RDMA_READ           216
#define IBV_QPX_WR_RDMA_WRITE          224
#define IBV_QPX_WR_RDMA_WRITE_IMM      232
#define IBV_QPX_WR_SEND                240
#define IBV_QPX_WR_SEND_IMM            248
#define IBV_QPX_WR_SEND_INV            256
#define IBV_QPX_WR_SEND_TSO            264
#define IBV_QPX_WR_SET_UD_ADDR         272
#define IBV_QPX_WR_SET_XRC_SRQN        280
#define IBV_QPX_WR_SET_INLINE_DATA     288
#define IBV_QPX_WR_SET_INLINE_DATA_LIST 296
#define IBV_QPX_WR_SET_SGE             304
#define IBV_QPX_WR_SET_SGE_LIST        312
#define IBV_QPX_WR_START               320
#define IBV_QPX_WR_COMPLETE            328
#define IBV_QPX_WR_ABORT               336
#define IBV_QPX_WR_ATOMIC_WRITE        344
#define IBV_QPX_SIZE                   352

/* struct ibv_cq and struct ibv_cq_ex (an ibv_cq_ex starts as an ibv_cq:
 * ibv_cq_ex_to_cq() is a cast). After ibv_start_poll or ibv_next_poll
 * returned 0, status and wr_id describe the completion; the rest of it is
 * only read through the read_* functions. */
#define IBV_CQ_CQE                     28
#define IBV_CQX_STATUS                 132
#define IBV_CQX_WR_ID                  136
#define IBV_CQX_START_POLL             144
#define IBV_CQX_NEXT_POLL              152
#define IBV_CQX_END_POLL               160
#define IBV_CQX_READ_OPCODE            168
#define IBV_CQX_READ_BYTE_LEN          184
#define IBV_CQX_READ_QP_NUM            200
#define IBV_CQX_SIZE                   288

/* struct ibv_modify_cq_attr */
#define IBV_MODIFY_CQ_ATTR_MASK        0
#define IBV_MODIFY_CQ_COUNT            4
#define IBV_MODIFY_CQ_PERIOD           6

/* struct ibv_qp_init_attr; struct ibv_qp_init_attr_ex shares this prefix */
#define IBV_QP_INIT_ATTR_SEND_CQ       8
#define IBV_QP_INIT_ATTR_RECV_CQ       16
#define IBV_QP_INIT_ATTR_CAP           32
#define IBV_QP_INIT_ATTR_QP_TYPE       52
#define IBV_QP_INIT_ATTR_SQ_SIG_ALL    56
#define IBV_QP_INIT_ATTR_SIZE          64
#define IBV_QP_INIT_ATTR_EX_COMP_MASK  60
#define IBV_QP_INIT_ATTR_EX_SEND_OPS_FLAGS 128
#define IBV_QP_INIT_ATTR_EX_SIZE       136

/* struct ibv_qp_cap (inside the init attrs at IBV_QP_INIT_ATTR_CAP) */
#define IBV_QP_CAP_MAX_SEND_WR         0
#define IBV_QP_CAP_MAX_RECV_WR         4
#define IBV_QP_CAP_MAX_SEND_SGE        8
#define IBV_QP_CAP_MAX_RECV_SGE        12
#define IBV_QP_CAP_MAX_INLINE_DATA     16
#define IBV_QP_CAP_SIZE                20

/* struct ibv_qp_attr */
#define IBV_QP_ATTR_QP_STATE           0

/* enum values */
#define SQ_IBV_QP_STATE_MASK           1   /* IBV_QP_STATE */
#define SQ_IBV_SEND_SIGNALED           2   /* IBV_SEND_SIGNALED */
#define SQ_IBV_SEND_INLINE             8   /* IBV_SEND_INLINE */
#define SQ_IBV_WR_RDMA_WRITE           0
#define SQ_IBV_WR_RDMA_WRITE_WITH_IMM  1
#define SQ_IBV_WR_SEND                 2
#define SQ_IBV_WR_SEND_WITH_IMM        3
#define SQ_IBV_WR_RDMA_READ            4
#define SQ_IBV_WR_ATOMIC_CMP_AND_SWP   5
#define SQ_IBV_WR_ATOMIC_FETCH_AND_ADD 6
#define SQ_IBV_ENOENT                  2   /* ibv_start_poll/ibv_next_poll: CQ empty */
#define SQ_IBV_WC_RECV                 128 /* IBV_WC_RECV: set in every receive completion's opcode */

/* ---- bounds ------------------------------------------------------------ */

/* Array sizes; the const volatile knobs in maps.bpf.h may lower them. */
#define SQ_MAX_WRS    64    /* WRs recorded per post call or wr batch */
#define SQ_MAX_WALK   1024  /* list entries walked in all (the rest only counted) */
#define SQ_MAX_SGES   16    /* SGEs summed per WR */
#define SQ_MAX_WCS    32    /* completions recorded per poll */
#define SQ_MAX_RECV_WALK 256 /* receive WRs counted per post_recv */

/* ---- records ----------------------------------------------------------- */

/* sq_rec_kind is sq_hdr.kind: which record follows the header. */
enum sq_rec_kind {
	SQ_REC_QP   = 1, /* struct sq_qp_rec */
	SQ_REC_POST = 2, /* struct sq_post_rec, cut after wrs[n] */
	SQ_REC_POLL = 3, /* struct sq_poll_rec, cut after wcs[n] */
	SQ_REC_RECV = 4, /* struct sq_recv_rec */
	SQ_REC_EXIT = 5, /* struct sq_exit_rec */
	/* object lifetimes */
	SQ_REC_OBJ      = 6, /* struct sq_obj_rec */
	SQ_REC_QP_FINAL = 7, /* struct sq_qp_final_rec */
	/* data-path entry points beyond post_send/poll_cq/post_recv */
	SQ_REC_CQ       = 8, /* struct sq_cq_rec */
	SQ_REC_POLL_EX  = 9, /* struct sq_poll_rec of an ibv_start_poll..ibv_end_poll
	                      * session: max is 0, each completion has only its
	                      * wr_id and status (qp_num, opcode, byte_len 0) */
	SQ_REC_SRQ_RECV = 10, /* struct sq_recv_rec of ibv_post_srq_recv: qp is the
	                      * struct ibv_srq *, qp_num 0 */
	SQ_REC_PROC     = 11, /* struct sq_proc_rec: a process joined the trace */
	SQ_REC_POST_FAIL = 12, /* struct sq_fail_rec: an error site of a provider's
	                      * post_send or wr_complete ran (sentinel mode) */
	SQ_REC_OCC_FAIL = 13, /* struct sq_occ_fail_rec: a failed ibv_post_send
	                       * and its QP's send queue (counters mode) */
};

/* sq_qp_op is sq_qp_rec.op: the control-path call that produced it. */
enum sq_qp_op {
	SQ_QP_CREATE    = 1, /* ibv_create_qp(pd, attr) and equivalents */
	SQ_QP_CREATE_EX = 2, /* create_qp_ex(ctx, attr_ex) */
	SQ_QP_TO_QP_EX  = 3, /* ibv_qp_to_qp_ex(qp) */
	SQ_QP_MODIFY    = 4, /* ibv_modify_qp(qp, attr, mask) */
	SQ_QP_DESTROY   = 5, /* ibv_destroy_qp(qp) */
	SQ_QP_ALLOC_PD  = 6, /* ibv_alloc_pd(ctx): reveals the context's ops */
	SQ_QP_OPEN_DEVICE = 7, /* ibv_open_device(dev): the same, before any PD or CQ */
};

/* sq_via is the attach cookie of the control-path probes: which library's
 * function produced the record. */
enum sq_via {
	SQ_VIA_IBV      = 0, /* libibverbs exported ibv_* */
	SQ_VIA_SIM      = 1, /* the simulated HCA's sqsim_* */
	SQ_VIA_PROVIDER = 2, /* a provider function found through verbs_context */
};

/* sq_fn indexes sq_qp_rec.fns: data-path functions revealed by the ops
 * table or the ibv_qp_ex. */
enum sq_fn {
	SQ_FN_POST_SEND = 0,
	SQ_FN_POLL_CQ,
	SQ_FN_POST_RECV,
	SQ_FN_CREATE_QP_EX,
	SQ_FN_WR_START,
	SQ_FN_WR_COMPLETE,
	SQ_FN_WR_ABORT,
	SQ_FN_WR_SEND,
	SQ_FN_WR_SEND_IMM,
	SQ_FN_WR_RDMA_WRITE,
	SQ_FN_WR_RDMA_WRITE_IMM,
	SQ_FN_WR_RDMA_READ,
	SQ_FN_WR_SET_INLINE_DATA,
	SQ_FN_WR_SET_INLINE_DATA_LIST,
	SQ_FN_WR_SET_SGE,
	SQ_FN_WR_SET_SGE_LIST,
	/* the other ibv_qp_ex builders and setters */
	SQ_FN_WR_ATOMIC_CMP_SWP,
	SQ_FN_WR_ATOMIC_FETCH_ADD,
	SQ_FN_WR_BIND_MW,
	SQ_FN_WR_LOCAL_INV,
	SQ_FN_WR_SEND_INV,
	SQ_FN_WR_SEND_TSO,
	SQ_FN_WR_ATOMIC_WRITE,
	SQ_FN_WR_SET_UD_ADDR,
	SQ_FN_WR_SET_XRC_SRQN,
	/* the ops table's SRQ receive, and the verbs_context's CQ ops */
	SQ_FN_POST_SRQ_RECV,
	SQ_FN_CREATE_CQ_EX,
	SQ_FN_MODIFY_CQ,
	/* an ibv_cq_ex's poll functions (sq_cq_rec of SQ_CQ_CREATE_EX) */
	SQ_FN_START_POLL,
	SQ_FN_NEXT_POLL,
	SQ_FN_END_POLL,
	SQ_FN_CQ_READ_OPCODE,
	SQ_FN_CQ_READ_BYTE_LEN,
	SQ_FN_CQ_READ_QP_NUM,
	SQ_FN_COUNT,
};

/* sq_cq_op is sq_cq_rec.op: the CQ call that produced it. */
enum sq_cq_op {
	SQ_CQ_CREATE    = 1, /* ibv_create_cq(ctx, cqe, ...) */
	SQ_CQ_CREATE_EX = 2, /* ibv_create_cq_ex(ctx, attr): reveals the poll functions */
	SQ_CQ_MODIFY    = 3, /* ibv_modify_cq(cq, attr): completion moderation */
	SQ_CQ_RESIZE    = 4, /* ibv_resize_cq(cq, cqe) */
	SQ_CQ_DESTROY   = 5, /* ibv_destroy_cq(cq) */
};

/* Every ring-buffer record starts with this header. */
struct sq_hdr {
	__u64 ts;       /* bpf_ktime_get_ns() when the call returned */
	__u64 entry_ts; /* when it was entered (0 if not known) */
	__u32 pid;      /* tgid */
	__u32 tid;
	__u8  kind;     /* enum sq_rec_kind */
	__u8  pad[7];
};

struct sq_caps {
	__u32 max_send_wr;
	__u32 max_recv_wr;
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 max_inline_data;
};

/* A control-path call: QP created, converted, modified, destroyed, or a PD
 * allocated. fns[] holds the data-path functions it revealed (0 = none). */
struct sq_qp_rec {
	struct sq_hdr hdr;
	__u64 qp;        /* struct ibv_qp * (or the ibv_context * for ALLOC_PD) */
	__u64 ctx;       /* struct ibv_context * */
	__u64 send_cq;
	__u64 recv_cq;
	__u32 qp_num;
	__u32 qp_type;
	struct sq_caps caps;
	__u32 sig_all;
	__s32 state;     /* requested state (MODIFY with IBV_QP_STATE), else -1 */
	__s32 ret;       /* return code (MODIFY, DESTROY), 0 otherwise */
	__u32 mask;      /* MODIFY attr_mask */
	__u8  op;        /* enum sq_qp_op */
	__u8  via;       /* enum sq_via */
	__u8  stopped;   /* 1: the process was sent SIGSTOP for unknown fns */
	__u8  pad;
	__u64 fns[SQ_FN_COUNT];
	__u64 gen;       /* CREATE, DESTROY: the QP's generation (0: not known) */
};

/* A CQ control-path call. fns[] holds the data-path functions it revealed
 * (create_cq_ex: the ibv_cq_ex poll and read functions). */
struct sq_cq_rec {
	struct sq_hdr hdr;
	__u64 cq;        /* struct ibv_cq * (== struct ibv_cq_ex *) */
	__u64 ctx;       /* struct ibv_context * */
	__s32 cqe;       /* create, resize: the depth the CQ has after the call */
	__s32 ret;       /* modify, resize, destroy: the return code */
	__u32 mod_mask;  /* modify: attr_mask */
	__u16 mod_count; /* modify: moderation cq_count */
	__u16 mod_period;/* modify: moderation cq_period (us) */
	__u8  op;        /* enum sq_cq_op */
	__u8  via;       /* enum sq_via */
	__u8  stopped;   /* 1: the process was sent SIGSTOP for unknown fns */
	__u8  pad[5];
	__u64 fns[SQ_FN_COUNT];
};

/* One send WR. */
struct sq_wr {
	__u64 wr_id;
	__u32 send_flags;
	__u32 bytes;     /* sum of the first SQ_MAX_SGES SGE lengths, or inline length */
	__u32 num_sge;
	__u8  opcode;
	__u8  sge_over;  /* SGEs past the SGE bound, not summed (saturates at 255) */
	__u16 pad;
};

/* SQ_API_* is sq_post_rec.api (trace.API values). */
#define SQ_API_POST_SEND 0
#define SQ_API_WR        1

/* One ibv_post_send call or one ibv_wr_start..complete/abort batch. Emitted
 * cut after wrs[n]. */
struct sq_post_rec {
	struct sq_hdr hdr;
	__u64 qp;
	__u32 qp_num;
	__s32 ret;
	__u32 n;          /* WRs recorded in wrs[] */
	__u32 truncated;  /* WRs of the list past the record bound */
	__u32 accepted;   /* index of *bad_wr, or all WRs when ret == 0 */
	__u8  api;        /* SQ_API_* */
	__u8  aborted;    /* wr API: ended by wr_abort */
	__u8  walk_capped;/* list longer than SQ_MAX_WALK: truncated is a lower bound */
	__u8  sge_cut;    /* counters mode, a wr batch being built: a WR has sge_over > 0 */
	struct sq_wr wrs[SQ_MAX_WRS];
};

struct sq_wc {
	__u64 wr_id;
	__u32 byte_len;
	__u32 qp_num;
	__u8  status;
	__u8  opcode;
	__u8  pad[6];
};

/* One ibv_poll_cq call that returned completions or an error. */
struct sq_poll_rec {
	struct sq_hdr hdr;
	__u64 cq;
	__s32 max;        /* num_entries */
	__s32 ret;
	__u32 n;          /* completions recorded in wcs[] */
	__u32 truncated;  /* returned completions past the bound */
	__u64 empty_before;/* this thread's empty polls of the CQ not reported before (by a record or in cq_stats) */
	struct sq_wc wcs[SQ_MAX_WCS];
};

struct sq_recv_rec {
	struct sq_hdr hdr;
	__u64 qp;
	__u32 qp_num;
	__u32 n;          /* receive WRs in the list (up to SQ_MAX_RECV_WALK) */
	__s32 ret;
	__u32 accepted;
};

struct sq_exit_rec {
	struct sq_hdr hdr;
	__u32 exit_code;  /* task->exit_code: status << 8 | signal */
	__u32 pad;
};

/* sq_proc_op is sq_proc_rec.op: how a process joined the trace. */
enum sq_proc_op {
	SQ_PROC_FORK  = 1, /* forked by a traced process (follow mode) */
	SQ_PROC_EXEC  = 2, /* a traced process ran execve (comm is the new one) */
	SQ_PROC_FIRST = 3, /* its first verbs control-path call (host-wide mode) */
};

/* A process joined the trace; hdr.pid is the process. */
struct sq_proc_rec {
	struct sq_hdr hdr;
	__u32 parent;     /* thread group id of the parent (fork) */
	__u8 op;          /* enum sq_proc_op */
	__u8 stopped;     /* sent SIGSTOP: user space continues it */
	__u8 pad[2];
	char comm[16];    /* TASK_COMM_LEN */
};

/* The attach cookie of an error-site probe (sentinel mode): where the
 * function's QP (and WR, or errno) is at the site, as probe/errsite found
 * it, and which site it is.
 *   bits  0..7   errno the call returns (0: read it, an int, from loc B)
 *   bits  8..19  the site's index in user space's table of sites
 *   bits 20..47  loc A, the QP: kind 2 bits, register 4 bits, stack offset
 *                10 bits signed in units of 8 bytes, adjust 12 bits signed
 *                (the pointer is the value minus adjust)
 *   bits 48..63  loc B, the WR (post_send) or the errno (wr_complete):
 *                kind 2 bits, register 4 bits, stack offset 10 bits
 * A kind is SQ_LOC_NONE, SQ_LOC_REG (a pt_regs register by its x86
 * number: rax 0, rcx 1, rdx 2, rbx 3, rsp 4, rbp 5, rsi 6, rdi 7, r8..r15)
 * or SQ_LOC_STACK (8 bytes at the stack pointer plus the offset). */
#define SQ_LOC_NONE  0
#define SQ_LOC_REG   1
#define SQ_LOC_STACK 2
#define SQ_SITE_ERRNO_SHIFT 0
#define SQ_SITE_INDEX_SHIFT 8
#define SQ_SITE_INDEX_BITS  12
#define SQ_SITE_LOCA_SHIFT  20
#define SQ_SITE_LOCB_SHIFT  48
#define SQ_SITE_LOC_OFF_BITS 10
#define SQ_SITE_ADJ_BITS    12

/* SGE lengths a failure record sums; past it the WR's sge_over counts. */
#define SQ_FAIL_SGES 16

/* An error site ran: the call is failing. Read at the site, before the
 * function returns. */
struct sq_fail_rec {
	struct sq_hdr hdr;
	__u64 cookie;     /* the probe's cookie: which site, where things were */
	__u64 qp;         /* struct ibv_qp * (or ibv_qp_ex *), 0 when not found */
	__u64 wr;         /* struct ibv_send_wr * refused (post_send), else 0 */
	__u64 wr_id;
	__u32 qp_num;
	__s32 state;      /* the ibv_qp's state at the site, -1 when not read */
	__s32 err;        /* the errno the call returns */
	__u32 send_flags;
	__u32 num_sge;
	__u32 bytes;      /* the WR's SGE lengths summed (its inline data) */
	__u8  opcode;
	__u8  has_wr;     /* the WR's fields were read */
	__u8  sge_over;   /* SGEs past SQ_FAIL_SGES, not summed */
	__u8  traced;     /* post_send's entry probe saw this call (an escalation
	                   * window): its post record carries the failure too */
	__u8  pad[4];
};

/* ---- maps -------------------------------------------------------------- */

/* Key of maps indexed by a user address of one process. */
struct sq_key {
	__u32 pid;
	__u32 pad;
	__u64 addr;
};

/* Per-CQ poll statistics (map cq_stats). empty is kept in both modes;
 * polls and cqes only in the counters mode. Monotonic: user space takes
 * differences, so neither side ever resets them. An entry whose key has
 * pad set holds counts a thread handed over after the life of that CQ
 * generation (pad, gen) had ended: they add to its last totals. */
struct sq_cq_stats {
	__u64 empty;
	__u64 polls;
	__u64 cqes;
	__u32 gen;       /* the CQ's generation (0: created before tracing, or not seen) */
	__u32 prev_gen;  /* the generation of the CQ at its address before it (0: none known) */
	__u64 ex_cqes;   /* of cqes, those of extended polls (counters mode): the
	                  * send-queue model does not see them */
};

/* Per-QP totals of the low-overhead (counters) mode. Posted WRs only (the
 * first `accepted` of each list); signaled counts IBV_SEND_SIGNALED only
 * (sq_sig_all is a property of the QP, see its create record). The last
 * three count what the bounds cut, as the post records' walk_capped and
 * sge_over say it in the events mode. */
struct sq_qp_counters {
	__u64 post_calls;
	__u64 wrs;
	__u64 inline_wrs;
	__u64 signaled;
	__u64 doorbells;      /* calls that posted at least one WR */
	__u64 errors;         /* calls returning non-zero */
	__u64 enomem;
	__u64 einval;
	__u64 inline_bytes;
	__u64 payload_bytes;
	__u64 payload_sges;   /* non-empty SGEs of non-inline WRs (those past the SGE bound counted as non-empty);
	                       * a READ's or an atomic's, which receive its response, are no payload */
	__u64 max_wrs_per_call; /* most WRs one call posted */
	__u32 qp_num;
	__u32 pad;
	__u64 walk_capped;    /* calls whose list was longer than SQ_MAX_WALK (any ret): WRs past it not counted */
	__u64 sge_cut_wrs;    /* posted WRs with more SGEs (or inline buffers) than SQ_MAX_SGES: bytes not all summed
	                       * (of the WRs walked; of a wr batch, its first SQ_MAX_WRS) */
	__u64 sges_not_summed;/* SGEs of those WRs past the bound (each WR's count saturates at 255) */
	__u64 recv_calls;     /* ibv_post_recv calls on the QP */
	__u64 recvs;          /* receive WRs they posted (lists walked up to SQ_MAX_RECV_WALK) */
	__u64 recv_failed;    /* of those calls, the ones returning non-zero */
};

/* ---- object lifecycle -------------------------------------------------- */

/* A QP, CQ or SRQ is one object from its create to its destroy: its
 * generation is its place in the creation sequence of the objects seen
 * (1, 2, ...; 0 for one created before tracing began). An address or a QP
 * number used again belongs to a new object, with a new generation. */

/* Key of the counters mode's per-QP totals: one QP's lifetime. */
struct sq_gen_key {
	__u32 pid;
	__u32 gen;
	__u64 addr;
};

/* sq_obj_type is sq_obj_rec.type. */
enum sq_obj_type {
	SQ_OBJ_QP  = 1,
	SQ_OBJ_CQ  = 2,
	SQ_OBJ_SRQ = 3,
};

/* sq_obj_op is sq_obj_rec.op. */
enum sq_obj_op {
	SQ_OBJ_CREATE  = 1,
	SQ_OBJ_DESTROY = 2,
};

/* A CQ or SRQ created or destroyed. */
struct sq_obj_rec {
	struct sq_hdr hdr;
	__u64 addr;      /* struct ibv_cq * or struct ibv_srq * */
	__u32 gen;
	__s32 ret;       /* DESTROY: the return code */
	__u32 size;      /* CREATE: the CQ's cqe, the SRQ's max_wr */
	__u8  type;      /* enum sq_obj_type */
	__u8  op;        /* enum sq_obj_op */
	__u8  via;       /* enum sq_via */
	__u8  pad;
	/* CQ CREATE: the counts the CQ that held this address before had not
	 * handed over yet, with its generation (all 0: none) */
	struct sq_cq_stats prev;
};

/* ---- the counters mode's send-queue model ----------------------------- */

/* Each QP's send queue as the counters mode keeps it (map qp_occ, keyed by
 * process and QP number): the WRs its posts put in, the ones completions
 * retired (a send completion retires its WR and every earlier one), and a
 * ring of its signaled WRs outstanding, each with the number of WRs posted
 * through it: a completion of the oldest retires up to that number. */
#define SQ_SIG_RING     256 /* signaled WRs kept per QP (a power of two) */
#define SQ_SIG_PER_CALL 32  /* signaled WRs of one post_send list kept */
#define SQ_OCC_WCS      256 /* completions of one poll looked at */

/* sq_occ.flags */
#define SQ_OCC_SYNCED     1 /* outstanding is exact: the QP was created in the
                             * trace, or a completion matched a WR posted in it */
#define SQ_OCC_SIG_ALL    2 /* sq_sig_all: every WR signaled, a completion each */
#define SQ_OCC_ERR        4 /* an error completion matched no signaled WR kept
                             * (a flush of unsignaled WRs, or a receive's) */
#define SQ_OCC_IDS_REPEAT 8 /* two signaled WRs in a row had one wr_id: a
                             * completion does not prove which it is of */
#define SQ_OCC_WR_API    16 /* WRs were posted through the ibv_wr_* API, which
                             * the model does not follow */
#define SQ_OCC_SIG_SEEN  32 /* a signaled WR was posted: first_run has ended */

struct sq_sig {
	__u64 wr_id;
	__u32 cum;   /* low 32 bits of sq_occ.posted through this WR */
	__u32 ts;    /* bpf_ktime_get_ns() >> SQ_SIG_TS_SHIFT at its post */
};
#define SQ_SIG_TS_SHIFT 20

struct sq_occ {
	__u64 posted;      /* WRs its posts put in (the accepted ones) */
	__u64 retired;     /* of those, the ones completions retired */
	__u64 peak;        /* most outstanding after a post */
	__u64 longest_run; /* longest run of unsignaled WRs */
	__u64 cur_run;     /* unsignaled WRs since the last signaled one */
	__u64 first_run;   /* the run before the first signaled WR (so far, if none yet) */
	__u64 signaled;    /* signaled WRs posted (by their flag) */
	__u64 send_cqes;   /* send completions of the QP polled (ibv_poll_cq) */
	__u64 cqe_errors;  /* of those, with an error status */
	__u64 unmatched;   /* completions that matched no signaled WR kept */
	__u64 unkept;      /* signaled WRs the ring had no room for */
	__u64 fail_repeats;/* failed calls not sent: each as the QP's last sq_occ_fail_rec */
	__u64 send_cq;     /* the QP's send CQ (struct ibv_cq *) */
	__u64 last_wr_id;  /* of the last signaled WR kept */
	__u32 gen;         /* the QP's generation (sq_gen_key.gen) */
	__u32 flags;       /* SQ_OCC_* */
	__u32 head, tail;  /* ring entries head..tail-1 are outstanding */
	__u32 fail_out;    /* outstanding, accepted and errno of the last failure sent */
	__u32 fail_accepted;
	__s32 fail_err;
	__u32 pad;
};

struct sq_qp_occ {
	struct sq_occ s;
	struct sq_sig ring[SQ_SIG_RING];
};

struct sq_qpn_key {
	__u32 pid;
	__u32 qpn;
};

/* A failed ibv_post_send of the counters mode with its QP's send queue
 * after the call (its accepted WRs in): the refused WR, the QP's state, and
 * when the oldest signaled WR outstanding was posted. A failure like the
 * QP's last one sent (same errno, WRs accepted and outstanding) is only
 * counted (sq_occ.fail_repeats). */
struct sq_occ_fail_rec {
	struct sq_hdr hdr;
	__u64 qp;
	__u64 wr_id;       /* the WR refused */
	__u64 oldest_ns;   /* post time of the oldest signaled WR outstanding (0: none kept) */
	struct sq_occ o;
	__u32 qp_num;
	__s32 err;
	__s32 state;       /* the ibv_qp's state, -1 when not read */
	__u32 accepted;
	__u32 send_flags;
	__u32 num_sge;
	__u32 bytes;
	__u8  opcode;
	__u8  has_wr;
	__u8  sge_over;
	__u8  walk_capped; /* the list was longer than the walk: accepted is a lower bound */
};

/* Counters mode: a QP's totals at its destroy, which ends them, with its
 * send queue then (has_occ: kept). */
struct sq_qp_final_rec {
	struct sq_hdr hdr;
	struct sq_gen_key key;
	struct sq_qp_counters c;
	struct sq_occ o;
	__u64 oldest_ns;
	__u32 has_occ;
	__u32 pad;
};

/* A hold on a stopped process, an entry of the map sq_holds_v1 that every
 * sqscope of the host shares (pinned under bpffs). Each tracer that stops
 * a process adds its own before the SIGSTOP; the last one whose probes are
 * placed continues it. The layout is fixed for the map's name: a change
 * takes a new name (_v2). */
struct sq_hold_key {
	__u32 pid;      /* the process held */
	__u32 holder;   /* the holding tracer's process (tgid) */
	__u64 tracer;   /* which tracer of that process (several may run in one) */
};

struct sq_hold {
	__u64 holder_start; /* the holder's start time (clock ticks after boot, /proc/PID/stat): a reused pid is not it */
	__u64 ts;           /* when the hold was taken (bpf_ktime_get_ns) */
};

/* SQ_MODE_* is the const volatile targ_mode. */
#define SQ_MODE_EVENTS   0
#define SQ_MODE_COUNTERS 1

#endif
