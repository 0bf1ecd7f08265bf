// Package bench holds the eBPF programs `make bench` (cmd/sqbench)
// measures sqscope's programs against; sqscope itself never loads them.
// floor.bpf.c has empty programs (the unavoidable cost of a uprobe),
// least.bpf.c only what a full-event or a counting tracer cannot do
// without, cost.bpf.c one operation each (what the building blocks of
// a probe cost), and qpcache.bpf.c the hit rate of a thread's cache of QP
// numbers, by the cache's shape, and slowtrap.bpf.c makes every uprobe
// trap dearer (`sqbench -slow-traps`), to check tests on a slower host. As in package bpf, the generated .go and .o files are
// committed; `make generate` rebuilds them.
package bench

//go:generate go tool bpf2go -target amd64 Floor floor.bpf.c -- -I. -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -target amd64 Cost cost.bpf.c -- -I. -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -target amd64 -type least_post -type least_list -type least_poll Least least.bpf.c -- -I. -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -target amd64 -type qpc_count QPCache qpcache.bpf.c -- -I. -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -target amd64 SlowTrap slowtrap.bpf.c -- -I. -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
