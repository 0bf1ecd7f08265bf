/* Part of verbs.bpf.c: process exit; at the cut, the posts in flight; and
 * the hand-over of the counts threads keep pending when user space
 * detaches. */
#ifndef SQSCOPE_EXIT_BPF_H
#define SQSCOPE_EXIT_BPF_H

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
	char comm[16];
	struct signal_struct___sq *signal;
} __attribute__((preserve_access_index));

/* Set by the one exit record of the target (targ_tgid): two threads that
 * exit together may both see live at 0. */
__u64 targ_exited = 0; /* 64 bits: the compare-and-swap needs them */

/* A process ends with its last thread, whichever that is: the main thread
 * may have left long before (pthread_exit) and wait as a zombie. One
 * record per process, sent by the thread that finds no other one left. */
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
	/* the target, a process followed from it (tree), or, tracing every
	 * process, one that used the verbs control path (procs) */
	int is_targ = targ_tgid && tgid == targ_tgid;
	void *member = targ_tgid ? (follow ? bpf_map_lookup_elem(&tree, &tgid) : 0)
				 : bpf_map_lookup_elem(&procs, &tgid);

	if (!is_targ && !member)
		return 0;
	/* the last thread of the group decremented live before this point */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	if (is_targ ? __sync_val_compare_and_swap(&targ_exited, 0, 1) != 0
		    : bpf_map_delete_elem(targ_tgid ? (void *)&tree : (void *)&procs, &tgid) != 0)
		return 0; /* another thread sent it */
	if (!is_targ)
		bpf_map_delete_elem(&procs, &tgid);
	fill_hdr(&r.hdr, SQ_REC_EXIT, id, 0);
	r.exit_code = BPF_CORE_READ(task, exit_code);
	output_now(&r, sizeof(r));
	return 0;
}

/* ---- the cut, and the hand-over when detaching --------------------------- */

struct seq_file;

struct bpf_iter_meta___sq {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__task___sq {
	struct bpf_iter_meta___sq *meta;
	struct task_struct___sq *task;
} __attribute__((preserve_access_index));

/* iter_state is the data-path state of an iterated thread of the target
 * (0 when it has none), its thread id in *tid and process id in *tgid. */
static __always_inline struct thread_state *iter_state(struct task_struct___sq *task, __u32 *tid, __u32 *tgid)
{
	struct thread_state *st;

	if (!task)
		return 0;
	*tgid = task->tgid;
	if (!wanted(*tgid))
		return 0;
	*tid = task->pid;
	st = slot_of(*tid);
	if (!st || st->owner != *tid)
		st = fallback_state(task, *tid, 0);
	return st;
}

/* post_in_flight: the thread is inside a post whose entry was recorded
 * and whose return has not run yet. The counters mode's post_send counts
 * at entry and its return leaves nothing behind on success, so there only
 * a wr batch's completion is waited for. */
static __always_inline int post_in_flight(struct thread_state *st)
{
	return st->post.live && (targ_mode == SQ_MODE_EVENTS || st->post.op != SQ_OP_POST_SEND);
}

/* in_flight writes the thread id of every thread inside a post begun
 * before the cut: user space sets the cut, then waits until none is left
 * (or a bound) before it detaches, so that their records are sent. */
SEC("iter/task")
int in_flight(struct bpf_iter__task___sq *ctx)
{
	struct thread_state *st;
	__u32 tid = 0, tgid = 0;

	st = iter_state(ctx->task, &tid, &tgid);
	if (st && post_in_flight(st))
		bpf_seq_write(ctx->meta->seq, &tid, sizeof(tid));
	return 0;
}

/* hand_over runs once over every thread when user space detaches from a
 * target that keeps running: the counts its threads keep pending (up to
 * SQ_PEND_MAX calls each) go to the shared maps user space reads last.
 * The data-path probes are gone by then, so nothing adds to them. It
 * writes the thread id of every thread still inside a post begun before
 * the cut: its return was not seen, its record never sent. */
SEC("iter/task")
int hand_over(struct bpf_iter__task___sq *ctx)
{
	struct thread_state *st;
	__u32 tid = 0, tgid = 0;

	st = iter_state(ctx->task, &tid, &tgid);
	if (!st)
		return 0;
	flush_polls(st, tgid);
	flush_posts(st, tgid);
	if (post_in_flight(st))
		bpf_seq_write(ctx->meta->seq, &tid, sizeof(tid));
	return 0;
}

#endif
