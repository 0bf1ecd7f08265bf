//go:build ignore

/* The floor of probe overhead: programs that do nothing. Attached where
 * sqscope attaches its data-path programs (post_send and poll_cq, entry and
 * return), they cost what any uprobe-based tracer must pay there, the trap
 * into the kernel and back, and nothing else. `make bench` compares
 * sqscope's programs against them.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("uprobe")
int floor_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int floor_ret(void *ctx)
{
	return 0;
}
