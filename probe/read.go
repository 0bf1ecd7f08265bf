package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/sqscope/sqscope/trace"
)

// Warnings are things the user should know about what cannot be traced.
func (t *Tracer) Warnings() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.warnings...)
}

func (t *Tracer) warn(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.warnings = append(t.warnings, s)
}

// Attachments lists every probe placed (or that failed: Err set).
func (t *Tracer) Attachments() []trace.Attach {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]trace.Attach(nil), t.attachments...)
}

// Lost is the number of records dropped because the ring buffer was full.
func (t *Tracer) Lost() uint64 {
	var per []uint64
	if err := t.objs.Lost.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// Run reads records until ctx is done, the traced process (Options.PID)
// exits, or the Tracer is closed, calling fn for each event from this one
// goroutine. Attach events for probes already placed come first. Before
// returning it delivers every record already in the ring buffer and a
// final flush.
func (t *Tracer) Run(ctx context.Context, fn func(trace.Event)) error {
	restore, err := raiseReader()
	if err != nil {
		t.warn(err.Error())
	}
	defer restore()
	if t.opts.Mode == ModeSentinel {
		// every QP delivered is noted, those of the scans done before
		// Run first
		t.mem = newMemSampler()
		inner := fn
		fn = func(ev trace.Event) { t.mem.note(ev); inner(ev) }
	}
	// each process with a QP is looked at for direct verbs (direct.go),
	// after its event is delivered (the analyzer and the memory reads
	// have the QP before the look reads its files); what the looks found
	// is delivered before Run returns
	direct := newDirectWatch(t)
	outer := fn
	fn = func(ev trace.Event) { outer(ev); direct.note(ev) }
	defer t.deliverAttachments(fn)
	t.deliverAttachments(fn)
	stop := context.AfterFunc(ctx, func() {
		if err := t.Cut(); err != nil {
			t.warn(fmt.Sprintf("%v: the probes stop one by one as they are removed", err))
		}
		t.stopping.Store(true)
		t.rd.Flush()
	})
	defer stop()
	if t.mem != nil {
		defer background(ctx, t.runMemSampler)()
	}
	if t.opts.Mode == ModeSentinel && t.opts.SampleEvery > 0 {
		stop := background(ctx, t.runSampler)
		defer func() {
			stop()
			t.deliverAttachments(fn) // what the sampler said last
		}()
	}

	next := time.Now().Add(t.opts.FlushInterval)
	// Data records do not wake the reader (see output() in bpf/output.bpf.h):
	// it polls. The deadline is renewed only when a read returns without
	// a record; until then records are read without a clock reading each.
	t.rd.SetDeadline(time.Now().Add(pollInterval))
	for n := 0; ; n++ {
		err := t.rd.ReadInto(&t.rec)
		if err != nil {
			t.rd.SetDeadline(time.Now().Add(pollInterval))
		}
		switch {
		case err == nil:
			if t.haveStopped.Load() {
				t.ranWhileHeld(t.rec.RawSample)
			}
			// what was queued before this record was read comes first
			// (a running process's QPs, found by a scan in the
			// background, before its first post)
			t.deliverAttachments(fn)
			if err := t.handle(t.rec.RawSample, fn); err != nil {
				return err
			}
			t.deliverAttachments(fn)
			t.resume(false)
			if n%256 == 0 && time.Now().After(next) {
				t.flush(fn)
				next = time.Now().Add(t.opts.FlushInterval)
				t.sweepHolds()
				t.closeWindows(false)
			}
			if t.exitSeen && t.rd.AvailableBytes() == 0 {
				// The exit record is sent by the thread that found no
				// other one live, on its way out: wait for the kernel
				// to call the process ended (every thread past the
				// hand-over of its pending counts), then read the rest.
				if t.proc != nil {
					t.proc.wait(time.Second)
				}
				if t.rd.AvailableBytes() > 0 {
					continue
				}
				t.flush(fn)
				return nil
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.resume(true)
			t.deliverAttachments(fn) // the counters read (memsample.go)
			if time.Now().Before(next) {
				continue
			}
			// ended before its exit record could be seen (or sent): the
			// flush after the kernel's word reads the last counts
			ended := t.proc != nil && t.proc.ended()
			t.flush(fn)
			next = time.Now().Add(t.opts.FlushInterval)
			t.sweepHolds()
			t.closeWindows(false)
			t.deliverAttachments(fn)
			if ended && t.rd.AvailableBytes() == 0 {
				return nil
			}
		case errors.Is(err, ringbuf.ErrFlushed):
			if t.stopping.Load() {
				t.resume(true)
				if err := t.handOver(fn); err != nil {
					t.warn(fmt.Sprintf("handing over the threads' pending counts: %v (the last calls of each thread may be missing from the totals)", err))
				}
				t.flush(fn)
				return nil
			}
			t.finishSync()
		case errors.Is(err, ringbuf.ErrClosed), errors.Is(err, os.ErrClosed):
			return nil
		default:
			return fmt.Errorf("reading the BPF ring buffer: %w", err)
		}
	}
}

// background runs f in a goroutine until ctx ends or the returned stop
// is called, which waits for it to return.
func background(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() { cancel(); <-done }
}

func (t *Tracer) deliverAttachments(fn func(trace.Event)) {
	if !t.haveUnsent.Load() {
		return
	}
	t.mu.Lock()
	pending, procs, pre, after := t.unsent, t.procs, t.pre, t.after
	t.unsent, t.procs, t.pre, t.after = nil, nil, nil, nil
	t.haveUnsent.Store(false)
	t.mu.Unlock()
	// a process, then what the scan of its memory read and found, then
	// the probes: each QP is listed before any record of it
	for i := range procs {
		fn(&procs[i])
	}
	for _, ev := range pre {
		fn(ev)
	}
	for i := range pending {
		a := pending[i]
		fn(&a)
	}
	for _, ev := range after {
		fn(ev)
	}
}

// resume continues stopped processes once all their threads have stopped
// (or after groupStopMax) and the records written until then are drained
// (or after stopGrace, so a busy other process cannot keep one stopped);
// force says the ring was idle, and a detach continues them at once. Each
// is in t.stopped only once the record that stopped it was handled, and
// handling it placed the probes it revealed (or recorded why not). A
// process someone else continued meanwhile ran without those probes: that
// is said as a warning.
func (t *Tracer) resume(force bool) {
	if !t.haveStopped.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() { t.haveStopped.Store(len(t.stopped) > 0) }()
	stopping := t.stopping.Load()
	for pid, h := range t.stopped {
		if !stopping && h.grouped.IsZero() {
			// A thread not yet stopped may be inside a probe, its record
			// taken but not yet in the ring: an idle ring says nothing
			// until every thread has stopped (on a busy host that can
			// take longer than stopGrace), so wait for that, up to
			// groupStopMax for a thread that never stops.
			wait := time.Duration(0) // one look between records
			if force {
				wait = 20 * time.Millisecond // the ring is idle
			}
			if !waitGroupStopped(pid, wait) {
				if time.Since(h.since) < groupStopMax {
					continue
				}
			} else {
				h.grouped = time.Now()
				t.stopped[pid] = h
				if t.rd.AvailableBytes() > 0 {
					continue // read what its threads wrote first
				}
			}
		}
		if !force && !h.grouped.IsZero() && time.Since(h.grouped) < stopGrace && t.rd.AvailableBytes() > 0 {
			continue // read what the other threads wrote first
		}
		if t.holdsPrivate == nil {
			settle(pid, h.tid, h.since.Add(stopGrace))
		}
		t.checkHold(pid, h)
		// the time is taken before the SIGCONT: its threads run at once
		// (on another CPU), and a record one of them makes before a
		// clock read after it would look written while it was stopped
		t.lastCont[pid] = trace.MonotonicNS()
		t.releaseHold(pid) // continues it unless another tracer still holds it
		t.objs.StoppedPids.Delete(uint32(pid))
		delete(t.stopped, pid)
	}
}

// continueStopped continues every process the programs stopped and no one
// continued (stopped_pids): when detaching, those whose record was not read.
func (t *Tracer) continueStopped() {
	if t.objs.StoppedPids == nil {
		return
	}
	var pid uint32
	var v uint8
	it := t.objs.StoppedPids.Iterate()
	for it.Next(&pid, &v) {
		t.releaseHold(int(pid))
	}
	t.releaseAllHolds()
}

// markStopped notes that pid was stopped, by its thread tid, for the
// record just handled, made at ts. A record made before this tracer last
// continued pid (another thread's, read after the bounds of resume ran out) came
// too late: pid ran without the probes it revealed, and that is said.
func (t *Tracer) markStopped(pid, tid int, ts uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stops++
	late := ts < t.lastCont[pid]
	if late {
		t.warnings = append(t.warnings, fmt.Sprintf("process %d was continued (after the bounds on a stop: %v for its threads to stop, %v more to read their records) while a record that stopped it was still unread: it may have called the functions that record revealed before their probes were placed",
			pid, groupStopMax, stopGrace))
	}
	if _, ok := t.stopped[pid]; !ok {
		t.stopped[pid] = stopHold{since: time.Now(), tid: tid, stopNS: ts, late: late}
		t.haveStopped.Store(true)
	}
}

// Sync waits until every record written before the call has been handled
// by Run, including the probes it attached. A process tracing itself calls
// it after creating QPs, since it cannot be stopped.
func (t *Tracer) Sync(ctx context.Context) error {
	t.mu.Lock()
	ch := t.syncDone
	t.mu.Unlock()
	t.syncing.Add(1)
	if err := t.rd.Flush(); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *Tracer) finishSync() {
	if t.syncing.Swap(0) == 0 {
		return
	}
	t.mu.Lock()
	close(t.syncDone)
	t.syncDone = make(chan struct{})
	t.mu.Unlock()
}

// TargetEnded reports whether the traced process (Options.PID) has ended:
// all of its threads have exited.
func (t *Tracer) TargetEnded() bool { return t.proc != nil && t.proc.ended() }

// Close detaches every probe, continues any process still stopped and
// frees the kernel objects. Run returns.
func (t *Tracer) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.stopHostScans() // no probe is placed for a scan after this

	// The probes go first: a process they stop after this is continued
	// below, from the kernel's list, even if its record is never read.
	errs := t.detach()
	t.mu.Lock()
	for pid := range t.stopped {
		t.releaseHold(pid)
	}
	t.stopped = map[int]stopHold{}
	t.mu.Unlock()
	t.continueStopped()
	t.stopWatchdog()
	if t.rd != nil {
		if err := t.rd.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := t.objs.Close(); err != nil {
		errs = append(errs, err)
	}
	t.proc.close()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing tracer: %w", err)
	}
	return nil
}

// detach removes every probe placed so far.
func (t *Tracer) detach() []error {
	t.mu.Lock()
	links := t.links
	t.links = nil
	t.mu.Unlock()
	// Each detach waits for an RCU grace period (~0.1 s): detach in
	// parallel so that they share them.
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Close()
		}()
	}
	wg.Wait()
	return errs
}

// handOver is the end of tracing a target that keeps running: past the
// cut (cut.go) and the posts in flight at it, the probes are removed, then
// a task iterator (hand_over in bpf/exit.bpf.h) adds every thread's
// pending counts to the maps the last flush reads and says which posts in
// flight were still not back, and the records still in the ring are
// delivered.
func (t *Tracer) handOver(fn func(trace.Event)) error {
	if _, cut := t.CutInfo(); cut {
		if err := t.waitInFlight(); err != nil {
			return fmt.Errorf("waiting for the posts in flight at the cut: %w", err)
		}
	}
	if err := errors.Join(t.detach()...); err != nil {
		return err
	}
	unseen, err := iterTasks(t.objs.HandOver)
	if err != nil {
		return err
	}
	t.mu.Lock()
	if t.cut.AtNS != 0 {
		t.cut.InFlightUnseen = unseen
	}
	t.mu.Unlock()
	t.rd.SetDeadline(time.Now())
	for t.rd.ReadInto(&t.rec) == nil {
		if err := t.handle(t.rec.RawSample, fn); err != nil {
			return err
		}
	}
	return nil
}

// decodeInto copies a record into its fixed-size Go twin; a short record
// leaves the tail as it was. It returns the bytes copied.
func decodeInto[T any](dst *T, raw []byte) int {
	b := unsafe.Slice((*byte)(unsafe.Pointer(dst)), unsafe.Sizeof(*dst))
	return copy(b, raw)
}
