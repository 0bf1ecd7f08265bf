/* Part of verbs.bpf.c: processes joining the trace. In follow mode every
 * process the target forks (and theirs) is added to tree, so wanted() takes
 * it; an exec of a traced process stops it until user space has hooked the
 * verbs functions of its new executable (and the libibverbs it will load).
 * Tracing every process, a process joins at its first verbs control-path
 * call (ctl_note). Each join is one sq_proc_rec, with the command name
 * (proc_joined, in output.bpf.h). */
#ifndef SQSCOPE_FOLLOW_BPF_H
#define SQSCOPE_FOLLOW_BPF_H

/* A new process (not a thread) whose parent is traced joins the tree. */
SEC("raw_tracepoint/sched_process_fork")
int proc_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct___sq *parent = (void *)ctx->args[0];
	struct task_struct___sq *child = (void *)ctx->args[1];
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 tgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (!follow || !targ_tgid || tgid == ptgid || !wanted(ptgid))
		return 0;
	if (bpf_map_update_elem(&tree, &tgid, &one, BPF_ANY)) {
		count_lost(); /* full: what the process does is lost, and said so */
		return 0;
	}
	proc_joined(tgid, ptgid, SQ_PROC_FORK, child->comm, 0);
	return 0;
}

/* A traced process ran a new program: its comm changed, and its new
 * executable may hold verbs functions not hooked yet, so the target (-p
 * --wait on a shell that execs the program) and, in follow mode, every
 * process followed waits for user space as a control-path record's
 * process does. */
SEC("raw_tracepoint/sched_process_exec")
int proc_exec(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!targ_tgid || !wanted(tgid))
		return 0; /* tracing every process: execs are not followed */
	proc_joined(tgid, 0, SQ_PROC_EXEC, 0, follow || (stop_target_exec && tgid == targ_tgid));
	return 0;
}

#endif
