package trace

import (
	"time"

	"golang.org/x/sys/unix"
)

// MonotonicNS reads CLOCK_MONOTONIC, the clock of every event's TimeNS
// (bpf_ktime_get_ns in the probes); 0 if the clock cannot be read.
func MonotonicNS() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}

// WallAnchor ties the clock of event times to the wall clock: MonoNS is
// CLOCK_MONOTONIC read at the moment Wall. A live session takes one when it
// starts (NowAnchor); a recording keeps its own (FileInfo.Anchor).
type WallAnchor struct {
	Wall   time.Time
	MonoNS uint64
}

// NowAnchor reads both clocks now; the zero WallAnchor (unknown) when the
// monotonic clock cannot be read.
func NowAnchor() WallAnchor {
	mono := MonotonicNS()
	if mono == 0 {
		return WallAnchor{}
	}
	return WallAnchor{Wall: time.Now(), MonoNS: mono}
}

// At returns the wall-clock time of the event time ns, and false when the
// anchor is unknown.
func (a WallAnchor) At(ns uint64) (time.Time, bool) {
	if a.Wall.IsZero() || a.MonoNS == 0 {
		return time.Time{}, false
	}
	return a.Wall.Add(time.Duration(int64(ns - a.MonoNS))), true // negative before the anchor
}
