package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
)

// scaleQPs is the snapshot of 4,096 QPs: 4 processes (pids 100..103) of
// 1,024 QPs each, 8 QPs per send CQ; QP i is number 0x1000+i, with i%200
// WRs outstanding of 256 and 1000+i WRs posted.
func scaleSnap() analyzer.Snapshot {
	s := analyzer.Snapshot{Events: 1e6, FirstNS: 1e9, LastNS: 2e9}
	for i := range 4096 {
		q := qp(0x1000+uint32(i), 256, uint64(i%200), analyzer.Counters{WRs: 1000 + uint64(i), PostCalls: 100, Doorbells: 100, Signaled: 10})
		q.PID = 100 + uint32(i/1024)
		q.SendCQ, q.SendCQGen = 0xc000+uint64(i/8)*0x100, 1
		s.QPs = append(s.QPs, q)
	}
	return s
}

// tableLines are the screen's lines of the QP table below its header.
func tableLines(t *testing.T, lines []string) []string {
	t.Helper()
	i, _ := find(lines, "OCCUPANCY")
	if i < 0 {
		t.Fatalf("no table header:\n%s", strings.Join(lines, "\n"))
	}
	var out []string
	for _, l := range lines[i+1:] {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "└") || strings.HasPrefix(l, "╚") {
			break
		}
		out = append(out, l)
	}
	return out
}

// The live view of 4,096 QPs: only the lines on screen are formatted;
// scrolling to the end, sorting, filtering and grouping show the right
// QPs and totals.
func TestFourThousandQPs(t *testing.T) {
	u, app, scr := newTestUI(t, scaleSnap())
	lines := draw(u, scr)
	rows := tableLines(t, lines)
	if !strings.Contains(rows[0], "0x1000") || !strings.Contains(rows[len(rows)-1], fmt.Sprintf("%#x", 0x1000+len(rows)-1)) {
		t.Fatalf("first screen: %q .. %q", rows[0], rows[len(rows)-1])
	}
	// virtual: texts were made for the header and the lines on screen only
	made := 0
	for r, g := range u.textGen {
		if g == u.gen && u.texts[r] != nil {
			made++
		}
	}
	if made > len(rows)+1 || made < len(rows) {
		t.Fatalf("texts made for %d lines, %d on screen", made, len(rows))
	}

	t.Run("end", func(t *testing.T) {
		app.key(tcell.KeyEnd, 0)
		rows := tableLines(t, draw(u, scr))
		if n, _ := u.Selected(); n != 0x1fff {
			t.Fatalf("selected %#x after End, want 0x1fff", n)
		}
		last := rows[len(rows)-1]
		for _, want := range []string{"0x1fff", "RC", "256", " 95 ", "OK"} { // 4095%200 = 95
			if !strings.Contains(last, want) {
				t.Fatalf("last line %q lacks %q", last, want)
			}
		}
		app.key(tcell.KeyHome, 0)
		if n, _ := u.Selected(); n != 0x1000 {
			t.Fatalf("selected %#x after Home", n)
		}
	})

	t.Run("sort", func(t *testing.T) {
		for _, k := range "oooO" { // OCCUPANCY, most first
			app.key(tcell.KeyRune, k)
		}
		app.key(tcell.KeyHome, 0) // the selection stays on its QP: go to the top
		rows := tableLines(t, draw(u, scr))
		// 199 outstanding: QPs 199, 399, ..., first by number
		for i, want := range []string{"0x10c7", "0x118f", "0x1257"} {
			if !strings.Contains(rows[i], want) || !strings.Contains(rows[i], " 199 ") {
				t.Fatalf("line %d %q, want %s with 199", i, rows[i], want)
			}
		}
		for _, k := range "Oooooooooo" { // back to QP, ascending
			app.key(tcell.KeyRune, k)
		}
		if _, l := find(draw(u, scr), "QP▲"); l == "" {
			t.Fatal("sort not back on QP▲")
		}
	})

	t.Run("filter", func(t *testing.T) {
		app.key(tcell.KeyRune, '/')
		for _, r := range "0x1ab" {
			app.key(tcell.KeyRune, r)
		}
		app.key(tcell.KeyEnter, 0)
		var shown []string
		for _, l := range tableLines(t, draw(u, scr)) {
			if f := strings.Fields(strings.Trim(l, "│║ ")); len(f) > 0 {
				shown = append(shown, f[0])
			}
		}
		want := []string{"0x1ab0", "0x1ab1", "0x1ab2", "0x1ab3", "0x1ab4", "0x1ab5", "0x1ab6", "0x1ab7",
			"0x1ab8", "0x1ab9", "0x1aba", "0x1abb", "0x1abc", "0x1abd", "0x1abe", "0x1abf"}
		if strings.Join(shown, " ") != strings.Join(want, " ") {
			t.Fatalf("filtered lines %v, want %v", shown, want)
		}
		app.key(tcell.KeyRune, '/')
		for range 5 {
			app.key(tcell.KeyBackspace2, 0)
		}
		app.key(tcell.KeyEnter, 0)
		if n := len(u.lines); n != 4096 {
			t.Fatalf("%d lines after clearing the filter", n)
		}
	})

	t.Run("group", func(t *testing.T) {
		// by process: pid 100 holds QPs 0..1023, sum of i%200 outstanding;
		// QPs with 192 or more of 256 outstanding make it NEAR FULL
		var occ uint64
		var wrs uint64
		for i := range 1024 {
			occ += uint64(i % 200)
			wrs += 1000 + uint64(i)
		}
		app.key(tcell.KeyRune, 'g')
		app.key(tcell.KeyHome, 0)
		rows := tableLines(t, draw(u, scr))
		for _, want := range []string{"pid 100", "1024 QPs", fmt.Sprintf("%d", 1024*256), fmt.Sprintf(" %d ", occ), "NEAR FULL"} {
			if !strings.Contains(rows[0], want) {
				t.Fatalf("group line %q lacks %q", rows[0], want)
			}
		}
		if !strings.Contains(rows[1], "0x1000") {
			t.Fatalf("first QP line %q", rows[1])
		}
		if got := len(u.groups); got != 4 {
			t.Fatalf("%d process groups, want 4", got)
		}
		if g := u.groups[0]; g.n != 1024 || g.c.WRs != wrs {
			t.Fatalf("pid 100 totals: %d QPs, %d WRs; want 1024, %d", g.n, g.c.WRs, wrs)
		}
		app.key(tcell.KeyRune, 'g') // by CQ: 8 QPs each, 0+1+..+7 outstanding
		app.key(tcell.KeyHome, 0)
		lines := draw(u, scr)
		rows = tableLines(t, lines)
		for _, want := range []string{"pid 100 CQ 0xc000", "8 QPs", " 28 "} {
			if !strings.Contains(rows[0], want) {
				t.Fatalf("CQ group line %q lacks %q", rows[0], want)
			}
		}
		if !strings.Contains(rows[9], "pid 100 CQ 0xc100") {
			t.Fatalf("second CQ group at line 9: %q", rows[9])
		}
		if _, l := find(lines, "by CQ"); l == "" {
			t.Fatal("the footer does not say the grouping")
		}
		// the selection moves over QPs only, past the group lines
		app.key(tcell.KeyHome, 0)
		for range 8 {
			app.key(tcell.KeyDown, 0)
		}
		if n, _ := u.Selected(); n != 0x1008 {
			t.Fatalf("selected %#x, want 0x1008 (first QP of the second CQ)", n)
		}
		app.key(tcell.KeyRune, 'g')
		if len(u.groups) != 0 || len(u.lines) != 4096 {
			t.Fatalf("ungrouped: %d groups, %d lines", len(u.groups), len(u.lines))
		}
	})
}

// recordingSource hands out copies of a snapshot and records the QPs it
// was given back.
type recordingSource struct {
	s     analyzer.Snapshot
	given [][]analyzer.QP
}

func (r *recordingSource) Snapshot(o analyzer.SnapshotOptions) (analyzer.Snapshot, bool) {
	r.given = append(r.given, o.Reuse)
	s := r.s
	s.QPs = append(o.Reuse[:0], r.s.QPs...)
	return s, true
}

// The view gives the source back the QPs of the whole snapshot it let go,
// and never those it still shows.
func TestSnapshotsReused(t *testing.T) {
	src := &recordingSource{s: healthy()}
	app := &fakeApp{}
	u := New(src, Info{Target: "t"}, app)
	var made [][]analyzer.QP
	for range 4 {
		u.Tick()
		made = append(made, u.snap.QPs)
	}
	if src.given[0] != nil || src.given[1] != nil {
		t.Fatalf("QPs given back before a snapshot was let go: %v", src.given[:2])
	}
	if !sameQPs(src.given[2], made[0]) || !sameQPs(src.given[3], made[1]) {
		t.Fatal("a snapshot did not get the QPs of the one before the last")
	}
	// the same snapshot applied again lets nothing go
	u.Apply(u.snap, time.Unix(0, 0))
	u.Apply(u.snap, time.Unix(0, 0))
	if sameQPs(u.spare, u.snap.QPs) {
		t.Fatal("QPs still shown were given back")
	}
}

// optionsSource is a live source that records the options of each
// snapshot it took.
type optionsSource struct {
	Live
	partial []bool
	sizes   []int
}

func (o *optionsSource) Snapshot(opts analyzer.SnapshotOptions) (analyzer.Snapshot, bool) {
	s, ok := o.Live.Snapshot(opts)
	if ok {
		o.partial = append(o.partial, s.Partial)
		o.sizes = append(o.sizes, len(s.QPs))
	}
	return s, ok
}

// Past partialAbove QPs, a refresh takes the QPs on screen and the
// selected one, and a whole snapshot once every wholeEvery: the rows on
// screen are fresh at every refresh, the others at every whole one.
func TestPartialRefreshes(t *testing.T) {
	const n = 300
	traffic := analyzertest.NewTraffic(n, 4, 100_000_000)
	a := analyzer.New(analyzer.Options{})
	traffic.Feed(a) // the creates
	traffic.Feed(a)
	src := &optionsSource{Live: Live{A: a}}
	u := New(src, Info{Target: "t"}, &fakeApp{})
	clock := time.Unix(1000, 0)
	u.now = func() time.Time { return clock }
	scr := tcell.NewSimulationScreen("UTF-8")
	if err := scr.Init(); err != nil {
		t.Fatal(err)
	}
	scr.SetSize(200, 60)
	tick := func() {
		t.Helper()
		u.Tick()
		u.Root().SetRect(0, 0, 200, 60)
		u.Root().Draw(scr)
	}
	tick()
	if len(src.partial) != 1 || src.partial[0] || src.sizes[0] != n {
		t.Fatalf("first refresh: partial %v, sizes %v; want one whole snapshot of %d QPs", src.partial, src.sizes, n)
	}
	last := len(u.rows) - 1 // below the screen
	traffic.Feed(a)
	clock = clock.Add(100 * time.Millisecond)
	tick()
	if !src.partial[1] || src.sizes[1] == 0 || src.sizes[1] > 60 {
		t.Fatalf("second refresh: partial %v, sizes %v; want a partial snapshot of the QPs on screen", src.partial, src.sizes)
	}
	if u.rows[0].wrsPS == 0 || u.rows[0].qp.WRs != 2*16 {
		t.Fatalf("the first row on screen: %g WR/s, %d WRs; want its new round", u.rows[0].wrsPS, u.rows[0].qp.WRs)
	}
	if u.rows[last].qp.WRs != 16 {
		t.Fatalf("the last row, off screen: %d WRs; want those of the whole snapshot (%d)", u.rows[last].qp.WRs, 16)
	}
	traffic.Feed(a)
	clock = clock.Add(wholeEvery)
	tick()
	if src.partial[2] || src.sizes[2] != n || u.rows[last].qp.WRs != 3*16 || u.rows[last].wrsPS == 0 {
		t.Fatalf("after %v: partial %v, sizes %v, last row %d WRs at %g WR/s; want a whole snapshot",
			wholeEvery, src.partial, src.sizes, u.rows[last].qp.WRs, u.rows[last].wrsPS)
	}
	// nothing more comes: a partial snapshot ends the rates on screen, a
	// whole one those off it, then none is taken
	for range 4 {
		clock = clock.Add(100 * time.Millisecond)
		tick()
	}
	if len(src.partial) != 5 || !src.partial[3] || src.partial[4] {
		t.Fatalf("idle: partial %v; want a partial snapshot, a whole one, then none", src.partial)
	}
	if u.rows[0].wrsPS != 0 || u.rows[last].wrsPS != 0 {
		t.Fatalf("idle rates %g and %g WR/s", u.rows[0].wrsPS, u.rows[last].wrsPS)
	}
}
