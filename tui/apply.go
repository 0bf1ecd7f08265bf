package tui

import (
	"time"

	"github.com/sqscope/sqscope/analyzer"
)

// Refreshing thousands of QPs ten times a second. A whole snapshot of
// every QP, their rows, their order and their groups cost more than the
// rest of a refresh together, and the screen shows a few dozen of them.
// Past partialAbove QPs, a refresh takes a partial snapshot of the QPs on
// screen and the selected one, and updates their rows in place; the order,
// the filter, the groups' totals and the QPs that came or went follow a
// whole snapshot, taken once every wholeEvery. While nothing comes in, no
// snapshot is taken at all: the first refresh at a version shows the rates
// of the change, the next (whole) one their end, and those after it only
// the header.
const (
	partialAbove = 256
	wholeEvery   = time.Second
)

// Tick reads a snapshot and applies it on the UI goroutine.
func (u *UI) Tick() {
	u.mu.Lock()
	paused := u.paused
	sel, has := u.selected, u.hasSel
	o := analyzer.SnapshotOptions{History: func(pid, qpNum uint32) bool { return has && sel.pid == pid && sel.qpNum == qpNum }}
	if u.settled && has == u.shownHas && sel == u.shownSel {
		o.Since = u.shownVer
	}
	if u.nrows > partialAbove && !u.wantWhole && u.now().Sub(u.wholeAt) < wholeEvery {
		want := make(map[uint64]bool, len(u.onScreen)+1)
		for _, k := range u.onScreen {
			want[uint64(k.pid)<<32|uint64(k.qpNum)] = true
		}
		if has {
			want[uint64(sel.pid)<<32|uint64(sel.qpNum)] = true
		}
		o.QPs = func(pid, qpNum uint32) bool { return want[uint64(pid)<<32|uint64(qpNum)] }
	} else {
		o.Reuse = u.spare
		u.spare = nil
	}
	u.mu.Unlock()
	var s analyzer.Snapshot
	fresh := false
	if !paused {
		s, fresh = u.src.Snapshot(o)
	}
	if !fresh && o.Reuse != nil {
		u.mu.Lock()
		if u.spare == nil {
			u.spare = o.Reuse
		}
		u.mu.Unlock()
	}
	at := u.now()
	var cpu time.Duration
	if u.info.SelfCPU != nil {
		cpu = u.info.SelfCPU()
	}
	u.app.QueueUpdate(func() {
		u.noteCPU(cpu, at)
		u.dirty = false
		if fresh {
			u.mu.Lock()
			same := s.Version == u.shownVer
			u.settled, u.wantWhole = same && !s.Partial, same && s.Partial
			u.shownVer, u.shownSel, u.shownHas = s.Version, sel, has
			u.mu.Unlock()
			u.Apply(s, at)
		} else {
			u.renderHeader()
		}
		u.drawIfDirty()
	})
}

// Apply takes a snapshot into the view: a whole one makes the rows again,
// a partial one updates the rows of its QPs. It runs on the UI goroutine
// (or in tests, directly).
func (u *UI) Apply(s analyzer.Snapshot, at time.Time) {
	u.snap = s
	if u.applied && s.LastNS > u.lastNS {
		u.eventsPS = float64(analyzer.Growth(s.Events, u.lastEvents)) / (float64(s.LastNS-u.lastNS) / 1e9)
	} else if u.applied {
		u.eventsPS = 0
	}
	u.applied, u.lastEvents, u.lastNS = true, s.Events, s.LastNS
	if s.Partial {
		for i := range s.QPs {
			q := &s.QPs[i]
			if j, ok := u.rowIdx[qpKey{q.PID, q.QPNum, q.Gen}]; ok {
				u.sample(&u.rows[j], q, s.LastNS)
			}
		}
	} else {
		u.applyWhole(s, at)
	}
	u.alertLog = u.alertLog[:0]
	for _, d := range s.Diagnoses {
		if d.LastNS >= u.alertsFrom {
			u.alertLog = append(u.alertLog, d)
		}
	}
	if s.Partial {
		u.renderPartial()
	} else {
		u.render()
	}
}

// applyWhole makes the rows of every QP of a whole snapshot, each taking
// its former row's last sample for its rates.
func (u *UI) applyWhole(s analyzer.Snapshot, at time.Time) {
	if old := u.wholeQPs; cap(old) > 0 && !sameQPs(old, s.QPs) {
		u.mu.Lock()
		u.spare = old // no row points into it once the rows are made
		u.mu.Unlock()
	}
	u.wholeQPs = s.QPs
	u.rows, u.oldRows = u.oldRows[:0], u.rows
	u.rowIdx, u.oldIdx = u.oldIdx, u.rowIdx
	clear(u.rowIdx)
	for i := range s.QPs {
		q := &s.QPs[i]
		k := qpKey{q.PID, q.QPNum, q.Gen}
		r := row{key: k}
		// most often the same QPs in the same places
		if i < len(u.oldRows) && u.oldRows[i].key == k {
			r = u.oldRows[i]
		} else if j, ok := u.oldIdx[k]; ok {
			r = u.oldRows[j]
		}
		u.rowIdx[k] = int32(len(u.rows))
		u.rows = append(u.rows, r)
		u.sample(&u.rows[len(u.rows)-1], q, s.LastNS)
	}
	clear(u.oldRows) // no pointers into the old snapshot stay
	u.mu.Lock()
	u.nrows, u.wholeAt = len(u.rows), at
	u.mu.Unlock()
}

// sample takes a QP's figures into its row at trace time now: its rates
// since the row's last sample (none before its first, zero when no event
// came in between), its counters since the reset, its status.
func (u *UI) sample(r *row, q *analyzer.QP, now uint64) {
	r.qp, r.occupancy = q, q.Outstanding
	dma, cqe := q.PCIe.DMAReadsSaved(), q.PCIe.CQEWritesSaved
	r.wrsPS, r.dmaSaved, r.cqeSaved = 0, 0, 0
	if r.sampleNS != 0 && now > r.sampleNS {
		dt := float64(now-r.sampleNS) / 1e9
		r.wrsPS = float64(analyzer.Growth(q.WRs, r.sWRs)) / dt
		r.dmaSaved = float64(analyzer.Growth(dma, r.sDMA)) / dt
		r.cqeSaved = float64(analyzer.Growth(cqe, r.sCQE)) / dt
	}
	r.sampleNS, r.sWRs, r.sDMA, r.sCQE = now, q.WRs, dma, cqe
	u.derive(r)
}

// derive sets what a row shows of its QP's counters: those since the
// reset when there was one, and the status they give.
func (u *UI) derive(r *row) {
	r.c = &r.qp.Counters
	if len(u.base) > 0 {
		if b, ok := u.base[r.key]; ok {
			if r.since == nil {
				r.since = new(analyzer.Counters)
			}
			*r.since = r.qp.Counters.Sub(b)
			r.c = r.since
		}
	}
	r.status = status(r.qp, r.c)
}

// reset makes the counters shown start from now.
func (u *UI) reset() {
	for i := range u.rows {
		r := &u.rows[i]
		u.base[r.key] = r.qp.Counters
		u.derive(r)
	}
	u.alertsFrom = u.snap.LastNS + 1
	u.message = "counters reset"
	u.alertLog = u.alertLog[:0]
	u.render()
}

// wholeSnapshot is a snapshot of every QP, for a report.
func (u *UI) wholeSnapshot() analyzer.Snapshot {
	if !u.snap.Partial && u.applied {
		return u.snap
	}
	s, _ := u.src.Snapshot(analyzer.SnapshotOptions{History: func(uint32, uint32) bool { return false }})
	return s
}

// sameQPs reports whether a and b share their memory.
func sameQPs(a, b []analyzer.QP) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}
