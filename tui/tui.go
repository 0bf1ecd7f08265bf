// Package tui is sqscope's live terminal view: a QP table with occupancy
// bars, the selected QP's occupancy history and savings, and the alerts. It
// reads analyzer snapshots on a ticker and never touches the probe.
package tui

import (
	"context"
	"runtime"
	"unsafe"

	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/report"
)

// Source is where snapshots come from: a live analyzer or a replay. It
// takes the snapshot o asks for, or none (false) while it is at version
// o.Since (analyzer.Analyzer.SnapshotWith).
type Source interface {
	Snapshot(o analyzer.SnapshotOptions) (analyzer.Snapshot, bool)
}

// Live is a Source over a running analyzer.
type Live struct{ A *analyzer.Analyzer }

func (l Live) Snapshot(o analyzer.SnapshotOptions) (analyzer.Snapshot, bool) {
	return l.A.SnapshotWith(o)
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
	pages   *stack
	body    *tview.Flex
	lower   *tview.Flex
	root    *tview.Flex

	mu    sync.Mutex
	spare []analyzer.QP // QPs of a snapshot let go, for the next (under mu)
	// the version of the snapshot shown and the selection it was taken
	// for; settled when a whole snapshot came at the version of the one
	// before, wantWhole when a partial one did (under mu; apply.go)
	shownVer  analyzer.Version
	shownSel  qpKey
	shownHas  bool
	settled   bool
	wantWhole bool
	// the QPs of the lines on screen, how many rows there are and when the
	// last whole snapshot came (under mu; apply.go)
	onScreen   []qpKey
	nrows      int
	wholeAt    time.Time
	paused     bool
	sortCol    int
	sortDesc   bool
	filter     string
	selected   qpKey
	hasSel     bool
	detailOnly bool
	message    string
	start      time.Time
	width      int // the screen width last drawn at (0: not yet drawn)
	now        func() time.Time
	saveDir    string

	snap analyzer.Snapshot // the last applied, whole or partial
	// the QPs of the last whole snapshot, which the rows point into
	wholeQPs []analyzer.QP
	applied  bool // a snapshot was applied (lastEvents and lastNS hold)
	// its events and last event time, for the events' rate
	lastEvents, lastNS uint64
	base               map[qpKey]analyzer.Counters
	rows               []row           // every QP of the last whole snapshot, in its order
	oldRows            []row           // the rows before it, reused
	rowIdx             map[qpKey]int32 // rows by key
	oldIdx             map[qpKey]int32 // oldRows by key
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
		base: map[qpKey]analyzer.Counters{}, rowIdx: map[qpKey]int32{}, oldIdx: map[qpKey]int32{},
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
	u.pages = &stack{Pages: tview.NewPages().AddPage("main", u.root, true, true), resized: u.resized}
	u.pages.AddPage("help", helpModal(), true, false)
	app.SetRoot(u.pages, true)
	app.SetInputCapture(u.handleKey)
	app.SetFocus(u.table)
	return u
}

// narrowWidth is the screen width below which the alerts pane takes half
// the lower row and says each alert in its short form, so that its fix is
// seen whole.
const narrowWidth = 120

// resized lays the view out for a screen width newly drawn at.
func (u *UI) resized(width int) {
	u.width = width
	if width < narrowWidth {
		u.lower.ResizeItem(u.detail, 0, 1).ResizeItem(u.alerts, 0, 1)
	} else {
		u.lower.ResizeItem(u.detail, 0, 3).ResizeItem(u.alerts, 0, 2)
	}
	u.renderHeader()
	u.renderAlerts()
}

// Root is the top primitive (tests draw it on a simulation screen).
func (u *UI) Root() tview.Primitive { return u.pages }

// Run ticks every interval until ctx is done or the user quits. The
// terminal is restored on every path (tview does it on Stop and on panic).
// The ticker and the application run on threads of their own, named
// ViewThread, so that what the view costs can be read from /proc.
func (u *UI) Run(ctx context.Context, interval time.Duration) error {
	done := make(chan struct{})
	go func() {
		viewThread() // ended with the goroutine
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
	ran := make(chan error, 1)
	go func() {
		viewThread()
		ran <- u.app.Run()
	}()
	err := <-ran
	close(done)
	return err
}

// ViewThread is the name of the threads the view runs on
// (/proc/PID/task/TID/comm).
const ViewThread = "sqscope-view"

// viewThread keeps the calling goroutine on its thread, which ends with
// it, and names the thread ViewThread.
func viewThread() {
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&viewThreadName[0])), 0, 0, 0)
}

var viewThreadName = append([]byte(ViewThread), 0)

// drawIfDirty draws the screen when the refresh changed what it shows.
func (u *UI) drawIfDirty() {
	if u.dirty {
		u.app.ForceDraw()
	}
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
	// a replay shows the recording's time, not the wall clock's
	when := elapsed.String()
	if p, ok := u.src.(Player); ok {
		pos, length := p.Position()
		when = fmt.Sprintf("replay %s of %s x%.2g", pos.Truncate(time.Second), length.Truncate(time.Second), p.Speed(1))
	}
	// what must be seen first: paused, lost events, the target (its
	// command line cut to a third of the screen, its pid kept, so that
	// the figures after it fit)
	h := "[::b]sqscope[::-]"
	if paused {
		h += " | [black:yellow]PAUSED[-:-]"
	}
	if s.Lost > 0 {
		h += " | " + lost
	}
	target := u.info.Target
	if limit := u.width / 3; u.width > 0 && len([]rune(target)) > limit {
		target = string([]rune(target)[:max(limit-1, 8)]) + "…"
	}
	if u.info.PID > 0 {
		target += fmt.Sprintf(" (pid %d)", u.info.PID)
	}
	h += " | " + tview.Escape(target) + fmt.Sprintf(" | %s | %s | events/s %s", u.info.Mode, when, humanRate(u.eventsPS))
	if s.Lost == 0 {
		h += " | " + lost
	}
	if c := s.Total.CQEsPastBound; c > 0 {
		h += fmt.Sprintf(" | [orange]%d CQEs past the poll record bound[-]", c)
	}
	if u.info.Warning != "" {
		h += " | [white:red]" + tview.Escape(u.info.Warning) + "[-:-]"
	}
	if u.cpuKnown {
		h += fmt.Sprintf(" | sqscope CPU %.0f%%", 100*u.cpuShare)
	}
	if se := s.Sentinel; se != nil && se.Sampling != nil {
		h += " | " + tview.Escape(sampleHeader(se.Sampling))
	}
	if s.Exited {
		h += fmt.Sprintf(" | target exited (%d)", s.ExitCode)
	}
	u.setText(u.header, h)
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
	err = report.WriteText(f, u.wholeSnapshot())
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

// sampleHeader is the sentinel's sample windows in a few words: how many,
// what their probes cost the traced processes (measured), the budget.
func sampleHeader(m *analyzer.Sampling) string {
	h := fmt.Sprintf("windows %d", m.Windows)
	switch {
	case m.Cost != nil && m.Cost.TargetCPUSeconds > 0:
		h += fmt.Sprintf(", probes %.2f%% of the targets' CPU", m.Cost.SharePct)
	case m.NotMeasured != "":
		h += ", cost not measured"
	}
	if m.BudgetPct > 0 {
		h += fmt.Sprintf(" (budget %g%%)", m.BudgetPct)
	}
	if sh := m.Shares; sh != nil {
		h += ", est. inline " + report.EstimateText(sh.Inline) + ", signaled " + report.EstimateText(sh.Signaled)
	}
	return h
}
