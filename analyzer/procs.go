package analyzer

import (
	"github.com/sqscope/sqscope/trace"
)

// Process is one process of a trace: the target, a process followed from
// it, or one of a host-wide trace. Exited processes stay listed.
type Process struct {
	PID    uint32 `json:"pid"`
	Parent uint32 `json:"parent,omitempty"` // the process it was forked by, when followed
	Comm   string `json:"comm,omitempty"`   // its command name, when known
	// Joined says how it came into the trace: trace.ProcTarget,
	// trace.ProcFork, trace.ProcRunning, trace.ProcFirst or
	// trace.ProcFound.
	Joined string `json:"joined"`
	Exited bool   `json:"exited"`
	// ExitCode is its exit status, -1 when a signal (ExitSignal) killed
	// it; absent while it runs.
	ExitCode   *int32 `json:"exit_code,omitempty"`
	ExitSignal int32  `json:"exit_signal,omitempty"`
}

// procs are the processes a trace named (trace.Proc events).
type procs struct {
	byPID  map[uint32]*Process
	order  []uint32
	target uint32 // the trace.ProcTarget's pid; 0: none named (host-wide)
	named  bool   // a trace.Proc was seen: an Exit is the target's only by pid
}

// proc notes a trace.Proc.
func (p *procs) proc(e *trace.Proc) {
	if p.byPID == nil {
		p.byPID = map[uint32]*Process{}
	}
	p.named = true
	if e.How == trace.ProcTarget {
		p.target = e.PID
	}
	pr := p.byPID[e.PID]
	if pr == nil || (pr.Exited && e.How != trace.ProcExec) { // a pid used again
		pr = &Process{PID: e.PID, Joined: e.How}
		p.byPID[e.PID] = pr
		p.order = append(p.order, e.PID)
	}
	if e.How == trace.ProcFork {
		pr.Parent = e.Parent
	}
	if e.Comm != "" {
		pr.Comm = e.Comm
	}
}

// exit notes a process's exit and reports whether it is the target's:
// the named target's, or any exit of a trace that names no process (a
// recording made before processes were named).
func (p *procs) exit(e *trace.Exit) bool {
	if pr := p.byPID[e.PID]; pr != nil && !pr.Exited {
		code := e.Code
		pr.Exited, pr.ExitCode, pr.ExitSignal = true, &code, e.Signal
	}
	return !p.named || (p.target != 0 && e.PID == p.target)
}

// forget drops the exited processes drop selects (never the target).
func (p *procs) forget(drop func(pid uint32) bool) {
	order := p.order[:0]
	for _, pid := range p.order {
		if pr := p.byPID[pid]; pr != nil && pr.Exited && pid != p.target && drop(pid) {
			delete(p.byPID, pid)
			continue
		}
		if p.byPID[pid] != nil {
			order = append(order, pid)
		}
	}
	clear(p.order[len(order):])
	p.order = order
}

// comm is a process's command name, "" when not known.
func (p *procs) comm(pid uint32) string {
	if pr := p.byPID[pid]; pr != nil {
		return pr.Comm
	}
	return ""
}

func (p *procs) snapshot() []Process {
	out := make([]Process, 0, len(p.order))
	seen := map[uint32]bool{}
	for i := len(p.order) - 1; i >= 0; i-- { // the latest of a reused pid
		pid := p.order[i]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		pr := *p.byPID[pid]
		if pr.ExitCode != nil {
			c := *pr.ExitCode
			pr.ExitCode = &c
		}
		out = append(out, pr)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// onExit notes a process's exit; the named target's is the trace's.
func (a *Analyzer) onExit(e *trace.Exit) {
	if a.procs.exit(e) {
		a.snap.Exited = true
		a.snap.ExitCode, a.snap.ExitSignal = e.Code, e.Signal
	}
}
