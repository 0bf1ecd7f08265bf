#!/bin/sh
# Runs as PID 1 in the guest, in the host's root file system. Sets up the
# Soft-RoCE device rxe0, runs every cmds/NN.sh in name order, each in its own
# directory out/NN/ with its stdout, stderr, exit status and start/end
# uptime written next to it, then powers the guest off. If this script dies,
# the kernel panics and the VM exits (panic=-1 with -no-reboot).
export PATH=/tmp/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LC_ALL=C
E=/tmp/e2e
up() { cut -d' ' -f1 /proc/uptime; }
echo "sqscope-e2e: userspace at $(up)s"

setup() {
	# Programs run from tmpfs: the results share has no page cache, so
	# every exec (and every uprobe placed in the binary) would read it over
	# 9p again, which made each traced run seconds slower.
	mkdir -p /tmp/bin && cp $E/bin/* /tmp/bin/ || return
	echo "$(up) modprobe"
	modprobe rdma_rxe || return
	modprobe dummy || return
	echo "$(up) links"
	ip link set lo up || return
	ip link add dummy0 type dummy || return
	ip addr add 10.77.0.1/24 dev dummy0 || return
	ip link set dummy0 up || return
	rdma link add rxe0 type rxe netdev dummy0 || return
	echo "$(up) rxe0 added"
	# GID index 1 (RoCE v2, IPv4-mapped) appears once the address is seen.
	i=0
	while [ $i -lt 100 ]; do
		g=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)
		case "$g" in
		"" | 0000:0000:0000:0000:0000:0000:0000:0000) ;;
		*) echo "rxe0 gid 1: $g"; rdma link show; return 0 ;;
		esac
		sleep 0.05
		i=$((i + 1))
	done
	echo "rxe0 has no GID at index 1"
	return 1
}
# For tracers: BPF and tracing file systems (not fatal when absent).
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ulimit -l unlimited 2>/dev/null

mkdir -p $E/out
setup > $E/out/setup.log 2>&1
echo $? > $E/out/setup.status
echo "sqscope-e2e: rxe0 ready at $(up)s"

if [ "$(cat $E/out/setup.status)" = 0 ]; then
	for f in $E/cmds/*.sh; do
		[ -e "$f" ] || continue
		n=${f##*/}
		n=${n%.sh}
		d=$E/out/$n
		mkdir -p "$d"
		t=$(cat "$E/cmds/$n.timeout" 2>/dev/null || echo 60)
		s=$(up)
		(cd "$d" && exec timeout -k 5 "$t" sh "$f") > "$d/stdout" 2> "$d/stderr" < /dev/null
		echo $? > "$d/status"
		echo "$s $(up)" > "$d/time"
	done
fi
dmesg > $E/out/dmesg.log 2>&1
up > $E/out/done
echo "sqscope-e2e: done at $(up)s"
sync
echo o > /proc/sysrq-trigger
sleep 10
