package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer"
)

type fakeApp struct {
	root    tview.Primitive
	capture func(*tcell.EventKey) *tcell.EventKey
	focus   tview.Primitive
	stopped bool
	draws   int // ForceDraw calls
}

func (f *fakeApp) QueueUpdate(fn func()) *tview.Application { fn(); return nil }
func (f *fakeApp) ForceDraw() *tview.Application {
	f.draws++
	return nil
}
func (f *fakeApp) SetRoot(r tview.Primitive, _ bool) *tview.Application {
	f.root = r
	return nil
}
func (f *fakeApp) SetInputCapture(c func(*tcell.EventKey) *tcell.EventKey) *tview.Application {
	f.capture = c
	return nil
}
func (f *fakeApp) SetFocus(p tview.Primitive) *tview.Application {
	// as tview does: the old primitive blurs, the new one takes focus
	if f.focus != nil {
		f.focus.Blur()
	}
	f.focus = p
	p.Focus(func(q tview.Primitive) { f.focus = q })
	return nil
}
func (f *fakeApp) Run() error { return nil }
func (f *fakeApp) Stop()      { f.stopped = true }

// key delivers a key the way tview does: global capture, then the focused
// primitive's handler.
func (f *fakeApp) key(k tcell.Key, r rune) {
	ev := tcell.NewEventKey(k, r, tcell.ModNone)
	if ev = f.capture(ev); ev == nil {
		return
	}
	if h := f.focus.InputHandler(); h != nil {
		h(ev, func(p tview.Primitive) { f.focus = p })
	}
}

type staticSource struct{ s analyzer.Snapshot }

func (s *staticSource) Snapshot(analyzer.SnapshotOptions) (analyzer.Snapshot, bool) {
	return s.s, true
}

func qp(num uint32, depth uint32, out uint64, c analyzer.Counters) analyzer.QP {
	return analyzer.QP{PID: 42, QPNum: num, Type: "RC", MaxSendWR: depth, MaxInline: 124, MaxSendSGE: 1,
		CapsKnown: true, Outstanding: out, Counters: c, Provider: "sim", Model: analyzer.Mlx5Model}
}

func newTestUI(t *testing.T, s analyzer.Snapshot) (*UI, *fakeApp, tcell.SimulationScreen) {
	t.Helper()
	app := &fakeApp{}
	src := &staticSource{s}
	u := New(src, Info{Target: "sqscope workload", PID: 42, Mode: "full events"}, app)
	clock := time.Unix(1000, 0)
	u.now = func() time.Time { return clock }
	u.saveDir = t.TempDir()
	u.Apply(s, clock)
	scr := tcell.NewSimulationScreen("UTF-8")
	if err := scr.Init(); err != nil {
		t.Fatal(err)
	}
	scr.SetSize(170, 40)
	return u, app, scr
}

func draw(u *UI, scr tcell.SimulationScreen) []string {
	w, h := scr.Size()
	scr.Clear()
	u.Root().SetRect(0, 0, w, h)
	u.Root().Draw(scr)
	scr.Show()
	cells, cw, ch := scr.GetContents()
	lines := make([]string, ch)
	for y := 0; y < ch; y++ {
		var b strings.Builder
		for x := 0; x < cw; x++ {
			c := cells[y*cw+x]
			if len(c.Runes) == 0 {
				b.WriteRune(' ')
			} else {
				b.WriteRune(c.Runes[0])
			}
		}
		lines[y] = b.String()
	}
	return lines
}

func find(lines []string, sub string) (int, string) {
	for i, l := range lines {
		if strings.Contains(l, sub) {
			return i, l
		}
	}
	return -1, ""
}

func healthy() analyzer.Snapshot {
	return analyzer.Snapshot{Events: 1000, FirstNS: 1e9, LastNS: 2e9, QPs: []analyzer.QP{
		qp(0x1c0, 128, 32, analyzer.Counters{WRs: 1600, PostCalls: 1600, Inline: 1600, Signaled: 100, Doorbells: 1600, BFWrites: 1600}),
		qp(0x1c1, 204, 0, analyzer.Counters{WRs: 800, PostCalls: 50, Signaled: 50, Doorbells: 50}),
	}}
}

func TestTableCells(t *testing.T) {
	u, _, scr := newTestUI(t, healthy())
	lines := draw(u, scr)
	if _, l := find(lines, "OCCUPANCY"); !strings.Contains(l, "QP") || !strings.Contains(l, "STATUS") {
		t.Fatalf("no header row: %q", l)
	}
	_, l := find(lines, "0x1c0")
	for _, want := range []string{"RC", "128", "100", "16", "1.0", "OK"} {
		if !strings.Contains(l, want) {
			t.Fatalf("row %q lacks %q", l, want)
		}
	}
	_, l = find(lines, "0x1c1")
	if !strings.Contains(l, "204") || !strings.Contains(l, "16.0") {
		t.Fatalf("row %q", l)
	}
	if _, l := find(lines, "sqscope workload (pid 42)"); !strings.Contains(l, "lost 0") {
		t.Fatalf("header %q", l)
	}
}

func TestOccupancyBar(t *testing.T) {
	tests := []struct {
		occ, depth uint64
		filled     int
	}{
		{0, 128, 0}, {1, 128, 1}, {32, 128, 4}, {64, 128, 8}, {128, 128, 16}, {300, 128, 16}, {5, 0, 0},
	}
	for _, tc := range tests {
		b := Bar(tc.occ, tc.depth)
		if n := strings.Count(b, "█"); n != tc.filled || len([]rune(b)) != BarWidth {
			t.Fatalf("Bar(%d,%d) = %q: %d filled, want %d", tc.occ, tc.depth, b, n, tc.filled)
		}
	}
	// and on screen: QP 0x1c0 at 32/128 shows 4 full cells
	u, _, scr := newTestUI(t, healthy())
	_, l := find(draw(u, scr), "0x1c0")
	if n := strings.Count(l, "█"); n != 4 {
		t.Fatalf("screen row %q has %d bar cells, want 4", l, n)
	}
}

func TestOverflowAlert(t *testing.T) {
	s := healthy()
	u, _, scr := newTestUI(t, s)
	if _, l := find(draw(u, scr), "OVERFLOW"); l != "" {
		t.Fatalf("overflow before it happened: %q", l)
	}
	s2 := healthy()
	s2.LastNS = 3e9
	s2.QPs[1] = qp(0x1c1, 204, 204, analyzer.Counters{WRs: 204, PostCalls: 300, Doorbells: 204, ENOMEMSQFull: 96, LongestUnsignaledRun: 204})
	s2.Diagnoses = []analyzer.Diagnosis{{Kind: "sq_overflow_never_signaled", Severity: "error", PID: 42, QPNum: 0x1c1,
		FirstNS: 2.5e9, LastNS: 2.9e9, Count: 96,
		Message: "SQ overflow (ENOMEM): 204 of 204 WRs outstanding and none of the 204 WRs posted was signaled",
		Fix:     "Set IBV_SEND_SIGNALED on at least one WR in every 102."}}
	u.Apply(s2, time.Unix(1001, 0))
	lines := draw(u, scr)
	if _, l := find(lines, "SQ overflow (ENOMEM)"); !strings.Contains(l, "QP 0x1c1 (449) ERROR: SQ overflow") {
		t.Fatalf("alert line %q", l)
	}
	if _, l := find(lines, "seen 96 times, first +1.5s, last +1.9s · fix:"); l == "" {
		t.Fatalf("no line with when and the fix:\n%s", strings.Join(lines, "\n"))
	}
	if _, l := find(lines, "0x1c1 "); !strings.Contains(l, "OVERFLOW") || strings.Count(l, "█") != BarWidth {
		t.Fatalf("row %q", l)
	}
	if a := u.Alerts(); len(a) != 1 || a[0].Severity != "error" {
		t.Fatalf("alerts %+v", a)
	}
	// r resets counters and clears the alerts seen so far
	u.handleKey(tcell.NewEventKey(tcell.KeyRune, 'r', tcell.ModNone))
	if a := u.Alerts(); len(a) != 0 {
		t.Fatalf("alerts after reset: %+v", a)
	}
	if _, l := find(draw(u, scr), "0x1c1 "); strings.Contains(l, "OVERFLOW") {
		t.Fatalf("row after reset %q", l)
	}
}

func TestHistorySparkline(t *testing.T) {
	s := healthy()
	s.HistoryStepNS = 10_000_000
	for i := 0; i < 100; i++ {
		s.QPs[0].History = append(s.QPs[0].History, analyzer.OccSample{Max: uint32(i * 128 / 99)})
	}
	u, _, scr := newTestUI(t, s)
	lines := draw(u, scr)
	if _, l := find(lines, "occupancy, last 1s (top of the scale 128, depth 128)"); l == "" {
		t.Fatalf("no history title:\n%s", strings.Join(lines, "\n"))
	}
	if _, l := find(lines, "▁▁"); !strings.Contains(l, "█") {
		t.Fatalf("no rising sparkline: %q", l)
	}
}

func TestKeys(t *testing.T) {
	u, app, scr := newTestUI(t, healthy())
	draw(u, scr)
	if n, _ := u.Selected(); n != 0x1c0 {
		t.Fatalf("initial selection %#x", n)
	}
	app.key(tcell.KeyRune, 'j')
	if n, _ := u.Selected(); n != 0x1c1 {
		t.Fatalf("after j: %#x", n)
	}
	app.key(tcell.KeyUp, 0)
	if n, _ := u.Selected(); n != 0x1c0 {
		t.Fatalf("after up: %#x", n)
	}
	app.key(tcell.KeyRune, 'p')
	if !u.Paused() {
		t.Fatal("p did not pause")
	}
	if _, l := find(draw(u, scr), "PAUSED"); l == "" {
		t.Fatal("no PAUSED in the header")
	}
	app.key(tcell.KeyRune, 'p')
	if u.Paused() {
		t.Fatal("p did not resume")
	}
	app.key(tcell.KeyRune, 's')
	if _, l := find(draw(u, scr), "saved "); l == "" {
		t.Fatal("s did not save")
	}
	app.key(tcell.KeyRune, '?')
	if _, l := find(draw(u, scr), "keys and columns (any key closes)"); l == "" {
		t.Fatal("? did not show help")
	}
	app.key(tcell.KeyRune, 'x')
	if _, l := find(draw(u, scr), "keys and columns (any key closes)"); l != "" {
		t.Fatal("help did not close")
	}
	app.key(tcell.KeyRune, 'q')
	if !app.stopped {
		t.Fatal("q did not stop")
	}
}

func TestSparkline(t *testing.T) {
	if got := Sparkline([]uint64{0, 64, 128}, 128, 3); got != "▁▄█" {
		t.Fatalf("got %q", got)
	}
	if got := Sparkline([]uint64{0, 0, 128, 128}, 128, 2); got != "▁█" {
		t.Fatalf("got %q", got)
	}
}

// With SelfCPU the header shows sqscope's share of a core between the last
// two refreshes; before there are two readings it shows none.
func TestSelfCPU(t *testing.T) {
	app := &fakeApp{}
	var cpu time.Duration
	clock := time.Unix(1000, 0)
	u := New(&staticSource{healthy()}, Info{Target: "t", PID: 1, Mode: "full events",
		SelfCPU: func() time.Duration { return cpu }}, app)
	u.now = func() time.Time { return clock }
	scr := tcell.NewSimulationScreen("UTF-8")
	if err := scr.Init(); err != nil {
		t.Fatal(err)
	}
	scr.SetSize(170, 40)
	u.Tick()
	if _, l := find(draw(u, scr), "sqscope CPU"); l != "" {
		t.Fatalf("a share from one reading: %q", l)
	}
	cpu += 250 * time.Millisecond
	clock = clock.Add(2 * time.Second)
	u.Tick()
	if _, l := find(draw(u, scr), "sqscope CPU 12%"); l == "" {
		t.Fatalf("no \"sqscope CPU 12%%\" in the header: %q", draw(u, scr)[0])
	}
}

// A terminal too narrow for every column leaves out the ones to drop first
// and keeps the QP, its occupancy and its status.
func TestNarrowTerminal(t *testing.T) {
	for _, c := range []struct {
		width   int
		shown   []string
		dropped []string
	}{
		{170, []string{"QP", "TYPE", "DEPTH", "OCCUPANCY", "WR/DB", "DMA SAVED/s", "CQE SAVED/s", "STATUS"}, nil},
		{100, []string{"QP", "OCCUPANCY", "PEAK", "DMA SAVED/s", "STATUS"}, []string{"CQE SAVED/s"}},
		{60, []string{"QP", "TYPE", "DEPTH", "OCCUPANCY", "INLINE%", "WR/s", "STATUS"}, []string{"PEAK", "SIG 1/N", "WR/DB", "SAVED"}},
		{30, []string{"QP", "OCCUPANCY"}, []string{"TYPE", "DEPTH", "WR/s"}},
	} {
		t.Run(fmt.Sprint(c.width), func(t *testing.T) {
			u, _, scr := newTestUI(t, healthy())
			scr.SetSize(c.width, 40)
			lines := draw(u, scr)
			_, header := find(lines, "QP▲")
			for _, name := range c.shown {
				if !strings.Contains(header, name) {
					t.Errorf("header %q lacks %s", header, name)
				}
			}
			for _, name := range c.dropped {
				if strings.Contains(header, name) {
					t.Errorf("header %q has %s", header, name)
				}
			}
			if _, l := find(lines, "0x1c1"); !strings.Contains(l, "░ 0") {
				t.Errorf("row %q lacks its occupancy", l)
			}
		})
	}
	// and back: a wider terminal shows every column again
	u, _, scr := newTestUI(t, healthy())
	scr.SetSize(60, 40)
	draw(u, scr)
	scr.SetSize(170, 40)
	if _, l := find(draw(u, scr), "QP▲"); !strings.Contains(l, "CQE SAVED/s") || !strings.Contains(l, "STATUS") {
		t.Errorf("header %q after widening", l)
	}
}

func TestFitColumns(t *testing.T) {
	widths := make([]int, len(columns))
	all := -1
	for i := range widths {
		widths[i] = 5
		all += 6
	}
	names := func(shown []int) []string {
		var out []string
		for _, c := range shown {
			out = append(out, columns[c].name)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		width int
		want  []string
	}{
		{"all fit", all, names(allColumns())},
		{"one cell short: the rightmost of the first to drop", all - 1,
			[]string{"QP", "TYPE", "DEPTH", "OCCUPANCY", "PEAK", "INLINE%", "SIG 1/N", "WR/DB", "WR/s", "DMA SAVED/s", "STATUS"}},
		{"only what is never dropped", 0, []string{"QP", "OCCUPANCY", "STATUS"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := names(fitColumns(c.width, widths)); !slices.Equal(got, c.want) {
				t.Errorf("fitColumns(%d) = %v, want %v", c.width, got, c.want)
			}
		})
	}
}

// o moves the sort to the next column, O reverses it; a column without an
// order of its own sorts by pid and QP number.
func TestSortKeys(t *testing.T) {
	s := healthy()
	s.QPs = append(s.QPs, qp(0x1b0, 64, 60, analyzer.Counters{WRs: 10, PostCalls: 10, Doorbells: 10}))
	for i, peak := range []uint64{40, 10, 60} {
		s.QPs[i].PeakOutstanding = peak
	}
	u, app, scr := newTestUI(t, s)
	order := func() string {
		var out []string
		for _, l := range draw(u, scr) {
			if i := strings.Index(l, "0x1"); i >= 0 && strings.HasPrefix(l[i+5:], " RC") {
				out = append(out, l[i:i+5])
			}
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		keys   string
		header string
		order  string
	}{
		{"", "QP▲", "0x1b0 0x1c0 0x1c1"},
		{"O", "QP▼", "0x1c1 0x1c0 0x1b0"},
		{"Oooo", "OCCUPANCY▲", "0x1c1 0x1c0 0x1b0"},
		{"O", "OCCUPANCY▼", "0x1b0 0x1c0 0x1c1"},
		{"Oo", "PEAK▲", "0x1c1 0x1c0 0x1b0"},
		{"oooo", "WR/s▲", "0x1b0 0x1c0 0x1c1"},
		{"oooo", "QP▲", "0x1b0 0x1c0 0x1c1"},
		{"oo", "DEPTH▲", "0x1b0 0x1c0 0x1c1"},
		{"O", "DEPTH▼", "0x1c1 0x1c0 0x1b0"},
	} {
		t.Run(c.header, func(t *testing.T) {
			for _, k := range c.keys {
				app.key(tcell.KeyRune, k)
			}
			if _, l := find(draw(u, scr), c.header); l == "" {
				t.Errorf("no %s in the header", c.header)
			}
			if got := order(); got != c.order {
				t.Errorf("rows %s, want %s", got, c.order)
			}
		})
	}
}

// The detail says what the tracer's bounds cut, and nothing when nothing
// was.
func TestDetailSaysWhatWasCut(t *testing.T) {
	u, _, scr := newTestUI(t, healthy())
	if _, l := find(draw(u, scr), "cut by the tracer's bounds"); l != "" {
		t.Fatalf("a QP with nothing cut shows %q", l)
	}
	s := healthy()
	s.QPs[0].Cuts = analyzer.Cuts{WalkCappedPosts: 2}
	u, _, scr = newTestUI(t, s)
	if _, l := find(draw(u, scr), "cut by the tracer's bounds: 2 post calls with lists past the walk bound"); l == "" {
		t.Fatalf("no cut line:\n%s", strings.Join(draw(u, scr), "\n"))
	}
}

// A counter that goes back between two snapshots (a QP destroyed and made
// again under the same number) gives a rate of 0, not a wrapped one.
func TestRatesNeverWrap(t *testing.T) {
	u, _, _ := newTestUI(t, healthy())
	s := healthy()
	s.LastNS, s.Events = 3e9, 10
	s.QPs[0].WRs = 10
	s.QPs[1].WRs = 1800
	u.Apply(s, time.Unix(1001, 0))
	got := map[uint32]float64{}
	for _, r := range u.rows {
		got[r.qp.QPNum] = r.wrsPS
	}
	if got[0x1c0] != 0 || got[0x1c1] != 1000 || u.eventsPS != 0 {
		t.Errorf("WR/s %v, events/s %g; want 0 for the QP whose count went back, 1000 for the other, events/s 0", got, u.eventsPS)
	}
}

// At 80×24 the overflowing QP's STATUS and the footer's essential keys are
// on screen, and a jumps to the QP of the newest alert.
func TestEightyByTwentyFour(t *testing.T) {
	s := healthy()
	s.QPs = append(s.QPs,
		qp(0x1c2, 204, 204, analyzer.Counters{WRs: 204, PostCalls: 300, Doorbells: 204, ENOMEMSQFull: 96, LongestUnsignaledRun: 204}),
		qp(0x1c3, 204, 3, analyzer.Counters{WRs: 5000, PostCalls: 5000, Signaled: 300, Doorbells: 5000}))
	s.Diagnoses = []analyzer.Diagnosis{{Kind: "sq_overflow_never_signaled", Severity: "error", PID: 42, QPNum: 0x1c2,
		FirstNS: 1.5e9, LastNS: 1.9e9, Count: 96, Message: "SQ overflow (ENOMEM): 204 of 204 WRs outstanding", Fix: "Signal a WR."}}
	u, app, scr := newTestUI(t, s)
	scr.SetSize(80, 24)
	lines := draw(u, scr)
	if _, l := find(lines, "0x1c2 "); !strings.Contains(l, "OVERFLOW") {
		t.Fatalf("the overflowing QP's row lacks STATUS at 80 columns:\n%s", strings.Join(lines, "\n"))
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "? help") || !strings.Contains(last, "q quit") || !strings.Contains(last, "a newest alert") {
		t.Fatalf("footer at 80 columns: %q", last)
	}
	if sel, _ := u.Selected(); sel != 0x1c0 {
		t.Fatalf("selected %#x before the jump, want the first QP", sel)
	}
	app.key(tcell.KeyRune, 'a')
	lines = draw(u, scr)
	if sel, _ := u.Selected(); sel != 0x1c2 {
		t.Fatalf("a selected %#x, want the QP of the newest alert 0x1c2", sel)
	}
	if _, l := find(lines, "QP 0x1c2 (450) pid 42"); l == "" {
		t.Fatalf("the detail does not show QP 0x1c2:\n%s", strings.Join(lines, "\n"))
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "QP 0x1c2: sq_overflow_never_signaled") {
		t.Fatalf("footer after the jump: %q", last)
	}
}

// The header of a replay gives the recording's time, not the wall clock,
// and a warning about the recording; the footer lists the replay keys.
func TestReplayHeaderAndFooter(t *testing.T) {
	app := &fakeApp{}
	p := &fakePlayer{staticSource: staticSource{healthy()}, pos: 12 * time.Second, length: 30 * time.Second}
	u := New(p, Info{Target: "rec", Mode: "replay of r.sqscope", Warning: "the recording stops early"}, app)
	u.Apply(healthy(), time.Unix(1000, 0))
	scr := tcell.NewSimulationScreen("UTF-8")
	if err := scr.Init(); err != nil {
		t.Fatal(err)
	}
	scr.SetSize(200, 40)
	lines := draw(u, scr)
	u.render() // the footer fits the width it was drawn at
	lines = draw(u, scr)
	if !strings.Contains(lines[0], "replay 12s of 30s x1") || !strings.Contains(lines[0], "the recording stops early") {
		t.Fatalf("header %q", lines[0])
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "←→ seek 10s") || !strings.Contains(last, "+- speed") {
		t.Fatalf("footer %q", last)
	}
}

type fakePlayer struct {
	staticSource
	pos, length time.Duration
}

func (f *fakePlayer) SetPaused(bool)                           {}
func (f *fakePlayer) Speed(x float64) float64                  { return 1 }
func (f *fakePlayer) Seek(d time.Duration)                     { f.pos += d }
func (f *fakePlayer) Position() (time.Duration, time.Duration) { return f.pos, f.length }

// A QP whose pre-attach WRs are unknown shows its occupancy and peak as
// lower bounds.
func TestLowerBoundOccupancy(t *testing.T) {
	s := healthy()
	s.QPs[1].OutstandingLowerBound = true
	s.QPs[1].Outstanding, s.QPs[1].PeakOutstanding = 37, 41
	u, _, scr := newTestUI(t, s)
	lines := draw(u, scr)
	_, l := find(lines, "0x1c1")
	if !strings.Contains(l, ">=37") || !strings.Contains(l, ">=41") {
		t.Errorf("row %q: want >=37 and >=41", l)
	}
	if _, l := find(lines, "0x1c0"); strings.Contains(l, ">=") {
		t.Errorf("row %q: an exact QP shows a bound", l)
	}
}

// A QP whose send CQ returned completions past the poll record bound shows
// its occupancy and peak as upper bounds (as neither with a lower bound
// too), its detail says what was cut, and the header the total.
func TestPollCutBounds(t *testing.T) {
	s := healthy()
	q := &s.QPs[0] // the one selected first
	q.OutstandingUpperBound, q.Outstanding, q.PeakOutstanding = true, 37, 41
	q.Cuts = analyzer.Cuts{CQEsPastBound: 191, PollRecordWCs: 32}
	s.Total.CQEsPastBound, s.Total.PollRecordWCs = 191, 32
	u, _, scr := newTestUI(t, s)
	lines := draw(u, scr)
	if _, l := find(lines, "0x1c0 "); !strings.Contains(l, "<=37") || !strings.Contains(l, "<=41") {
		t.Errorf("row %q: want <=37 and <=41", l)
	}
	if _, l := find(lines, "0x1c1 "); strings.Contains(l, "<=") {
		t.Errorf("row %q: an exact QP shows a bound", l)
	}
	if !strings.Contains(lines[0], "191 CQEs past the poll record bound") {
		t.Errorf("header %q: want the completions past the bound", lines[0])
	}
	if _, l := find(lines, "its send CQ's 191 completions past the 32 a poll record holds"); l == "" {
		t.Errorf("no cut line in the detail:\n%s", strings.Join(lines, "\n"))
	}
	q.OutstandingLowerBound = true
	u, _, scr = newTestUI(t, s)
	if _, l := find(draw(u, scr), "0x1c0 "); !strings.Contains(l, "~37") || !strings.Contains(l, "~41") {
		t.Errorf("row %q: want ~37 and ~41 (neither bound)", l)
	}
}

// The detail names the QP's process, where the trace knows its name.
func TestDetailNamesTheProcess(t *testing.T) {
	for _, tc := range []struct{ comm, want string }{{"ib_write_bw", "(ib_write_bw) RC"}, {"", fmt.Sprintf("pid %d RC", healthy().QPs[0].PID)}} {
		s := healthy()
		s.QPs[0].Comm = tc.comm
		u, _, scr := newTestUI(t, s)
		if _, l := find(draw(u, scr), tc.want); l == "" {
			t.Errorf("comm %q: no %q in\n%s", tc.comm, tc.want, strings.Join(draw(u, scr), "\n"))
		}
	}
}
