// Package tui is sqscope's live terminal view: a QP table with occupancy
// bars, the selected QP's occupancy history and savings, and the alerts. It
// reads analyzer snapshots on a ticker and never touches the probe.
package tui

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer"
)

// Source is where snapshots come from: a live analyzer or a replay. The
// occupancy history is wanted only for the QPs keep accepts; reuse holds
// the QPs of a snapshot the view no longer holds, for the new one's QPs;
// a source still at version since returns false and no snapshot
// (analyzer.Analyzer.SnapshotSince).
type Source interface {
	Snapshot(since analyzer.Version, keep func(pid, qpNum uint32) bool, reuse []analyzer.QP) (analyzer.Snapshot, bool)
}

// Live is a Source over a running analyzer.
type Live struct{ A *analyzer.Analyzer }

func (l Live) Snapshot(since analyzer.Version, keep func(pid, qpNum uint32) bool, reuse []analyzer.QP) (analyzer.Snapshot, bool) {
	return l.A.SnapshotSince(since, keep, reuse)
}

// Player is a Source that can be paused, sped up and seeked (replay).
type Player interface {
	Source
	SetPaused(bool)
	// Speed multiplies the replay speed by f and returns the new speed.
	Speed(f float64) float64
	// Seek moves the replay position by d of trace time.
	Seek(d time.Duration)
	// Position returns the replay position and the recording's length.
	Position() (pos, length time.Duration)
}

// Info describes what is being watched, for the header.
type Info struct {
	Target string // command line or description
	PID    int
	Mode   string // "full events", "counters", "replay"
	// SelfCPU, when set, is the CPU time sqscope has used so far: the
	// header shows its share of a core between two refreshes.
	SelfCPU func() time.Duration
	// Warning, when set, is shown in the header (a recording that stops
	// early).
	Warning string
}

// runner is the part of *tview.Application the UI uses.
type runner interface {
	QueueUpdate(f func()) *tview.Application
	// ForceDraw draws now; only on the UI goroutine
	ForceDraw() *tview.Application
	SetRoot(root tview.Primitive, fullscreen bool) *tview.Application
	SetInputCapture(capture func(event *tcell.EventKey) *tcell.EventKey) *tview.Application
	SetFocus(p tview.Primitive) *tview.Application
	Run() error
	Stop()
}

// qpKey is one QP lifetime: a number may name several QPs one after the
// other, each with its generation.
type qpKey struct {
	pid   uint32
	qpNum uint32
	gen   uint64
}

// UI is the terminal view.
type UI struct {
	src  Source
	info Info
	app  runner

	header  *tview.TextView
	table   *qpTable
	detail  *tview.TextView
	alerts  *tview.TextView
	footer  *footerView
	filterF *tview.InputField
	pages   *tview.Pages
	body    *tview.Flex
	lower   *tview.Flex
	root    *tview.Flex

	mu         sync.Mutex
	spare      []analyzer.QP // QPs of a snapshot let go, for the next (under mu)
	// the version of the snapshot shown and the selection it was taken
	// for; settled when it is the version of the one before (under mu)
	shownVer analyzer.Version
	shownSel qpKey
	shownHas bool
	settled  bool
	paused     bool
	sortCol    int
	sortDesc   bool
	filter     string
	selected   qpKey
	hasSel     bool
	detailOnly bool
	message    string
	start      time.Time
	now        func() time.Time
	saveDir    string

	snap       analyzer.Snapshot
	prev       analyzer.Snapshot
	havePrev   bool
	base       map[qpKey]analyzer.Counters
	sinceReset []analyzer.Counters // the counters since the reset, of the QPs in base
	prevIdx    map[qpKey]int       // the previous snapshot's QPs, by key
	rows       []row               // every QP of the snapshot, in its order
	// the table (view.go, virtual.go): the lines shown, in groups when
	// grouping, made of indices into rows; the group totals; texts made
	// only for the lines drawn, again when gen moves on
	grouping  grouping
	order     []int32
	keys      []groupKey
	lines     []entry
	groups    []group
	filterBuf []byte
	gen       uint32
	texts     [][]text             // the texts of every column, by table line
	textGen   []uint32             // the gen each line's texts were made in
	widths    []int                // the cells each column needs on screen
	shown     []int                // the columns shown, by index in columns
	cells     [][]*tview.TableCell // the table's cells by line, reused
	// what the screen shows changed in this refresh (redraw.go): a text,
	// the footer, the table's window
	dirty        bool
	textsChanged bool
	drawn        tableWindow
	alertLog     []Alert
	// alerts older than this trace time were cleared by a reset
	alertsFrom uint64
	eventsPS   float64
	// sqscope's own CPU: the last reading, when it was taken, and the
	// share of a core between the last two (once there were two)
	cpu      time.Duration
	cpuAt    time.Time
	cpuShare float64
	cpuKnown bool
}

// New builds the UI on app (a *tview.Application in production).
func New(src Source, info Info, app runner) *UI {
	u := &UI{
		src: src, info: info, app: app,
		base: map[qpKey]analyzer.Counters{}, prevIdx: map[qpKey]int{},
		now: time.Now, sortCol: 0, saveDir: ".",
	}
	u.start = u.now()
	u.header = tview.NewTextView().SetDynamicColors(true)
	u.shown = allColumns()
	u.table = &qpTable{Table: tview.NewTable().SetFixed(1, 0).SetSelectable(true, false), u: u}
	u.table.SetContent(&tableContent{u: u})
	u.table.SetBorder(true).SetTitle(" send queues ")
	u.table.SetSelectionChangedFunc(func(r, _ int) {
		if r >= 1 && r-1 < len(u.lines) && u.lines[r-1].row >= 0 {
			u.mu.Lock()
			u.selected, u.hasSel = u.rows[u.lines[r-1].row].key, true
			u.mu.Unlock()
			u.renderDetail()
		}
	})
	u.detail = tview.NewTextView().SetDynamicColors(true)
	u.detail.SetBorder(true).SetTitle(" detail ")
	u.alerts = tview.NewTextView().SetDynamicColors(true)
	u.alerts.SetBorder(true).SetTitle(" alerts ")
	u.footer = &footerView{TextView: tview.NewTextView().SetDynamicColors(true)}
	u.filterF = tview.NewInputField().SetLabel("filter: ")
	u.filterF.SetDoneFunc(func(k tcell.Key) {
		if k == tcell.KeyEnter {
			u.filter = strings.TrimSpace(u.filterF.GetText())
		}
		u.root.RemoveItem(u.filterF)
		u.app.SetFocus(u.table)
		u.render()
	})
	u.lower = tview.NewFlex().AddItem(u.detail, 0, 3, false).AddItem(u.alerts, 0, 2, false)
	u.body = tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(u.table, 0, 1, true).
		AddItem(u.lower, 0, 1, false)
	u.root = tview.NewFlex().SetDirection(tview.FlexRow).
		AddItem(u.header, 1, 0, false).
		AddItem(u.body, 0, 1, true).
		AddItem(u.footer, 1, 0, false)
	u.pages = tview.NewPages().AddPage("main", u.root, true, true)
	u.pages.AddPage("help", helpModal(), true, false)
	app.SetRoot(u.pages, true)
	app.SetInputCapture(u.handleKey)
	app.SetFocus(u.table)
	return u
}

// Root is the top primitive (tests draw it on a simulation screen).
func (u *UI) Root() tview.Primitive { return u.pages }

// Run ticks every interval until ctx is done or the user quits. The
// terminal is restored on every path (tview does it on Stop and on panic).
func (u *UI) Run(ctx context.Context, interval time.Duration) error {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		u.Tick()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				u.app.Stop()
				return
			case <-t.C:
				u.Tick()
			}
		}
	}()
	err := u.app.Run()
	close(done)
	return err
}

// Tick reads a snapshot and applies it on the UI goroutine. While the
// source stays at one version it takes none: the first refresh at a
// version shows the rates of the change, the second their end (no change,
// zero rates), and those after it only the header.
func (u *UI) Tick() {
	u.mu.Lock()
	paused := u.paused
	sel, has := u.selected, u.hasSel
	since := analyzer.Version{}
	if u.settled && has == u.shownHas && sel == u.shownSel {
		since = u.shownVer
	}
	spare := u.spare
	u.spare = nil
	u.mu.Unlock()
	var s analyzer.Snapshot
	fresh := false
	if !paused {
		s, fresh = u.src.Snapshot(since, func(pid, qpNum uint32) bool { return has && sel.pid == pid && sel.qpNum == qpNum }, spare)
	}
	if !fresh {
		u.mu.Lock()
		if u.spare == nil {
			u.spare = spare
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
			u.settled = s.Version == u.shownVer
			u.shownVer, u.shownSel, u.shownHas = s.Version, sel, has
			u.mu.Unlock()
			u.Apply(s, at)
		} else {
			u.renderHeader()
		}
		u.drawIfDirty()
	})
}

// drawIfDirty draws the screen when the refresh changed what it shows.
func (u *UI) drawIfDirty() {
	if u.dirty {
		u.app.ForceDraw()
	}
}

// sameQPs reports whether a and b share their memory.
func sameQPs(a, b []analyzer.QP) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

// noteCPU takes a reading of sqscope's CPU time made at at.
func (u *UI) noteCPU(cpu time.Duration, at time.Time) {
	if u.info.SelfCPU == nil {
		return
	}
	if !u.cpuAt.IsZero() && at.After(u.cpuAt) {
		u.cpuShare = float64(cpu-u.cpu) / float64(at.Sub(u.cpuAt))
		u.cpuKnown = true
	}
	u.cpu, u.cpuAt = cpu, at
}

// Apply takes a snapshot into the view. It runs on the UI goroutine (or in
// tests, directly).
func (u *UI) Apply(s analyzer.Snapshot, at time.Time) {
	old := u.prev.QPs
	u.prev, u.snap = u.snap, s
	// the QPs of the snapshot let go serve the next one, unless still
	// held (a reset applies the same snapshot again)
	if cap(old) > 0 && !sameQPs(old, u.prev.QPs) && !sameQPs(old, u.snap.QPs) {
		u.mu.Lock()
		u.spare = old
		u.mu.Unlock()
	}
	dt := 0.0
	if u.havePrev && s.LastNS > u.prev.LastNS {
		dt = float64(s.LastNS-u.prev.LastNS) / 1e9
	}
	if dt > 0 {
		u.eventsPS = float64(analyzer.Growth(s.Events, u.prev.Events)) / dt
	} else if u.havePrev {
		u.eventsPS = 0
	}
	// the previous snapshot's QPs, for the rates: most often the same QPs
	// in the same places; by key (a map made when first needed) otherwise
	clear(u.prevIdx)
	mapped := false
	prevOf := func(i int, k qpKey) *analyzer.QP {
		if !u.havePrev {
			return nil
		}
		if i < len(u.prev.QPs) {
			if p := &u.prev.QPs[i]; p.PID == k.pid && p.QPNum == k.qpNum && p.Gen == k.gen {
				return p
			}
		}
		if !mapped {
			for j := range u.prev.QPs {
				p := &u.prev.QPs[j]
				u.prevIdx[qpKey{p.PID, p.QPNum, p.Gen}] = j
			}
			mapped = true
		}
		if j, ok := u.prevIdx[k]; ok {
			return &u.prev.QPs[j]
		}
		return nil
	}
	u.rows = u.rows[:0]
	u.sinceReset = u.sinceReset[:0]
	for i := range s.QPs {
		q := &s.QPs[i]
		k := qpKey{q.PID, q.QPNum, q.Gen}
		r := row{key: k, qp: q, c: &q.Counters, occupancy: q.Outstanding}
		if b, ok := u.base[k]; ok {
			u.sinceReset = append(u.sinceReset, q.Counters.Sub(b))
		}
		if p := prevOf(i, k); p != nil && dt > 0 {
			r.wrsPS = float64(analyzer.Growth(q.WRs, p.WRs)) / dt
			r.dmaSaved = float64(analyzer.Growth(q.PCIe.DMAReadsSaved(), p.PCIe.DMAReadsSaved())) / dt
			r.cqeSaved = float64(analyzer.Growth(q.PCIe.CQEWritesSaved, p.PCIe.CQEWritesSaved)) / dt
		}
		u.rows = append(u.rows, r)
	}
	// the counters since the reset, once u.sinceReset no longer grows
	n := 0
	for i := range u.rows {
		r := &u.rows[i]
		if _, ok := u.base[r.key]; ok {
			r.c = &u.sinceReset[n]
			n++
		}
		r.status = status(r.qp, r.c)
	}
	u.alertLog = u.alertLog[:0]
	for _, d := range s.Diagnoses {
		if d.LastNS >= u.alertsFrom {
			u.alertLog = append(u.alertLog, d)
		}
	}
	u.havePrev = true
	u.render()
}

func (u *UI) renderHeader() {
	u.mu.Lock()
	paused := u.paused
	u.mu.Unlock()
	s := u.snap
	elapsed := u.now().Sub(u.start).Truncate(time.Second)
	lost := fmt.Sprintf("lost %d", s.Lost)
	if s.Lost > 0 {
		lost = fmt.Sprintf("[white:red]LOST %d[-:-]", s.Lost)
	}
	// the facts first: a long command line is what the width cuts; a
	// replay shows the recording's time, not the wall clock's
	when := elapsed.String()
	if p, ok := u.src.(Player); ok {
		pos, length := p.Position()
		when = fmt.Sprintf("replay %s of %s x%.2g", pos.Truncate(time.Second), length.Truncate(time.Second), p.Speed(1))
	}
	h := fmt.Sprintf("[::b]sqscope[::-] | %s | %s | events/s %s | %s", u.info.Mode, when, humanRate(u.eventsPS), lost)
	if u.info.Warning != "" {
		h += " | [white:red]" + tview.Escape(u.info.Warning) + "[-:-]"
	}
	if u.cpuKnown {
		h += fmt.Sprintf(" | sqscope CPU %.0f%%", 100*u.cpuShare)
	}
	if s.Exited {
		h += fmt.Sprintf(" | target exited (%d)", s.ExitCode)
	}
	if paused {
		h += " | [black:yellow]PAUSED[-:-]"
	}
	target := u.info.Target
	if u.info.PID > 0 {
		target += fmt.Sprintf(" (pid %d)", u.info.PID)
	}
	u.setText(u.header, h+" | "+tview.Escape(target))
}

func (u *UI) renderFooter() {
	keys := []string{"? help", "q quit", "a newest alert", "↑↓/jk select", "Enter detail", "o sort", "p pause", "r reset", "s save", "/ filter", "g group"}
	if _, ok := u.src.(Player); ok {
		keys = slices.Insert(keys, 2, "←→ seek 10s", "+- speed")
	}
	var lead []string
	if u.message != "" {
		lead = append(lead, u.message)
	}
	if u.filter != "" {
		lead = append(lead, fmt.Sprintf("filter %q", u.filter))
	}
	if u.grouping != groupNone {
		lead = append(lead, "by "+u.grouping.String())
	}
	l := strings.Join(lead, " · ")
	if l != u.footer.lead || !slices.Equal(keys, u.footer.keys) {
		u.footer.lead, u.footer.keys = l, keys
		u.dirty = true
	}
}

// footerView is the footer line; it fits the keys to its width when drawn.
type footerView struct {
	*tview.TextView
	lead string   // messages, shown first
	keys []string // the most needed first
}

// Draw shows as many keys as the width holds, the most needed first, in
// the order a reader scans them: the essential two last.
func (f *footerView) Draw(screen tcell.Screen) {
	_, _, w, _ := f.GetInnerRect()
	used := tview.TaggedStringWidth(f.lead)
	n := 0
	for n < len(f.keys) && used+3+tview.TaggedStringWidth(f.keys[n]) <= w {
		used += 3 + tview.TaggedStringWidth(f.keys[n])
		n++
	}
	shown := append(slices.Clone(f.keys[min(n, 2):n]), f.keys[:min(n, 2)]...)
	t := "[::d]" + strings.Join(shown, " · ") + "[::-]"
	if f.lead != "" {
		t = f.lead + " · " + t
	}
	if t != f.GetText(false) {
		f.SetText(t)
	}
	f.TextView.Draw(screen)
}

// save writes the current snapshot as a text report and says where.
func (u *UI) save() string {
	name := fmt.Sprintf("%s/sqscope-snapshot-%s.txt", u.saveDir, u.now().Format("20060102-150405"))
	// never over an existing file, nor through a link
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Sprintf("[red]saving snapshot: %v[-]", err)
	}
	err = analyzer.WriteText(f, u.snap)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Sprintf("[red]saving snapshot: %v[-]", err)
	}
	return "saved " + name
}

// Paused reports whether the view is paused.
func (u *UI) Paused() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.paused
}

// Selected returns the selected QP number.
func (u *UI) Selected() (uint32, bool) { return u.selected.qpNum, u.hasSel }
