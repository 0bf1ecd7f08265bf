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

// SnapshotSince is SnapshotHistory writing the QPs into buf when it is
// large enough (the snapshot owns buf from then on), unless the analyzer
// is still at version since: then it takes nothing, leaves buf alone and
// returns false.
func (a *Analyzer) SnapshotSince(since Version, keep func(pid, qpNum uint32) bool, buf []QP) (Snapshot, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if since == a.version {
		return Snapshot{}, false
	}
	return a.snapshot(keep, buf), true
}
