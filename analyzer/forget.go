package analyzer

// Forgetting. A trace of one program keeps every object lifetime, so a
// report can list them all; a tracer that runs all day on a host whose
// programs create and destroy QPs would grow without bound. Forget lets
// such a front end drop the lifetimes it no longer shows: its memory then
// follows the objects alive (and those ended within its grace period),
// not every object the host ever made.

// Forget drops the QP lifetimes qp selects (by process, number and
// generation), their diagnoses, and the CQ and SRQ lifetimes that ended
// (destroyed or replaced) and that no QP kept refers to, or whose process
// proc selects (proc may be nil), and the exited processes proc selects
// (never the target). It returns how many QP lifetimes it
// dropped. Counts that arrive later for a dropped generation start a new
// lifetime holding only them.
func (a *Analyzer) Forget(qp func(pid, qpNum uint32, gen uint64) bool, proc func(pid uint32) bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.changed()
	dropped := map[*sq]bool{}
	kept := a.all[:0]
	for _, q := range a.all {
		if !qp(q.key.pid, q.key.qpNum, q.gen) {
			kept = append(kept, q)
			continue
		}
		dropped[q] = true
		if q.rqEmpty() {
			a.rqsEmpty--
		}
		if a.qps[q.key] == q {
			delete(a.qps, q.key)
		}
		if c := &a.qpCache[q.key.qpNum%qpCacheLen]; *c == q {
			*c = nil
		}
		if q.gen != 0 && a.qpGens[objKey{q.key.pid, q.gen}] == q {
			delete(a.qpGens, objKey{q.key.pid, q.gen})
		}
	}
	clear(a.all[len(kept):])
	a.all = kept
	if len(dropped) > 0 {
		clear(a.ordered) // sorted again at the next snapshot (qpOrder)
		a.ordered = a.ordered[:0]
	}
	if len(dropped) > 0 {
		a.qpEpoch++
		a.forgetDiagnoses(dropped)
	}
	a.forgetCQs(proc)
	if proc != nil {
		a.procs.forget(proc)
	}
	srqs := a.srqs[:0]
	for _, s := range a.srqs {
		if !s.Destroyed && (proc == nil || !proc(s.PID)) {
			srqs = append(srqs, s)
		}
	}
	clear(a.srqs[len(srqs):])
	a.srqs = srqs
	return len(dropped)
}

// forgetDiagnoses drops the diagnoses of the dropped QPs and renumbers
// the kept QPs' references to theirs.
func (a *Analyzer) forgetDiagnoses(dropped map[*sq]bool) {
	gone := map[int32]bool{}
	for q := range dropped {
		for _, i := range q.diags {
			if i >= 0 {
				gone[i] = true
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	newIdx := make([]int32, len(a.diags))
	kept := a.diags[:0]
	for i, r := range a.diags {
		if gone[int32(i)] {
			newIdx[i] = -1
			continue
		}
		newIdx[i] = int32(len(kept))
		kept = append(kept, r)
	}
	a.diags = kept
	for _, q := range a.all {
		for k, i := range q.diags {
			if i >= 0 {
				q.diags[k] = newIdx[i]
			}
		}
	}
}

// forgetCQs drops the ended CQ lifetimes no kept QP refers to, and every
// CQ of a process proc selects.
func (a *Analyzer) forgetCQs(proc func(pid uint32) bool) {
	used := map[*cqState]bool{}
	for _, q := range a.all {
		if q.cq != nil {
			used[q.cq] = true
		}
	}
	kept := a.allCQs[:0]
	for _, c := range a.allCQs {
		ended := (c.replaced || c.destroyed) && !used[c]
		if !ended && (proc == nil || !proc(c.pid) || used[c]) {
			kept = append(kept, c)
			continue
		}
		if k := (cqKey{c.pid, c.addr}); a.cqs[k] == c {
			delete(a.cqs, k)
		}
		if c.gen != 0 && a.cqGens[objKey{c.pid, c.gen}] == c {
			delete(a.cqGens, objKey{c.pid, c.gen})
		}
	}
	clear(a.allCQs[len(kept):])
	a.allCQs = kept
}
