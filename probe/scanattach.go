package probe

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// attachRunning places the data-path probes of a process traced after it
// started: it scans its memory for the verbs contexts and QPs it made
// already (ScanDataPath), and its binaries and their debug files for the
// functions' names (datasyms.go); then, with the process stopped only
// meanwhile, it attaches to what they found (with the builders and the
// extended CQ functions of the QPs found), so that every data-path probe
// starts at one cut: no post is seen whose completion was polled before
// the poll probe was in place. Each QP found is listed as a
// trace.QPCreate with Via trace.ViaMemory, delivered before any record.
// It returns how many functions it placed by symbol and from memory.
func (t *Tracer) attachRunning() (bySym, byMem int) {
	pid := t.opts.PID
	res, err := ScanDataPath(pid, t.opts.ScanBounds)
	t.scan = &res
	sc := &trace.Scan{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: uint32(pid)},
		Bytes: uint64(res.Bytes), Mappings: uint32(res.Mappings), DurationNS: uint64(res.Duration),
		Contexts: uint32(len(res.Contexts)), QPs: uint32(len(res.QPs)), Cut: res.Cut}
	switch {
	case errors.Is(err, ErrScanBound):
		t.warnings = append(t.warnings, fmt.Sprintf("%v: verbs objects past it were not looked for (raise it with --scan-mib or --scan-time)", err))
	case err != nil:
		sc.Err = err.Error()
		t.scanErr = err
		t.warnings = append(t.warnings, fmt.Sprintf("memory scan of process %d: %v", pid, err))
	}
	t.pre = append(t.pre, sc)
	hits := t.dataPathBySymbol(pid)
	if len(hits) == 0 && len(res.Contexts) == 0 {
		return 0, 0 // nothing to place: no reason to stop the process
	}

	stopped := false
	var stopAt time.Time
	if !t.opts.NoStop && !alreadyStopped(pid) {
		stopAt = time.Now()
		if syscall.Kill(pid, syscall.SIGSTOP) == nil {
			stopped = true
			waitGroupStopped(pid, 100*time.Millisecond)
		}
	}
	bySym = t.attachBySymbol(pid, hits)
	for _, c := range res.Contexts {
		fns := make([]uint64, bpf.VerbsSqFnSQ_FN_COUNT)
		fns[bpf.VerbsSqFnSQ_FN_POST_SEND] = c.PostSend
		fns[bpf.VerbsSqFnSQ_FN_POLL_CQ] = c.PollCQ
		fns[bpf.VerbsSqFnSQ_FN_POST_RECV] = c.PostRecv
		fns[bpf.VerbsSqFnSQ_FN_POST_SRQ_RECV] = c.PostSRQRecv
		byMem += t.learnHow(uint32(pid), fns, "memory")
	}
	for _, q := range res.QPs {
		for _, named := range []map[string]uint64{q.WRFuncs, q.CQFuncs} {
			if len(named) == 0 {
				continue
			}
			fns := make([]uint64, bpf.VerbsSqFnSQ_FN_COUNT)
			for name, addr := range named {
				if r, ok := roleByName(name); ok && r.fn >= 0 {
					fns[r.fn] = addr
				}
			}
			byMem += t.learnHow(uint32(pid), fns, "memory")
		}
	}
	if stopped {
		syscall.Kill(pid, syscall.SIGCONT)
		sc.StopNS = uint64(time.Since(stopAt))
	}
	now := trace.MonotonicNS()
	lib := map[uint64]string{} // a context's provider file: the QP's provider
	for _, c := range res.Contexts {
		lib[c.Addr] = c.Provider
	}
	for _, q := range res.QPs {
		t.pre = append(t.pre, &trace.QPCreate{Header: trace.Header{TimeNS: now, PID: uint32(pid)},
			QP: q.Addr, QPNum: q.QPNum, Type: trace.QPType(q.Type), SendCQ: q.SendCQ, RecvCQ: q.RecvCQ,
			Via: trace.ViaMemory, State: int32(q.State), Lib: lib[q.Context]})
	}
	return bySym, byMem
}

// alreadyStopped reports whether pid is stopped (by a job control signal
// or a debugger): it is then left as it is, neither stopped nor continued.
func alreadyStopped(pid int) bool {
	st, err := statState(ProcDir(pid) + "/stat")
	return err == nil && (st == 'T' || st == 't')
}

// deliverPre hands Run the events made before it started: what the
// memory scan read and the QPs it found.
func (t *Tracer) deliverPre(fn func(trace.Event)) {
	t.mu.Lock()
	pre := t.pre
	t.pre = nil
	t.mu.Unlock()
	for _, ev := range pre {
		fn(ev)
	}
}

// Scan returns what the memory scan of a process traced after it
// started read and found, and why it failed; nil when there was none.
func (t *Tracer) Scan() (*ScanResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.scan, t.scanErr
}
