//go:build ignore

/* Dearer uprobe traps, for checking that sqscope's tests and timings hold
 * on a host whose traps cost several times this one's (a slower VM, a
 * nested one): a concurrent tracer whose probes, placed where every other
 * tracer's are, spin for delay_ns each time they run. A uprobe's trap is
 * taken once for all the programs at its address, so each trap there
 * costs delay_ns more. `sqbench -slow-traps DURATION` places them; sqscope
 * itself never loads this.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u64 delay_ns = 0;

/* the probes' runs, and the ns they spun */
__u64 runs = 0;
__u64 spun_ns = 0;

static long spin(__u32 i, void *ctx)
{
	return bpf_ktime_get_ns() >= *(__u64 *)ctx;
}

static __always_inline int slow(void)
{
	__u64 start = bpf_ktime_get_ns(), end = start + delay_ns;

	/* bounded: 1M turns of a clock read are far above any delay asked */
	bpf_loop(1 << 20, spin, &end, 0);
	__sync_fetch_and_add(&runs, 1);
	__sync_fetch_and_add(&spun_ns, bpf_ktime_get_ns() - start);
	return 0;
}

SEC("uprobe")
int slow_entry(void *ctx)
{
	return slow();
}

SEC("uretprobe")
int slow_ret(void *ctx)
{
	return slow();
}
