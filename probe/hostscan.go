package probe

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// The scans of a host-wide trace run in the background, scanWorkers at
// a time, each within its own bound and what is left of the total: the
// discovery probes are in place before any process is looked at, and the
// reader runs on meanwhile, so a process that starts during a long scan is
// traced from its first verbs call, not held until every scan is done.
// Each process's probes are placed as soon as its own scan is done.
const scanWorkers = 2

// hostScanner is the background of a host-wide trace's scans.
type hostScanner struct {
	ctx    context.Context // ends the scans: Close, or the trace's Context
	cancel context.CancelFunc
	mu     sync.Mutex // jobs, closed, initialLeft and the tracer's hostScan
	jobs   []scanJob
	closed bool
	wake   chan struct{} // a job was queued, or the scanner closed
	wg     sync.WaitGroup
	// initialLeft counts the processes running when the trace began not
	// yet scanned and placed; initialDone is closed when none is left
	initialLeft int
	initialDone chan struct{}
	initialOnce sync.Once
}

// scanJob is a process to scan; initial: one running when the trace began.
type scanJob struct {
	pid     int
	initial bool
}

// startHostScans starts the background scanner of a host-wide trace.
func (t *Tracer) startHostScans() {
	ctx, cancel := context.WithCancel(t.opts.Context)
	hs := &hostScanner{ctx: ctx, cancel: cancel, wake: make(chan struct{}, scanWorkers), initialDone: make(chan struct{})}
	t.hostScans = hs
	for range scanWorkers {
		hs.wg.Add(1)
		go t.scanWorker(hs)
	}
}

// RunningTraced is closed once every process a host-wide trace found
// running when it began has been scanned and its probes placed (or its
// scan failed, was cut or the trace ended): from then on each is traced
// as fully as it can be. Nil for a trace that is not host-wide.
func (t *Tracer) RunningTraced() <-chan struct{} {
	if t.hostScans == nil {
		return nil
	}
	return t.hostScans.initialDone
}

func (hs *hostScanner) initialOver() { hs.initialOnce.Do(func() { close(hs.initialDone) }) }

// queueScans has the background scan the processes pids, in this order;
// initial: those running when the trace began.
func (t *Tracer) queueScans(pids []int, initial bool) {
	hs := t.hostScans
	if hs == nil {
		return
	}
	hs.mu.Lock()
	if !hs.closed {
		for _, pid := range pids {
			hs.jobs = append(hs.jobs, scanJob{pid, initial})
		}
		if initial {
			hs.initialLeft += len(pids)
		}
	}
	left := hs.initialLeft
	hs.mu.Unlock()
	if initial && left == 0 {
		hs.initialOver()
	}
	for range min(len(pids), scanWorkers) {
		select {
		case hs.wake <- struct{}{}:
		default:
		}
	}
}

// stopHostScans ends the background scans (at their next 4 MiB) and
// waits for them; their processes' probes are not placed.
func (t *Tracer) stopHostScans() {
	hs := t.hostScans
	if hs == nil {
		return
	}
	hs.mu.Lock()
	hs.closed, hs.jobs = true, nil
	hs.mu.Unlock()
	hs.cancel()
	close(hs.wake)
	hs.wg.Wait()
	hs.initialOver()
}

func (t *Tracer) scanWorker(hs *hostScanner) {
	defer hs.wg.Done()
	for {
		hs.mu.Lock()
		if hs.closed {
			hs.mu.Unlock()
			return
		}
		if len(hs.jobs) == 0 {
			hs.mu.Unlock()
			if _, ok := <-hs.wake; !ok {
				return
			}
			continue
		}
		job := hs.jobs[0]
		hs.jobs = hs.jobs[1:]
		hs.mu.Unlock()
		if rs := t.scanHostOne(hs, job.pid); rs != nil {
			t.placeRunning(rs)
		}
		if job.initial {
			hs.mu.Lock()
			hs.initialLeft--
			left := hs.initialLeft
			hs.mu.Unlock()
			if left == 0 {
				hs.initialOver()
			}
		}
	}
}

// scanHostOne scans one process of a host-wide trace (scanRunning) within
// its bound and what is left of the total, which it reserves for the
// scan's length: scans side by side never take more than the total.
func (t *Tracer) scanHostOne(hs *hostScanner, pid int) *runningScan {
	if checkPID(pid) != nil || hs.ctx.Err() != nil {
		return nil // gone since /proc was listed: nothing of it to trace
	}
	hs.mu.Lock()
	b, ok := scanBoundsFor(t.opts.ScanBounds, t.opts.ScanTotal, t.hostScan)
	if ok {
		t.hostScan.bytes += b.MaxBytes
		t.hostScan.elapsed += b.MaxTime
	}
	hs.mu.Unlock()
	if !ok {
		t.warn(fmt.Sprintf("process %d: its memory was not scanned, the host-wide scans' total bound is used up (raise it with --scan-total-mib or --scan-total-time): QPs it made earlier are seen from their next control-path call", pid))
		return nil
	}
	b.done = hs.ctx.Done()
	rs := t.scanRunning(pid, b)
	hs.mu.Lock()
	t.hostScan.bytes += rs.res.Bytes - b.MaxBytes
	t.hostScan.elapsed += rs.res.Duration - b.MaxTime
	hs.mu.Unlock()
	if errors.Is(rs.err, ErrInterrupted) {
		return nil // the trace is ending
	}
	return rs
}
