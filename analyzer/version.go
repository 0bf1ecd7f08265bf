package analyzer

import "sync/atomic"

// Version names the state an analyzer is in: snapshots taken at one
// version are equal (for the same QPs' history), so a view refreshing
// many times a second takes none while nothing comes in. The zero Version
// is no analyzer's, and versions of two analyzers never compare equal.
type Version struct{ analyzer, changes uint64 }

// analyzers numbers the analyzers made, for their versions.
var analyzers atomic.Uint64

// changed moves the version on; every change of the state calls it,
// under the lock.
func (a *Analyzer) changed() { a.version.changes++ }

// SnapshotOptions shape a snapshot for a view that refreshes often.
type SnapshotOptions struct {
	// Since: while the analyzer is still at this version, no snapshot is
	// taken (SnapshotWith returns false and leaves Reuse alone).
	Since Version
	// History selects the QPs whose occupancy history and histogram are
	// copied; nil copies them all.
	History func(pid, qpNum uint32) bool
	// QPs selects the QPs copied; nil copies them all. A snapshot of some
	// QPs is Partial: its totals are those of its QPs, and it leaves out
	// the CQs, SRQs, processes, memory scans, probes and cut, which a
	// view of a few QPs does not show.
	QPs func(pid, qpNum uint32) bool
	// Reuse receives the QPs when it is large enough: a view refreshing
	// thousands of QPs hands back those of a snapshot it no longer holds.
	// The snapshot owns it from then on.
	Reuse []QP
}

// SnapshotWith is a snapshot shaped by o, or none (false) while the
// analyzer is at version o.Since.
func (a *Analyzer) SnapshotWith(o SnapshotOptions) (Snapshot, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o.Since == a.version {
		return Snapshot{}, false
	}
	return a.snapshot(o), true
}
