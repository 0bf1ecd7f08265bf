package probe

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// attachRunning places the data-path probes of a process traced after it
// started (the target of -p; a host-wide trace takes each process it finds
// running through the same two steps, all scans first): scanRunning finds
// what to place, placeRunning places it. It returns what the scan found
// and its error, and how many functions it placed by symbol and from
// memory.
func (t *Tracer) attachRunning(pid int, b ScanBounds) (res ScanResult, scanErr error, bySym, byMem int) {
	rs := t.scanRunning(pid, b)
	bySym, byMem = t.placeRunning(rs)
	return rs.res, rs.err, bySym, byMem
}

// runningScan is what was found in a running process before its probes
// are placed.
type runningScan struct {
	pid  int
	res  ScanResult
	err  error
	hits []symbolHit
	sc   *trace.Scan
}

// scanRunning scans the memory of a running process, within bounds b, for
// the verbs contexts and QPs it made already (ScanDataPath), checks them
// against the kernel's list (rdmacheck.go), and looks in its binaries and
// their debug files for the data path's names (datasyms.go). The process
// runs on meanwhile.
func (t *Tracer) scanRunning(pid int, b ScanBounds) *runningScan {
	rs := &runningScan{pid: pid}
	if b.done == nil {
		b.done = t.opts.Context.Done()
	}
	rs.res, rs.err = ScanDataPath(pid, b)
	res := &rs.res
	rs.sc = &trace.Scan{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: uint32(pid)},
		Bytes: uint64(res.Bytes), Mappings: uint32(res.Mappings), DurationNS: uint64(res.Duration),
		Contexts: uint32(len(res.Contexts)), QPs: uint32(len(res.QPs)), Cut: res.Cut}
	if errors.Is(rs.err, ErrInterrupted) {
		return rs // Open ends
	}
	rs.sc.KernelCheck = t.checkWithKernel(pid, res)
	switch {
	case errors.Is(rs.err, ErrScanBound):
		t.warn(fmt.Sprintf("%v: verbs objects past it were not looked for (raise it with %s)", rs.err, boundFlags(res.Cut)))
	case rs.err != nil:
		rs.sc.Err = rs.err.Error()
		t.warn(fmt.Sprintf("memory scan of process %d: %v", pid, rs.err))
	}
	rs.hits = t.dataPathBySymbol(pid)
	return rs
}

// placeRunning attaches to what scanRunning found (with the builders and
// the extended CQ functions of the QPs found) with the process stopped
// only meanwhile, so that every data-path probe starts at one cut: no
// post is seen whose completion was polled before the poll probe was in
// place. What the scan read is a trace.Scan and each QP found a
// trace.QPCreate with Via trace.ViaMemory, delivered before any record of
// the process.
func (t *Tracer) placeRunning(rs *runningScan) (bySym, byMem int) {
	pid, res, sc := rs.pid, &rs.res, rs.sc
	// The QPs found are queued before the process runs again (it is
	// stopped while its probes are placed), so the reader, which delivers
	// what is queued before the next record it reads, lists each before
	// any of its posts; the scan itself follows, with how long the stop
	// took.
	listed := false
	listQPs := func() {
		if listed {
			return
		}
		listed = true
		t.mu.Lock()
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
		t.haveUnsent.Store(true)
		t.mu.Unlock()
	}
	defer func() {
		listQPs()
		t.mu.Lock()
		t.pre = append(t.pre, sc)
		t.haveUnsent.Store(true)
		t.mu.Unlock()
	}()
	if len(rs.hits) == 0 && len(res.Contexts) == 0 {
		return 0, 0 // nothing to place: no reason to stop the process
	}

	stopped := false
	var stopAt time.Time
	if !t.opts.NoStop && !alreadyStopped(pid) {
		stopAt = time.Now()
		t.takeScanHold(pid) // shared with other tracers (holds.go)
		if syscall.Kill(pid, syscall.SIGSTOP) == nil {
			stopped = true
			waitGroupStopped(pid, 100*time.Millisecond)
		} else {
			t.dropScanHold(pid)
		}
	}
	bySym = t.attachBySymbol(pid, rs.hits)
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
	listQPs()
	if stopped {
		t.releaseScanHold(pid) // continues pid unless another hold is left (another tracer's, a record's stop)
		sc.StopNS = uint64(time.Since(stopAt))
	}
	return bySym, byMem
}

// boundFlags names the flags that raise the bound a scan's Cut names.
func boundFlags(cut string) string {
	if strings.Contains(cut, "total") {
		return "--scan-total-mib or --scan-total-time"
	}
	return "--scan-mib or --scan-time"
}

// alreadyStopped reports whether pid is stopped (by a job control signal
// or a debugger): it is then left as it is, neither stopped nor continued.
func alreadyStopped(pid int) bool {
	st, err := statState(ProcDir(pid) + "/stat")
	return err == nil && (st == 'T' || st == 't')
}
