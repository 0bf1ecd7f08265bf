package trace

import "golang.org/x/sys/unix"

// MonotonicNS reads CLOCK_MONOTONIC, the clock of every event's TimeNS
// (bpf_ktime_get_ns in the probes); 0 if the clock cannot be read.
func MonotonicNS() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Sec)*1e9 + uint64(ts.Nsec)
}
