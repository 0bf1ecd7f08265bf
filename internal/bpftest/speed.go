package bpftest

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The machine the suite's waits were first set on: a uprobe trap there
// costs about 0.6 µs (BENCHMARKS.md), and a test gets a whole CPU.
const refTrap = 600 * time.Nanosecond

// Speed is what this host measured: what one uprobe trap costs and what
// share of a CPU a busy thread gets. Scale is how many times longer than
// on the reference machine the BPF tests' waits are allowed to take.
type Speed struct {
	Trap     time.Duration // one uprobe trap, entry only, with an empty program
	CPUShare float64       // CPU time over wall time of a spinning thread, (0, 1]
	Scale    float64       // max(1, Trap/refTrap) / CPUShare, in [1, 20]; or SQSCOPE_TEST_SCALE
	Err      error         // why the trap could not be measured (Scale then uses the CPU share only)
}

func (s Speed) String() string {
	trap := "not measured: " + fmt.Sprint(s.Err)
	if s.Err == nil {
		trap = s.Trap.String()
	}
	return fmt.Sprintf("a uprobe trap costs %s, a busy thread gets %.0f%% of a CPU: waits ×%.1f", trap, 100*s.CPUShare, s.Scale)
}

var (
	speedOnce sync.Once
	speed     Speed
)

// HostSpeed measures the host once per test binary (about 0.1 s) and logs
// it in the test that asked first.
func HostSpeed(t testing.TB) Speed {
	t.Helper()
	speedOnce.Do(func() {
		speed = measureSpeed()
		t.Logf("this host: %v", speed)
	})
	return speed
}

// Timeout is d on the reference machine, scaled to this host's speed: a
// wait that must not fail on a slow or busy host but still ends.
func Timeout(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	return time.Duration(float64(d) * HostSpeed(t).Scale)
}

func measureSpeed() Speed {
	s := Speed{CPUShare: cpuShare()}
	s.Trap, s.Err = trapCost()
	trapFactor := 1.0
	if s.Err == nil {
		trapFactor = max(1, float64(s.Trap)/float64(refTrap))
	}
	s.Scale = min(20, max(1, trapFactor/s.CPUShare))
	if v := os.Getenv("SQSCOPE_TEST_SCALE"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 1 && f <= 100 {
			s.Scale = f
		}
	}
	return s
}

func cpuShare() float64 { return CPUShare(30 * time.Millisecond) }

// CPUShare spins one locked thread for d of wall time and returns the
// share of it the thread was on a CPU, in [0.05, 1]: on a host busy with
// other work, what anything CPU-bound the tests start (a QEMU guest under
// TCG, say) can count on.
func CPUShare(d time.Duration) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c0, c1 unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c0) != nil {
		return 1
	}
	start := time.Now()
	for time.Since(start) < d {
	}
	wall := time.Since(start)
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &c1) != nil {
		return 1
	}
	cpu := time.Duration(c1.Nano() - c0.Nano())
	return math.Min(1, math.Max(0.05, float64(cpu)/float64(wall)))
}

// timeCalls is what one of n calls of trapSite costs in this thread's
// CPU time (a busy host's preemptions are cpuShare's part).
func timeCalls(n int) time.Duration {
	x := 0
	start := threadCPU()
	for range n {
		x = trapSite(x)
	}
	d := threadCPU() - start
	if x != n {
		panic("trapSite")
	}
	return d / time.Duration(n)
}

// trapCost places an empty uprobe on trapSite in this binary and returns
// what a call then costs more than untraced: the median of batches taken
// over the last 50 of 150 ms (so that a tracer that places its own probes beside new
// ones, as a concurrent tracer would, is in the figure).
func trapCost() (time.Duration, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.Kprobe,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		return 0, fmt.Errorf("loading an empty program: %w", err)
	}
	defer prog.Close()
	// by its real path, as the probes of sqscope are placed (a probe's
	// path is kept as given: /proc/self/exe would name every reader)
	path, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	exe, err := link.OpenExecutable(path)
	if err != nil {
		return 0, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	untraced := timeCalls(100000)
	// go test links without a symbol table: the offset comes from the
	// function's address and the mapping that holds it
	off, err := fileOffset(trapSiteAddr())
	if err != nil {
		return 0, err
	}
	l, err := exe.Uprobe("", prog, &link.UprobeOptions{Address: off})
	if err != nil {
		return 0, fmt.Errorf("placing a uprobe: %w", err)
	}
	defer l.Close()
	var batches []time.Duration
	start := time.Now()
	for time.Since(start) < 150*time.Millisecond {
		b := timeCalls(500)
		if time.Since(start) > 100*time.Millisecond {
			batches = append(batches, b)
		}
	}
	if len(batches) == 0 {
		return 0, fmt.Errorf("no batch timed")
	}
	slices.Sort(batches)
	return max(0, batches[len(batches)/2]-untraced), nil
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
