package probe

import (
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sqscope/sqscope/trace"
)

// The cut (cut in bpf/maps.bpf.h): when tracing stops while the target runs
// on, one store tells every data-path program to record and count nothing
// more, so posts and polls end at the same moment instead of each at its own
// detach. Posts are decided at their entry, polls at their return: every
// completion recorded is of a post recorded. The posts in flight at the cut
// (entered, not returned) are waited for before the probes are removed.

// inFlightWait bounds the wait for the posts in flight at the cut: a post
// returns within microseconds unless its thread is preempted.
const inFlightWait = 200 * time.Millisecond

// CutInfo says where a trace was cut.
type CutInfo struct {
	// AtNS is when the cut was set (trace.MonotonicNS).
	AtNS uint64
	// InFlightUnseen counts the posts in flight at the cut whose return
	// came after the probes were removed: their records were never sent.
	InFlightUnseen uint64
	// Waited is how long the posts in flight at the cut were waited for.
	Waited time.Duration
}

// Cut stops every data-path probe at once, keeping what came before: from
// now on no call is recorded or counted; records already written, the posts
// in flight and the counts threads keep pending are still delivered by Run.
// It is called when tracing ends while the target keeps running, and again
// does nothing.
func (t *Tracer) Cut() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut.AtNS != 0 {
		return nil
	}
	if err := t.objs.Cut.Set(uint8(1)); err != nil {
		return fmt.Errorf("cutting the trace: %w", err)
	}
	t.cut.AtNS = trace.MonotonicNS()
	return nil
}

// CutInfo is where the trace was cut; false when it was not (it ended with
// the target, or runs).
func (t *Tracer) CutInfo() (CutInfo, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cut, t.cut.AtNS != 0
}

// waitInFlight waits, up to inFlightWait, until no thread of the target is
// inside a post begun before the cut.
func (t *Tracer) waitInFlight() error {
	start := time.Now()
	defer func() {
		t.mu.Lock()
		t.cut.Waited = time.Since(start)
		t.mu.Unlock()
	}()
	for {
		n, err := iterTasks(t.objs.InFlight)
		if err != nil || n == 0 || time.Since(start) >= inFlightWait {
			return err
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// iterTasks runs a task iterator whose programs write one thread id per
// thread they report, and returns how many they reported.
func iterTasks(prog *ebpf.Program) (uint64, error) {
	it, err := link.AttachIter(link.IterOptions{Program: prog})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	rd, err := it.Open()
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	n, err := io.Copy(io.Discard, rd)
	return uint64(n) / 4, err
}
