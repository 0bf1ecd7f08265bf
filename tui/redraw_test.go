package tui

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
)

// TestTickDrawsOnlyChanges: a refresh that changes nothing on screen does
// not draw; one that changes a QP's figures, the alerts or the selection
// does.
func TestTickDrawsOnlyChanges(t *testing.T) {
	base := analyzer.Snapshot{LastNS: 2e9, QPs: []analyzer.QP{
		qp(0x10, 64, 3, analyzer.Counters{WRs: 100, Doorbells: 10, Signaled: 10}),
		qp(0x11, 64, 5, analyzer.Counters{WRs: 200, Doorbells: 20, Signaled: 20}),
	}}
	more := base
	more.QPs = append([]analyzer.QP(nil), base.QPs...)
	more.QPs[1].Outstanding = 40
	alert := base
	alert.Diagnoses = []analyzer.Diagnosis{{PID: 42, QPNum: 0x11, Kind: "k", Severity: "warning", Message: "m", Fix: "f", Count: 1, LastNS: 2e9}}
	gone := base
	gone.QPs = base.QPs[1:]
	for _, tc := range []struct {
		name  string
		next  analyzer.Snapshot
		key   rune // pressed before the refresh, 0 for none
		draws int
	}{
		{"same snapshot", base, 0, 0},
		{"occupancy changed", more, 0, 1},
		{"new alert", alert, 0, 1},
		{"QP gone", gone, 0, 1},
		// tview draws after a key itself
		{"selection moved by a key", base, 'j', 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, app, scr := newTestUI(t, base)
			src := u.src.(*staticSource)
			u.Tick() // the rates of a snapshot that did not move on: 0
			draw(u, scr)
			u.Tick()
			draw(u, scr)
			if tc.key != 0 {
				app.key(0, tc.key)
				draw(u, scr)
			}
			src.s = tc.next
			app.draws = 0
			u.Tick()
			if app.draws != tc.draws {
				t.Errorf("draws = %d, want %d", app.draws, tc.draws)
			}
		})
	}
}

// countingSource is a live source that counts the snapshots it took.
type countingSource struct {
	Live
	taken int
}

func (c *countingSource) Snapshot(o analyzer.SnapshotOptions) (analyzer.Snapshot, bool) {
	s, ok := c.Live.Snapshot(o)
	if ok {
		c.taken++
	}
	return s, ok
}

// While nothing comes in, the view takes one snapshot more (whose rates
// are zero) and then none; an event or a new selection takes one again.
func TestTickSkipsUnchangedSnapshots(t *testing.T) {
	traffic := analyzertest.NewTraffic(2, 3, 1_000_000)
	a := analyzer.New(analyzer.Options{})
	traffic.Feed(a) // the creates
	traffic.Feed(a)
	src := &countingSource{Live: Live{A: a}}
	u := New(src, Info{Target: "t"}, &fakeApp{})
	tick := func(want int, rate bool) {
		t.Helper()
		u.Tick()
		if src.taken != want {
			t.Fatalf("%d snapshots taken, want %d", src.taken, want)
		}
		if got := u.rows[0].wrsPS > 0; got != rate {
			t.Fatalf("WR rate %g shown, want a rate: %v", u.rows[0].wrsPS, rate)
		}
	}
	tick(1, false)
	traffic.Feed(a)
	tick(2, true)
	tick(3, false) // the rates end
	tick(3, false)
	tick(3, false)
	traffic.Feed(a)
	tick(4, true)
	tick(5, false)
	u.selected, u.hasSel = u.rows[1].key, true
	tick(6, false)
	tick(6, false)
}
