package session

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// SelfCPU is the CPU time sqscope's own threads have used (user and
// system), not counting the target's.
func SelfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SelfCost is what tracing has cost sqscope itself so far: loading and
// attaching the probes, then reading the ring buffer, decoding, analysing
// and writing; not the probes (their cost is the target's).
type SelfCost struct {
	CPUSeconds        float64 `json:"cpu_seconds"`         // all of it
	StartupCPUSeconds float64 `json:"startup_cpu_seconds"` // loading and attaching
	WallSeconds       float64 `json:"wall_seconds"`        // since attaching
	Cores             float64 `json:"cores"`               // CPU seconds per second since attaching
	NSPerEvent        float64 `json:"cpu_ns_per_event"`    // CPU since attaching per event; 0 without events
}

// Cost is sqscope's own cost so far, given the events read.
func (s *Session) Cost(events uint64) SelfCost {
	now := SelfCPU()
	c := SelfCost{CPUSeconds: (now - s.startCPU).Seconds(), StartupCPUSeconds: (s.openCPU - s.startCPU).Seconds(),
		WallSeconds: time.Since(s.openWall).Seconds()}
	running := (now - s.openCPU).Seconds()
	if c.WallSeconds > 0 {
		c.Cores = running / c.WallSeconds
	}
	if events > 0 {
		c.NSPerEvent = running * 1e9 / float64(events)
	}
	return c
}

func (c SelfCost) String() string {
	s := fmt.Sprintf("sqscope itself: %.2f s of CPU (%.2f s loading and attaching), then %.0f%% of one core for %.1f s",
		c.CPUSeconds, c.StartupCPUSeconds, 100*c.Cores, c.WallSeconds)
	if c.NSPerEvent > 0 {
		s += fmt.Sprintf(", %.0f ns per event", c.NSPerEvent)
	}
	return s
}
