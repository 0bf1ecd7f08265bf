/* Part of verbs.bpf.c: the knobs user space sets before load, the maps the
 * programs share, and what a thread's data-path probes keep between entry
 * and return. A map only one part uses is defined with that part. */
#ifndef SQSCOPE_MAPS_BPF_H
#define SQSCOPE_MAPS_BPF_H

/* ---- knobs, set before load -------------------------------------------- */

const volatile __u32 targ_tgid = 0;    /* 0: every process */
const volatile __u32 self_tgid = 0;    /* the tracer: never stopped */
/* 1: the processes targ_tgid starts (fork, clone) are traced too: the
 * tree map holds them */
const volatile __u8 follow = 0;
/* the target runs a new program: stop it while its files are hooked (a
 * running process of -p, not a command sqscope started, whose program is
 * hooked before it runs) */
const volatile __u8 stop_target_exec = 0;
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
/* this tracer in the shared holds (sq_holds_v1): its id within its process
 * and its process's start time */
const volatile __u64 hold_tracer = 0;
const volatile __u64 self_start = 0;

/* ---- the cut ------------------------------------------------------------ */

/* Set once by user space, the one global it writes after load, when the
 * trace stops while the target runs on: from then on no data-path program
 * records or counts a call (past_cut), so every probe stops at one moment,
 * not each at its own detach. A call is before the cut when it was decided
 * there: a post (post_send, post_recv, wr_complete, wr_abort) at its
 * entry, since the HCA may complete its WRs before it returns, a poll at
 * its return, where it sees its completions. So every completion recorded
 * is of a post recorded. User space waits for the posts in flight at the
 * cut to return (in_flight in exit.bpf.h) before it detaches. */
__u8 cut = 0;

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

/* Processes sent SIGSTOP, until user space continues them: detaching, it
 * continues every one left here, also those whose record it never read
 * (stopped between its last read and the probes' removal). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} stopped_pids SEC(".maps");

/* stops_off[0] is set by the tracer's hold watchdog once the tracer has
 * died: until the kernel has released its probes (seconds, for hundreds)
 * they stop no process again (probe/holdwatch.go). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stops_off SEC(".maps");

/* The holds of every sqscope on the host (struct sq_hold_key): user space
 * pins it by name so that all of them load the same map; unpinned (no
 * bpffs) it holds this tracer's own only. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sq_hold_key);
	__type(value, struct sq_hold);
} sq_holds_v1 SEC(".maps");

/* Follow mode: the processes descended from targ_tgid (not targ_tgid
 * itself), added at their fork, removed at their exit. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} tree SEC(".maps");

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
	/* Counts of this thread not yet added to the shared per-CQ and (counters
	 * mode) per-QP maps: a map lookup per call costs more than the rest of
	 * an empty poll's probe. Added when the thread moves to another CQ or
	 * QP (or one was created that may have taken the address), every
	 * SQ_PEND_MAX calls, before any record that reports them, and when
	 * the thread exits. */
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
	__u8 call_counted; /* SQ_CALL_* */
	__u8 pad3[3];
	__u64 call_inline_bytes;
	__u64 call_payload_bytes;
	/* Counters mode: what the bounds cut, pending like the counts above.
	 * Cuts are rare, so they are kept apart from the per-call tally: only
	 * a post whose walk saw one writes them (and then call_counted has
	 * SQ_CALL_CUT, and call_cut_* hold what its entry added). */
	__u32 pend_walk_capped;
	__u32 pend_sge_cut_wrs;
	__u32 pend_sges_not_summed;
	__u32 call_sge_cut_wrs;
	__u32 call_sges_not_summed;
	__u32 pad4;
	/* Counters mode: the generation of the QP the pending counts are of,
	 * and qp_gen when it was looked up */
	__u32 pend_gen;
	__u32 pend_epoch;
	/* cq_seq when the pending poll counts of pend_cq began: a CQ born at
	 * that address since then is not the one they are of */
	__u32 pend_cq_seq;
	__u32 pad5;
	/* Counters mode: the QP's send-queue model before the post in
	 * progress (occupancy.bpf.h), which a failed call's return restores */
	__u64 occ_run;
	__u64 occ_longest;
	__u64 occ_peak;
	__u64 occ_unkept;
	__u64 occ_sigs;
	__u64 occ_first_run;
	__u64 call_wr_id; /* a one-WR post's wr_id */
	__u32 occ_flags;
	__u32 occ_wrs;    /* the WRs its entry counted in (0: none, no model) */
	/* Counters mode: completions of extended polls of pend_cq pending */
	__u32 pend_ex_cqes;
	__u32 pad6;
	/* qp_num of the QPs this thread posted to last (qpn_cache.bpf.h):
	 * last, so that it keeps the fields above on few cache lines */
	struct qpn_way qpns[2 * SQ_QPN_SETS];
};

/* thread_state.call_counted: the post in progress was counted at its
 * entry, and (CUT) its walk saw a cut. */
#define SQ_CALL_COUNTED 1
#define SQ_CALL_CUT     2

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

/* The generation of the newest CQ (raised by cq_born): generations only
 * grow, so a CQ whose generation is above a thread's pend_cq_seq was born
 * after the thread's pending polls of its address. */
__u64 cq_seq = 0; /* 64 bits: the compare-and-swap needs them */

/* ibv_wr_* batch under construction, per (process, qpx). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sq_key);
	__type(value, struct sq_post_rec);
} wr_batches SEC(".maps");

/* Empty polls (both modes), polls and CQEs (counters mode), per CQ. Room
 * for the CQs of 4,096 QPs and their receivers, each with its own, with
 * the slack an LRU map needs before it evicts (its free lists are per
 * CPU): an entry evicted before the next flush would lose its counts. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, struct sq_key);
	__type(value, struct sq_cq_stats);
} cq_stats SEC(".maps");

/* Counters mode: per-QP totals, one entry per QP lifetime; as large as
 * cq_stats, for the same reason. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, struct sq_gen_key);
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

/* records this CPU put in the ring: wake_flags asks the ring how much is
 * unread at every SQ_WAKE_EVERY-th */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} wake_ticks SEC(".maps");

/* Let bpf2go see the record types that only user space decodes. */
const struct sq_qp_rec *unused_qp __attribute__((unused));
const struct sq_recv_rec *unused_recv __attribute__((unused));
const struct sq_exit_rec *unused_exit __attribute__((unused));
const struct sq_proc_rec *unused_proc __attribute__((unused));
const enum sq_proc_op *unused_proc_op __attribute__((unused));
const struct sq_obj_rec *unused_obj __attribute__((unused));
const struct sq_qp_final_rec *unused_qp_final __attribute__((unused));
const struct sq_fail_rec *unused_fail __attribute__((unused));
const struct sq_occ_fail_rec *unused_occ_fail __attribute__((unused));
const struct sq_sig *unused_sig __attribute__((unused));
const enum sq_obj_type *unused_obj_type __attribute__((unused));
const enum sq_obj_op *unused_obj_op __attribute__((unused));
const enum sq_rec_kind *unused_kind __attribute__((unused));
const enum sq_qp_op *unused_op __attribute__((unused));
const enum sq_via *unused_via __attribute__((unused));
const enum sq_fn *unused_fn __attribute__((unused));
const struct sq_cq_rec *unused_cq __attribute__((unused));
const enum sq_cq_op *unused_cq_op __attribute__((unused));

#endif
