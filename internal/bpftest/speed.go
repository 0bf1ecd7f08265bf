package bpftest

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sqscope/sqscope/internal/trapcost"
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
	s.Trap, s.Err = trapcost.Measure()
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
