// Package trapcost measures what one uprobe trap costs on this host: an
// empty program on a function of this executable that starts as C
// functions do, timed in the calling thread's CPU time. The sentinel
// mode charges its windows' probe hits at this price (probe), and the
// tests scale their waits by it (internal/bpftest).
package trapcost

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// timeCalls is what one of n calls of trapSite costs in this thread's
// CPU time (a busy host's preemptions are cpuShare's part).
func timeCalls(n int) time.Duration {
	x := 0
	start := threadCPU()
	for range n {
		x = trapSite(x)
	}
	d := threadCPU() - start
	if x != n { // the calls were not made as written
		return -1
	}
	return d / time.Duration(n)
}

// Measure places an empty uprobe on trapSite in this binary and returns
// what a call then costs more than untraced: the median of batches taken
// over the last 50 of 150 ms (so that a tracer that places its own probes beside new
// ones, as a concurrent tracer would, is in the figure).
func Measure() (time.Duration, error) {
	trap, _, err := MeasureRemoval()
	return trap, err
}

// MeasureRemoval is Measure, and how long the probe then took to remove:
// its trap is taken until the kernel has taken it out, and the kernel
// waits for a grace period before the removal returns.
func MeasureRemoval() (trap, removal time.Duration, err error) {
	// attached as sqscope's own probes are: a uprobe_multi link where
	// the kernel has them (which CAP_BPF and CAP_PERFMON allow), else a
	// perf event
	multi := features.HaveBPFLinkUprobeMulti() == nil
	spec := &ebpf.ProgramSpec{
		Type:         ebpf.Kprobe,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		License:      "GPL",
	}
	if multi {
		spec.AttachType = ebpf.AttachTraceUprobeMulti
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		return 0, 0, fmt.Errorf("loading an empty program: %w", err)
	}
	defer prog.Close()
	// by its real path, as the probes of sqscope are placed (a probe's
	// path is kept as given: /proc/self/exe would name every reader)
	path, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, 0, err
	}
	exe, err := link.OpenExecutable(path)
	if err != nil {
		return 0, 0, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	untraced := timeCalls(100000)
	if untraced < 0 {
		return 0, 0, fmt.Errorf("timing the calls: trapSite returned a wrong count")
	}
	// go test links without a symbol table: the offset comes from the
	// function's address and the mapping that holds it
	off, err := fileOffset(trapSiteAddr())
	if err != nil {
		return 0, 0, err
	}
	var l link.Link
	if multi {
		l, err = exe.UprobeMulti(nil, prog, &link.UprobeMultiOptions{Addresses: []uint64{off}, PID: uint32(os.Getpid())})
	} else {
		l, err = exe.Uprobe("", prog, &link.UprobeOptions{Address: off, PID: os.Getpid()})
	}
	if err != nil {
		return 0, 0, fmt.Errorf("placing a uprobe: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()
	var batches []time.Duration
	start := time.Now()
	for time.Since(start) < 150*time.Millisecond {
		b := timeCalls(500)
		if time.Since(start) > 100*time.Millisecond {
			batches = append(batches, b)
		}
	}
	if len(batches) == 0 {
		return 0, 0, fmt.Errorf("no batch timed")
	}
	slices.Sort(batches)
	trap = max(0, batches[len(batches)/2]-untraced)
	start = time.Now()
	l.Close()
	closed = true
	return trap, time.Since(start), nil
}

// fileOffset is where in this executable's file the code at addr lies.
func fileOffset(addr uintptr) (uint64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(maps), "\n") {
		var start, end, off uint64
		var perms, dev, path string
		var inode uint64
		if n, _ := fmt.Sscanf(line, "%x-%x %s %x %s %d %s", &start, &end, &perms, &off, &dev, &inode, &path); n < 7 {
			continue
		}
		if path == exe && uint64(addr) >= start && uint64(addr) < end {
			return uint64(addr) - start + off, nil
		}
	}
	return 0, fmt.Errorf("%#x is in no mapping of %s", addr, exe)
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}
