package analyzer

import (
	"github.com/sqscope/sqscope/trace"
)

// Sample windows (probe.Options.SampleEvery): while a process is
// healthy the sentinel places its data-path probes now and then for a
// short while. Each window's opening and end make every QP of the
// process a late attach again (its occupancy a lower bound until a
// completion in the window re-synchronises it); what the windows saw
// are counts of the calls in them, and the rates of a QP traced only in
// windows are over the time it was traced, which the probes slow.

// Sampling is what the sample windows did and cost.
type Sampling struct {
	// Windows counts the sample windows that ended, TracedSeconds the
	// time they traced (summed over the windows, not the processes).
	Windows       uint64  `json:"windows"`
	TracedSeconds float64 `json:"traced_s"`
	// What the windows' probes cost the traced processes, measured
	// (trace.Window): absent with NotMeasured, which says why.
	Cost        *SampleCost `json:"probe_cost,omitempty"`
	NotMeasured string      `json:"cost_not_measured,omitempty"`
	// LowerBound says why the cost is a lower bound (the kernel's BPF
	// statistics could not be had), "" when it is not.
	LowerBound string `json:"cost_lower_bound,omitempty"`
	// BudgetPct is the budget the windows kept to (--budget), 0 none.
	BudgetPct float64 `json:"budget_pct,omitempty"`
	// NextInSeconds is the wait until the next window, as the budget
	// (or the sample period) set it at the last window's end; Ended: the
	// trace ended since, and the cost is over the processes' CPU to its
	// end.
	NextInSeconds float64 `json:"next_window_in_s"`
	Ended         bool    `json:"ended,omitempty"`
	// Shares: the inline and signaled shares of the WRs the windows saw,
	// estimates of the run's with their intervals (estimate.go); nil
	// before a window saw a WR.
	Shares *SampledShares `json:"shares,omitempty"`
}

// SampleCost is the probes' cost against the processes' own CPU time.
type SampleCost struct {
	ProbeCPUSeconds  float64 `json:"probe_cpu_s"`
	TargetCPUSeconds float64 `json:"target_cpu_s"` // the processes' own CPU time over the periods measured (without the probes')
	SharePct         float64 `json:"share_pct"`    // probe over target, in percent
	Traps            uint64  `json:"traps"`
	TrapNS           uint64  `json:"trap_ns"` // the price of one trap, measured on the host
	BPFRunNS         uint64  `json:"bpf_run_ns"`
}

// windowAttach follows a window's probes of one process: the opening
// and end of an escalation or sample window re-synchronise its QPs as a
// late attach does.
func (a *Analyzer) windowAttach(e *trace.Attach) {
	s := a.sentinelOn()
	w := a.sentinel.windows[e.PID]
	open := w != nil && w.until == 0
	switch {
	case e.Err == trace.EscalationInSample && open:
		// a failure in a sample window: its probes stay, nothing unseen
		s.Escalations++
		w.sample = false
		return
	case (e.Err == trace.WindowOpening || e.Err == "") && !open:
		// the opening's record, or the first probe's in a recording
		// without one
		if e.How == trace.HowEscalation {
			s.Escalations++
			if s.FirstEscalationNS == 0 {
				s.FirstEscalationNS = e.TimeNS
			}
		}
		for _, q := range a.all {
			if q.key.pid == e.PID {
				q.memOut = false // the window's model, from here
			}
		}
		w := &escWindow{from: e.TimeNS, sample: e.How == trace.HowSample}
		if w.sample {
			w.base = map[*sq][3]uint64{}
			for _, q := range a.all {
				if q.key.pid == e.PID {
					w.base[q] = [3]uint64{q.c.WRs, q.c.Inline, q.c.Signaled}
				}
			}
		}
		a.sentinel.windows[e.PID] = w
	case e.Err == trace.WindowClosing && open && !w.closing:
		// what the window measured, kept till the next, before the
		// removal's edge: from here the QPs are a late attach again
		w.closing = true
		var seen [3]uint64 // the window's WRs, inline and signaled
		for _, q := range a.all {
			if q.key.pid != e.PID {
				continue
			}
			if !q.destroyed && !q.lowerBound() {
				q.sampledOut, q.sampledNS, q.memOut = q.outstanding(), e.TimeNS, false
			}
			if w.sample {
				b := w.base[q] // a QP first seen in the window: from 0
				if q.c.WRs >= b[0] && q.c.Inline >= b[1] && q.c.Signaled >= b[2] {
					seen[0] += q.c.WRs - b[0]
					seen[1] += q.c.Inline - b[1]
					seen[2] += q.c.Signaled - b[2]
				}
			}
		}
		if w.sample {
			a.sentinel.shares.add(seen[0], seen[1], seen[2])
			w.base = nil
		}
	case (e.Err == trace.EscalationEnded || e.Err == trace.SampleEnded) && open:
		w.until = e.TimeNS
		if w.until > w.from {
			a.sentinel.traced[e.PID] += w.until - w.from
		}
	default:
		return // the window's other functions': one window
	}
	// from the window's end to the next one's opening the process's
	// posts are an edge: those traced after the end's record may have
	// completions polled past the poll probes' removal
	edge := a.sentinel.between(e.PID)
	for _, q := range a.all {
		if q.key.pid == e.PID && !q.destroyed {
			q.unsync()
			q.edge = edge
		}
	}
}

// onWindow takes a sample window's end and its measured cost.
func (a *Analyzer) onWindow(e *trace.Window) {
	s := a.sentinelOn()
	if s.Sampling == nil {
		s.Sampling = &Sampling{}
	}
	sm := s.Sampling
	if e.Tail { // the trace's end: the CPU since the last window
		if c := sm.Cost; c != nil && e.CostErr == "" {
			c.TargetCPUSeconds += float64(e.TargetCPUNS) / 1e9
			if c.TargetCPUSeconds > 0 {
				c.SharePct = 100 * c.ProbeCPUSeconds / c.TargetCPUSeconds
			}
		}
		sm.Ended = true
		return
	}
	sm.Windows++
	if e.TimeNS > e.FromNS {
		sm.TracedSeconds += float64(e.TimeNS-e.FromNS) / 1e9
	}
	sm.BudgetPct = float64(e.BudgetPPM) / 1e4
	sm.NextInSeconds = float64(e.NextNS) / 1e9
	if e.CostErr != "" {
		sm.NotMeasured = e.CostErr
		return
	}
	if e.CostNote != "" {
		sm.LowerBound = e.CostNote
	}
	c := sm.Cost
	if c == nil {
		c = &SampleCost{}
		sm.Cost = c
	}
	cost := e.CostNS()
	c.ProbeCPUSeconds += float64(cost) / 1e9
	if e.TargetCPUNS > cost {
		c.TargetCPUSeconds += float64(e.TargetCPUNS-cost) / 1e9
	}
	c.Traps += e.Traps
	c.TrapNS = e.TrapNS
	c.BPFRunNS += e.RunNS
	if c.TargetCPUSeconds > 0 {
		c.SharePct = 100 * c.ProbeCPUSeconds / c.TargetCPUSeconds
	}
}

// tracedNS is how long the data path of pid was traced in windows, up to
// ns (an open window counts to ns); 0 when it was never.
func (a *Analyzer) tracedNS(pid uint32, ns uint64) uint64 {
	if a.snap.Sentinel == nil {
		return 0
	}
	t := a.sentinel.traced[pid]
	if w := a.sentinel.windows[pid]; w != nil && w.until == 0 && ns > w.from {
		t += ns - w.from
	}
	return t
}

// sampledOutstanding is the occupancy read from memory last, outside a
// window, or the one a window measured last, when the model's own is a
// lower bound below it: ns is when (0: the model's).
func (q *sq) sampledOutstanding() (n, ns uint64) {
	if q.memOut && !q.destroyed {
		return q.sampledOut, q.sampledNS // read from memory: exact then
	}
	if q.sampledNS == 0 || !q.lowerBound() || q.sampledOut < q.outstanding() {
		return q.outstanding(), 0
	}
	return q.sampledOut, q.sampledNS
}
