package analyzer

import "github.com/sqscope/sqscope/trace"

// A QP the trace did not see created (found in the target's memory, or
// learned from its first call) may have had WRs outstanding before the
// attach: how many is unknown, neither zero nor unbounded. Until a
// completion proves them retired the model counts only the WRs posted
// since the attach, a lower bound. mlx5 retires a WR and every older one
// at the CQE of a signaled WR (sq.tail = wqe_head[idx] + 1), and RC
// completes in order: so the first completion of a signaled WR posted
// since the attach retires everything older, pre-attach WRs included,
// and from then on the model is exact. Completions before it belong to
// pre-attach WRs: counted, not matched. The queue's depth also bounds
// the model: a successful post leaves at most max_send_wr outstanding,
// so WRs past it must have retired without their completion being seen.
//
// Where the depth is not known (caps are not in the memory a scan reads)
// the count is still a lower bound: the tracer places the polls' probes
// before the posts' (probe.postLast), so every completion of a WR seen
// posted is seen, and each completion retires at least what the queue
// retired of the WRs posted since (with shared wr_ids, the oldest that
// matches: more, never less).

// How a QP became known to the analyzer (QP.Found).
const (
	FoundCreate     = "create"           // its create was traced
	FoundMemory     = trace.ViaMemory    // the memory scan of a running process
	FoundPost       = "first post"       // its first post since the attach
	FoundModify     = "modify"           // an ibv_modify_qp
	FoundRecv       = "first post_recv"  // its first receive post
	FoundCompletion = "first completion" // a completion polled from its CQ
	FoundCounters   = "counters"         // kernel totals (--mode counters)
	FoundFlight     = "flight window"    // created before a flight recording's window
)

// noteFound records how q became known, the first time.
func (q *sq) noteFound(how string) {
	if q.found == "" {
		q.found = how
	}
}

// exactSince is when a late QP's model became exact, in seconds into the
// trace (0: not yet, or it always was).
func exactSince(c traceClock, syncedNS uint64) float64 {
	if syncedNS == 0 {
		return 0
	}
	return c.seconds(syncedNS)
}

// lateUnsynced reports whether q's outstanding count is a lower bound.
func (q *sq) lateUnsynced() bool { return q.late && q.syncedNS == 0 }

// lateCompletion handles a completion of a QP whose pre-attach WRs are
// unknown. It returns true when the completion is of a WR posted before
// the attach (counted, nothing retired), false when it is the first
// completion of a signaled WR posted since, which makes the model exact
// from now on; the caller then retires as usual (that WR and every older
// one, also those whose completions were polled before the poll probe
// was in place).
func (q *sq) lateCompletion(wc *trace.WC, now uint64) bool {
	q.sigOldest()
	same := 0
	for i := q.sigHead; i < q.sigTail; i++ {
		if q.slot(q.sigAt(i).seq).id == wc.ID {
			same++
		}
	}
	if same == 0 {
		q.preCQEs++
		return true
	}
	q.syncedNS = max(now, 1)
	// An application that gives many WRs one wr_id (perftest gives every
	// WR of a QP the same) makes the match a guess: the completion may be
	// a pre-attach WR's. Retiring as if it were not retires too much, so
	// the figures stay lower bounds, and completions that find nothing
	// outstanding are the pre-attach WRs', not unmatched ones.
	q.syncGuessed = same > 1 || q.idsRepeat
	return false
}

// lowerBound reports whether q's outstanding count is a lower bound: its
// pre-attach WRs not proved retired, or proved only by a guess.
func (q *sq) lowerBound() bool {
	if q.kernUsable() { // the kernel's model: kernsq.go
		return !q.kern.m.Synced || q.gen == 0 && q.kern.m.IDsRepeat
	}
	return q.late && (q.syncedNS == 0 || q.syncGuessed)
}

// exactSinceNS is when q's model became exact (0: not yet, never, or it
// always was).
func (q *sq) exactSinceNS() uint64 {
	if q.syncGuessed {
		return 0
	}
	return q.syncedNS
}

// boundByDepth retires, after a successful post, the oldest WRs past the
// known depth: the provider took the post, so they had retired, their
// completions not seen.
func (q *sq) boundByDepth() {
	if q.outstanding() > q.depth() {
		q.pastDepth()
	}
}

func (q *sq) pastDepth() {
	d := q.depth()
	if d == 0 { // not known
		return
	}
	// rxe frees a slot when its WR completes, and holds more than it
	// reports: only where a CQE frees a slot (mlx5) does the depth bound
	// the outstanding WRs
	if q.slotRule() != SlotFreedByCQE {
		return
	}
	n := q.outstanding() - d
	q.overSeen = q.outstanding()
	q.retiredUnseen += n
	q.tail += n
	q.sigOldest()
}

// noteProbe notes a data-path probe the trace placed.
func (a *Analyzer) noteProbe(e *trace.Attach) {
	if e.How == trace.HowErrorSite {
		return
	}
	if e.Err != "" {
		// a post probe not placed (not a window's mark): posts go untraced
		if (e.Func == "post_send" || e.Func == "wr_complete") && !e.WindowMark() {
			a.postFailed = true
		}
		return
	}
	switch e.Func {
	case "post_send", "wr_complete":
		a.postProbed = true
	case "poll_cq", "start_poll", "next_poll":
		a.pollProbed = true
	}
}

// completionsNotTraced reports whether posts are probed and no poll
// function is (an explicit --probe post_send alone, say): nothing can
// retire a WR, so what the model holds outstanding is not a bound of any
// kind.
func (a *Analyzer) completionsNotTraced() bool { return a.postProbed && !a.pollProbed }

// onAttach keeps a probe's placement and learns from it what the trace
// sees: receives, the process's provider, the data path probed.
func (a *Analyzer) onAttach(e *trace.Attach) {
	a.snap.Attach = append(a.snap.Attach, *e)
	a.recvAttach(e)
	a.noteAttach(e)
	a.noteProbe(e)
	a.sentinelAttach(e) // sentinel.go
}
