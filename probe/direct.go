package probe

import (
	"strings"

	"github.com/sqscope/sqscope/trace"
)

// Direct verbs: an application on mlx5's direct verbs (mlx5dv: UCX's
// rc_mlx5 and dc_mlx5 transports, DPDK's mlx5 driver) builds its WQEs and
// rings the doorbell itself, never calling ibv_post_send, and often polls
// its CQs itself too: no probe can see those posts. The tracer looks, once
// per process with a QP, at the objects it maps for imports of mlx5dv's
// functions (directVerbsImports), and says what it finds as a record of a
// probe that could not be placed (Func trace.FuncDirectVerbs, How
// trace.HowImports, Err what it imports and what that hides), so that
// every report of the trace carries it.

// directWatch checks each process once.
type directWatch struct {
	t    *Tracer
	seen map[uint32]bool
}

func newDirectWatch(t *Tracer) *directWatch {
	return &directWatch{t: t, seen: map[uint32]bool{}}
}

// note checks the process of a QP's create or scan, while it runs (a few
// milliseconds once per process: it reads the dynamic symbols of the ELF
// files it maps). It is called from Run's goroutine only.
func (d *directWatch) note(ev trace.Event) {
	var pid uint32
	switch e := ev.(type) {
	case *trace.QPCreate:
		pid = e.PID
	case *trace.Scan:
		if e.QPs == 0 {
			return
		}
		pid = e.PID
	default:
		return
	}
	if d.seen[pid] {
		return
	}
	d.seen[pid] = true
	for _, imp := range directVerbsImports(int(pid)) {
		path, fns, _ := strings.Cut(imp, ": ")
		d.t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid}, Func: trace.FuncDirectVerbs,
			Path: path, How: trace.HowImports,
			Err: "imports mlx5dv's " + fns + ": the QPs it drives through them post without ibv_post_send (direct verbs), and no probe sees their posts"})
	}
}
