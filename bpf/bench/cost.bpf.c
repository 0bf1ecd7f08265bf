//go:build ignore

/* What the building blocks of a probe cost on this kernel: each program
 * does one operation once, as a probe does (or, for bpf_loop, COST_REPS
 * iterations), attached to the same uprobe as the others. `make bench`
 * runs them with the kernel's BPF statistics on and reports each one's
 * time above the empty program's.
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "../events.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define COST_REPS 10

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64[6]);
} cost_hash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64[6]);
} cost_lru SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64[6]);
} cost_task SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[2048]);
} cost_buf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 << 20);
} cost_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64[6]);
} cost_slots SEC(".maps");

/* keeps the compiler from dropping the work */
volatile __u64 cost_sink;
/* ring-buffer records that did not fit (the output measured must succeed) */
volatile __u64 cost_lost;

SEC("uprobe")
int cost_empty(struct pt_regs *ctx)
{
	return 0;
}

/* a WR header (40 bytes) from the second argument: post_send's WR list */
SEC("uprobe")
int cost_read_wr(struct pt_regs *ctx)
{
	__u64 v[5] = {};

	bpf_probe_read_user(&v, sizeof(v), (void *)PT_REGS_PARM2(ctx));
	cost_sink += v[1];
	return 0;
}

/* cost_read_wr_sge follows v[2], the WR's sg_list, to an SGE of two
 * __u64: pinned to the events.h offsets */
_Static_assert(IBV_SEND_WR_SG_LIST == 2 * sizeof(__u64), "v[2] of a WR header is not its sg_list");
_Static_assert(IBV_SGE_SIZE == 2 * sizeof(__u64), "an SGE is not two __u64");

/* the WR header, then its first SGE (16 bytes): the two reads a one-WR
 * post needs */
SEC("uprobe")
int cost_read_wr_sge(struct pt_regs *ctx)
{
	__u64 v[5] = {}, sge[2] = {};

	bpf_probe_read_user(&v, sizeof(v), (void *)PT_REGS_PARM2(ctx));
	bpf_probe_read_user(&sge, sizeof(sge), (void *)v[2]);
	cost_sink += sge[1];
	return 0;
}

/* 2 KiB of the WR list in one read */
SEC("uprobe")
int cost_read2k(struct pt_regs *ctx)
{
	__u32 zero = 0;
	__u8 *b = bpf_map_lookup_elem(&cost_buf, &zero);

	if (b) {
		bpf_probe_read_user(b, 2048, (void *)PT_REGS_PARM2(ctx));
		cost_sink += b[100];
	}
	return 0;
}

SEC("uprobe")
int cost_ktime(struct pt_regs *ctx)
{
	cost_sink += bpf_ktime_get_ns();
	return 0;
}

SEC("uprobe")
int cost_task_storage(struct pt_regs *ctx)
{
	__u64 *v = bpf_task_storage_get(&cost_task, bpf_get_current_task_btf(), 0,
					BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (v)
		cost_sink += v[0];
	return 0;
}

/* the per-thread state sqscope uses: a slot picked by the thread id,
 * checked to be the thread's */
SEC("uprobe")
int cost_thread_slot(struct pt_regs *ctx)
{
	__u32 tid = bpf_get_current_pid_tgid();
	__u32 idx = tid & 4095;
	__u64 *v = bpf_map_lookup_elem(&cost_slots, &idx);

	if (v && v[0] == tid)
		cost_sink += v[1];
	else if (v)
		v[0] = tid;
	return 0;
}

SEC("uprobe")
int cost_hash_lookup(struct pt_regs *ctx)
{
	__u32 k = bpf_get_current_pid_tgid();
	__u64 *v = bpf_map_lookup_elem(&cost_hash, &k);

	if (!v) {
		__u64 z[6] = {};

		bpf_map_update_elem(&cost_hash, &k, &z, BPF_ANY);
		return 0;
	}
	cost_sink += v[0];
	return 0;
}

/* what the per-call argument maps cost before task storage */
SEC("uprobe")
int cost_lru_update(struct pt_regs *ctx)
{
	__u32 k = bpf_get_current_pid_tgid();
	__u64 z[6] = {};

	bpf_map_update_elem(&cost_lru, &k, &z, BPF_ANY);
	return 0;
}

/* a 104-byte record, as big as a one-WR post record; user space drains
 * the ring as sqscope's reader does */
SEC("uprobe")
int cost_ringbuf_output(struct pt_regs *ctx)
{
	__u32 zero = 0;
	__u8 *b = bpf_map_lookup_elem(&cost_buf, &zero);

	if (b && bpf_ringbuf_output(&cost_ring, b, 104, BPF_RB_NO_WAKEUP))
		cost_lost++;
	return 0;
}

static long cost_step(__u32 i, void *c)
{
	cost_sink += i;
	return 0;
}

SEC("uprobe")
int cost_bpf_loop(struct pt_regs *ctx)
{
	bpf_loop(COST_REPS, cost_step, 0, 0);
	return 0;
}
