package probe

import (
	"fmt"
	"time"
)

// A host-wide trace scans the memory of every verbs process it finds
// running (when it begins, and on each look through /proc) the way -p
// scans its target (attachRunning): each within Options.ScanBounds, and
// all of them together within Options.ScanTotal, since the reader waits
// while a process is scanned.

const (
	// DefaultScanTotalBytes and DefaultScanTotalTime bound the scans of a
	// host-wide trace taken together unless raised.
	DefaultScanTotalBytes = 16 << 30
	DefaultScanTotalTime  = 30 * time.Second
)

// hostScanUse is what the scans of a host-wide trace have used so far.
type hostScanUse struct {
	bytes   int64
	elapsed time.Duration
}

// scanBoundsFor is the bound of the next process's scan: its own, or
// what is left of the total when that is less (the cut then names the
// total). ok is false when nothing is left.
func scanBoundsFor(per, total ScanBounds, used hostScanUse) (b ScanBounds, ok bool) {
	per.MaxBytes = cmpDefault(per.MaxBytes, DefaultScanBytes)
	per.MaxTime = cmpDefault(per.MaxTime, DefaultScanTime)
	total.MaxBytes = cmpDefault(total.MaxBytes, DefaultScanTotalBytes)
	total.MaxTime = cmpDefault(total.MaxTime, DefaultScanTotalTime)
	leftBytes, leftTime := total.MaxBytes-used.bytes, total.MaxTime-used.elapsed
	if leftBytes <= 0 || leftTime <= 0 {
		return b, false
	}
	b = per
	if leftBytes < b.MaxBytes {
		b.MaxBytes = leftBytes
		b.byteCut = fmt.Sprintf("total byte bound %d MiB of the host-wide scans (--scan-total-mib)", total.MaxBytes>>20)
	}
	if leftTime < b.MaxTime {
		b.MaxTime = leftTime
		b.timeCut = fmt.Sprintf("total time bound %v of the host-wide scans (--scan-total-time)", total.MaxTime)
	}
	return b, true
}

func cmpDefault[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// scanHost scans the verbs processes a host-wide trace found running
// (scanRunning), each within its own bound and what is left of the total,
// before any of their probes is placed: records of a process hooked first
// would wait in the ring, unread, while the others are scanned.
func (t *Tracer) scanHost(pids []int) []*runningScan {
	var out []*runningScan
	for _, pid := range pids {
		if t.interrupted() != nil {
			break
		}
		if checkPID(pid) != nil {
			continue // gone since /proc was listed: nothing of it to trace
		}
		b, ok := scanBoundsFor(t.opts.ScanBounds, t.opts.ScanTotal, t.hostScan)
		if !ok {
			t.warn(fmt.Sprintf("process %d: its memory was not scanned, the host-wide scans' total bound is used up (raise it with --scan-total-mib or --scan-total-time): QPs it made earlier are seen from their next control-path call", pid))
			continue
		}
		rs := t.scanRunning(pid, b)
		t.hostScan.bytes += rs.res.Bytes
		t.hostScan.elapsed += rs.res.Duration
		out = append(out, rs)
	}
	return out
}
