// Package tui is sqscope's live terminal view: a QP table with occupancy
// bars, the selected QP's occupancy history and savings, and the alerts. It
// reads analyzer snapshots on a ticker and never touches the probe.
package tui

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer"
)

// Source is where snapshots come from: a live analyzer or a replay. The
// occupancy history is wanted only for the QPs keep accepts.
type Source interface {
	Snapshot(keep func(pid, qpNum uint32) bool) analyzer.Snapshot
}

// Live is a Source over a running analyzer.
type Live struct{ A *analyzer.Analyzer }

func (l Live) Snapshot(keep func(pid, qpNum uint32) bool) analyzer.Snapshot {
	return l.A.SnapshotHistory(keep)
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
}

// runner is the part of *tview.Application the UI uses.
type runner interface {
	QueueUpdateDraw(f func()) *tview.Application
	SetRoot(root tview.Primitive, fullscreen bool) *tview.Application
	SetInputCapture(capture func(event *tcell.EventKey) *tcell.EventKey) *tview.Application
	SetFocus(p tview.Primitive) *tview.Application
	Run() error
	Stop()
}

type qpKey struct {
	pid   uint32
	qpNum uint32
}

// row is one QP as the table shows it.
type row struct {
	key       qpKey
	qp        analyzer.QP
	c         analyzer.Counters // after the reset baseline
	mops      float64
	dmaSaved  float64 // DMA reads saved per second
	cqeSaved  float64 // CQE writes saved per second
	status    string
	occupancy uint64
}

// Alert is one line of the alerts pane: an analyzer diagnosis.
type Alert = analyzer.Diagnosis

// UI is the terminal view.
type UI struct {
	src  Source
	info Info
	app  runner

	header  *tview.TextView
	table   *tview.Table
	detail  *tview.TextView
	alerts  *tview.TextView
	footer  *tview.TextView
	filterF *tview.InputField
	pages   *tview.Pages
	body    *tview.Flex
	lower   *tview.Flex
	root    *tview.Flex

	mu         sync.Mutex
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

	snap     analyzer.Snapshot
	prev     analyzer.Snapshot
	havePrev bool
	base     map[qpKey]analyzer.Counters
	rows     []row
	cells    [][]*tview.TableCell // the table's cells, reused
	alertLog []Alert
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

// Columns of the QP table; sortable by index.
var columns = []string{"QP", "TYPE", "DEPTH", "OCCUPANCY", "PEAK", "INLINE%", "SIG 1/N", "WR/DB", "Mops", "DMA SAVED/s", "CQE SAVED/s", "STATUS"}

// BarWidth is the number of cells of an occupancy bar.
const BarWidth = 16

// New builds the UI on app (a *tview.Application in production).
func New(src Source, info Info, app runner) *UI {
	u := &UI{
		src: src, info: info, app: app,
		base: map[qpKey]analyzer.Counters{},
		now:  time.Now, sortCol: 0, saveDir: ".",
	}
	u.start = u.now()
	u.header = tview.NewTextView().SetDynamicColors(true)
	u.table = tview.NewTable().SetFixed(1, 0).SetSelectable(true, false)
	u.table.SetBorder(true).SetTitle(" send queues ")
	u.table.SetSelectionChangedFunc(func(r, _ int) {
		if r >= 1 && r-1 < len(u.rows) {
			u.mu.Lock()
			u.selected, u.hasSel = u.rows[r-1].key, true
			u.mu.Unlock()
			u.renderDetail()
		}
	})
	u.detail = tview.NewTextView().SetDynamicColors(true)
	u.detail.SetBorder(true).SetTitle(" detail ")
	u.alerts = tview.NewTextView().SetDynamicColors(true)
	u.alerts.SetBorder(true).SetTitle(" alerts ")
	u.footer = tview.NewTextView().SetDynamicColors(true)
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

func helpModal() tview.Primitive {
	t := tview.NewTextView().SetText(strings.Join([]string{
		"↑/↓ or j/k  select a QP",
		"Enter       detail of the selected QP (again: back)",
		"o / O       sort by the next column / reverse",
		"p           pause / resume",
		"r           reset counters (rates and totals start again)",
		"s           save a snapshot report to a file",
		"/           filter QPs (by number or pid); empty clears",
		"← / →       replay: seek 10 s back / forward",
		"+ / -       replay: faster / slower",
		"?           this help",
		"q, Ctrl-C   quit",
	}, "\n"))
	t.SetBorder(true).SetTitle(" keys (any key closes) ")
	return tview.NewFlex().
		AddItem(nil, 0, 1, false).
		AddItem(tview.NewFlex().SetDirection(tview.FlexRow).
			AddItem(nil, 0, 1, false).AddItem(t, 13, 0, true).AddItem(nil, 0, 1, false), 62, 0, true).
		AddItem(nil, 0, 1, false)
}

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

// Tick reads a snapshot and applies it on the UI goroutine.
func (u *UI) Tick() {
	u.mu.Lock()
	paused := u.paused
	u.mu.Unlock()
	if paused {
		u.app.QueueUpdateDraw(func() { u.renderHeader() })
		return
	}
	u.mu.Lock()
	sel, has := u.selected, u.hasSel
	u.mu.Unlock()
	s := u.src.Snapshot(func(pid, qpNum uint32) bool { return has && sel == qpKey{pid, qpNum} })
	at := u.now()
	var cpu time.Duration
	if u.info.SelfCPU != nil {
		cpu = u.info.SelfCPU()
	}
	u.app.QueueUpdateDraw(func() {
		u.noteCPU(cpu, at)
		u.Apply(s, at)
	})
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
	u.prev, u.snap = u.snap, s
	dt := 0.0
	if u.havePrev && s.LastNS > u.prev.LastNS {
		dt = float64(s.LastNS-u.prev.LastNS) / 1e9
	}
	if dt > 0 {
		u.eventsPS = float64(s.Events-u.prev.Events) / dt
	} else if u.havePrev {
		u.eventsPS = 0
	}
	prevQP := map[qpKey]analyzer.QP{}
	if u.havePrev {
		for _, q := range u.prev.QPs {
			prevQP[qpKey{q.PID, q.QPNum}] = q
		}
	}
	u.rows = u.rows[:0]
	for _, q := range s.QPs {
		k := qpKey{q.PID, q.QPNum}
		r := row{key: k, qp: q, c: q.Counters.Sub(u.base[k]), occupancy: q.Outstanding}
		if p, ok := prevQP[k]; ok && dt > 0 {
			r.mops = float64(q.WRs-p.WRs) / dt / 1e6
			r.dmaSaved = float64(q.PCIe.DMAReadsSaved()-p.PCIe.DMAReadsSaved()) / dt
			r.cqeSaved = float64(q.PCIe.CQEWritesSaved-p.PCIe.CQEWritesSaved) / dt
		}
		r.status = status(q, r.c)
		u.rows = append(u.rows, r)
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

// status is OK, NEAR FULL or OVERFLOW, by the counters since the reset.
func status(q analyzer.QP, c analyzer.Counters) string {
	q.Counters = c
	switch {
	case c.ENOMEMSQFull > 0:
		return "OVERFLOW"
	case q.NearFull():
		return "NEAR FULL"
	}
	return "OK"
}

// Bar draws an occupancy bar of BarWidth cells.
func Bar(occ, depth uint64) string {
	filled := 0
	if depth > 0 {
		filled = int(occ * BarWidth / depth)
		if occ > 0 && filled == 0 {
			filled = 1
		}
	}
	filled = min(filled, BarWidth)
	return strings.Repeat("█", filled) + strings.Repeat("░", BarWidth-filled)
}

var sparkLevels = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws v (scaled to max) in width cells, each the maximum of its
// share of the samples.
func Sparkline(v []uint64, maxV uint64, width int) string {
	if width <= 0 || len(v) == 0 {
		return ""
	}
	if maxV == 0 {
		for _, x := range v {
			maxV = max(maxV, x)
		}
		if maxV == 0 {
			maxV = 1
		}
	}
	cols := min(width, len(v))
	var b strings.Builder
	for c := 0; c < cols; c++ {
		lo, hi := c*len(v)/cols, (c+1)*len(v)/cols
		var m uint64
		for _, x := range v[lo:hi] {
			m = max(m, x)
		}
		lvl := int(m * uint64(len(sparkLevels)-1) / maxV)
		b.WriteRune(sparkLevels[min(lvl, len(sparkLevels)-1)])
	}
	return b.String()
}

func (u *UI) visibleRows() []row {
	var out []row
	for _, r := range u.rows {
		if u.filter != "" {
			s := fmt.Sprintf("%#x %d %d %s", r.key.qpNum, r.key.qpNum, r.key.pid, r.qp.Type)
			if !strings.Contains(s, u.filter) {
				continue
			}
		}
		out = append(out, r)
	}
	less := func(a, b row) bool {
		switch u.sortCol {
		case 2:
			return a.qp.MaxSendWR < b.qp.MaxSendWR
		case 3:
			return a.occupancy < b.occupancy
		case 4:
			return a.qp.PeakOutstanding < b.qp.PeakOutstanding
		case 5:
			return analyzer.Ratio(a.c.Inline, a.c.WRs) < analyzer.Ratio(b.c.Inline, b.c.WRs)
		case 8:
			return a.mops < b.mops
		case 9:
			return a.dmaSaved < b.dmaSaved
		case 10:
			return a.cqeSaved < b.cqeSaved
		case 11:
			return a.status < b.status
		}
		if a.key.pid != b.key.pid {
			return a.key.pid < b.key.pid
		}
		return a.key.qpNum < b.key.qpNum
	}
	sort.SliceStable(out, func(i, j int) bool {
		if u.sortDesc {
			return less(out[j], out[i])
		}
		return less(out[i], out[j])
	})
	return out
}

func (u *UI) render() {
	u.renderHeader()
	rows := u.visibleRows()
	u.rows = rows
	// cells are reused from tick to tick: a refresh only changes texts
	for u.table.GetRowCount() > len(rows)+1 {
		u.table.RemoveRow(u.table.GetRowCount() - 1)
	}
	if len(u.cells) > len(rows)+1 {
		u.cells = u.cells[:len(rows)+1]
	}
	for i, name := range columns {
		if i == u.sortCol {
			name += map[bool]string{false: "▲", true: "▼"}[u.sortDesc]
		}
		u.setCell(0, i, name, tcell.ColorYellow).SetSelectable(false)
	}
	selRow := 1
	for i, r := range rows {
		q := r.qp
		sigN := "-"
		if r.c.Signaled > 0 {
			sigN = fmt.Sprintf("%.0f", analyzer.Ratio(r.c.WRs, r.c.Signaled))
		} else if r.c.WRs > 0 {
			sigN = "never"
		}
		perDB := "-"
		if r.c.Doorbells > 0 {
			perDB = fmt.Sprintf("%.1f", analyzer.Ratio(r.c.WRs, r.c.Doorbells))
		}
		depth := fmt.Sprint(q.MaxSendWR)
		if !q.CapsKnown {
			depth += "?"
		}
		color := tcell.ColorGreen
		switch r.status {
		case "OVERFLOW":
			color = tcell.ColorRed
		case "NEAR FULL":
			color = tcell.ColorOrange
		}
		cells := []string{
			fmt.Sprintf("%#x", q.QPNum), q.Type, depth,
			fmt.Sprintf("%s %d", Bar(r.occupancy, uint64(q.MaxSendWR)), r.occupancy),
			fmt.Sprint(q.PeakOutstanding),
			fmt.Sprintf("%.0f", analyzer.Percent(r.c.Inline, r.c.WRs)),
			sigN, perDB,
			fmt.Sprintf("%.3f", r.mops),
			humanRate(r.dmaSaved), humanRate(r.cqeSaved), r.status,
		}
		for j, c := range cells {
			fg := tcell.ColorWhite
			if j == 3 || j == 11 {
				fg = color
			}
			u.setCell(i+1, j, c, fg)
		}
		if u.hasSel && r.key == u.selected {
			selRow = i + 1
		}
	}
	if len(rows) > 0 {
		if !u.hasSel {
			u.mu.Lock()
			u.selected, u.hasSel = rows[0].key, true
			u.mu.Unlock()
		}
		u.table.Select(selRow, 0)
	}
	u.renderDetail()
	u.renderAlerts()
	u.renderFooter()
}

// setCell sets a cell's text and colour, creating it only once.
func (u *UI) setCell(r, c int, text string, fg tcell.Color) *tview.TableCell {
	for len(u.cells) <= r {
		u.cells = append(u.cells, make([]*tview.TableCell, len(columns)))
	}
	cell := u.cells[r][c]
	if cell == nil {
		cell = tview.NewTableCell(text)
		u.cells[r][c] = cell
		u.table.SetCell(r, c, cell)
	} else if cell.Text != text {
		cell.SetText(text)
	}
	if cell.Color != fg {
		cell.SetTextColor(fg)
	}
	return cell
}

func humanRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
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
	// the facts first: a long command line is what the width cuts
	h := fmt.Sprintf("[::b]sqscope[::-] | %s | %s | events/s %s | %s", u.info.Mode, elapsed, humanRate(u.eventsPS), lost)
	if u.cpuKnown {
		h += fmt.Sprintf(" | sqscope CPU %.0f%%", 100*u.cpuShare)
	}
	if p, ok := u.src.(Player); ok {
		pos, length := p.Position()
		h += fmt.Sprintf(" | replay %s/%s x%.2g", pos.Truncate(time.Second), length.Truncate(time.Second), p.Speed(1))
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
	u.header.SetText(h + " | " + tview.Escape(target))
}

func (u *UI) selectedRow() (row, bool) {
	for _, r := range u.rows {
		if u.hasSel && r.key == u.selected {
			return r, true
		}
	}
	return row{}, false
}

func (u *UI) renderDetail() {
	r, ok := u.selectedRow()
	if !ok {
		u.detail.SetText("no QP selected")
		return
	}
	q := r.qp
	_, _, w, _ := u.detail.GetInnerRect()
	if w <= 0 {
		w = 60
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[::b]QP %#x[::-] pid %d %s  depth %d  max_inline %d  max_sge %d", q.QPNum, q.PID, q.Type, q.MaxSendWR, q.MaxInline, q.MaxSendSGE)
	if q.SigAll {
		b.WriteString("  sq_sig_all")
	}
	if q.CapsInferred {
		b.WriteString("  [orange]caps inferred[-]")
	} else if !q.CapsKnown {
		b.WriteString("  [orange]caps unknown (attached late)[-]")
	}
	fmt.Fprintf(&b, "\noccupancy, last %s (max %d):\n", historySpan(q, u.snap.HistoryStepNS), q.MaxSendWR)
	hist := make([]uint64, len(q.History))
	for i, h := range q.History {
		hist[i] = uint64(h.Max)
	}
	b.WriteString("[green]" + Sparkline(hist, uint64(q.MaxSendWR), w) + "[-]\n")
	p := q.PCIe
	fmt.Fprintf(&b, "saved vs one WR per call, not inline, all signaled (%.1f%% of PCIe transactions):\n", p.TransactionsPct)
	fmt.Fprintf(&b, "  doorbells %d (batching)   WQE fetches %d (batching) + %d (BlueFlame)\n", p.DoorbellsSaved, p.WQEFetchBatching, p.WQEFetchBF)
	fmt.Fprintf(&b, "  payload reads %d (inline)   CQE writes %d (unsignaled)   ~%d B\n", p.PayloadReadsSaved, p.CQEWritesSaved, p.BytesSaved)
	sig := "never signaled"
	if r.c.Signaled > 0 {
		sig = fmt.Sprintf("1 in %.1f WRs signaled", analyzer.Ratio(r.c.WRs, r.c.Signaled))
	}
	fmt.Fprintf(&b, "signal pattern: %s, longest unsignaled run %d of depth %d\n", sig, q.LongestUnsignaledRun, q.MaxSendWR)
	fmt.Fprintf(&b, "WRs %d  posts %d  inline %d  CQEs polled %d  polls %d (empty %d)", r.c.WRs, r.c.PostCalls, r.c.Inline, r.c.CQEsPolled, r.c.Polls, r.c.EmptyPolls)
	u.detail.SetText(b.String())
}

// historySpan is how much trace time the history covers.
func historySpan(q analyzer.QP, step uint64) time.Duration {
	return time.Duration(uint64(len(q.History)) * step).Round(time.Second)
}

func (u *UI) renderAlerts() {
	var b strings.Builder
	for _, a := range u.alertLog {
		color := "orange"
		switch a.Severity {
		case "error":
			color = "red"
		case "prediction":
			color = "yellow"
		}
		at := ""
		if u.snap.FirstNS > 0 && a.LastNS >= u.snap.FirstNS {
			at = fmt.Sprintf("+%.1fs ", float64(a.LastNS-u.snap.FirstNS)/1e9)
		}
		count := ""
		if a.Count > 1 {
			count = fmt.Sprintf(" (x%d)", a.Count)
		}
		fmt.Fprintf(&b, "[%s]%sQP %#x %s%s: %s[-]\n  fix: %s\n", color, at, a.QPNum, strings.ToUpper(a.Severity), count,
			tview.Escape(a.Message), tview.Escape(a.Fix))
	}
	if b.Len() == 0 {
		b.WriteString("no alerts")
	}
	u.alerts.SetText(b.String())
}

func (u *UI) renderFooter() {
	t := "[::d]↑↓/jk select · Enter detail · o sort · p pause · r reset · s save · / filter · ? help · q quit[::-]"
	if u.filter != "" {
		t = fmt.Sprintf("filter %q · ", u.filter) + t
	}
	if u.message != "" {
		t = u.message + " · " + t
	}
	u.footer.SetText(t)
}

// handleKey is the global key handler. It changes view state directly (it
// runs on the UI goroutine) and never queues updates.
func (u *UI) handleKey(ev *tcell.EventKey) *tcell.EventKey {
	if name, _ := u.pages.GetFrontPage(); name == "help" {
		u.pages.HidePage("help")
		return nil
	}
	if u.filterF.HasFocus() {
		return ev
	}
	switch ev.Key() {
	case tcell.KeyEnter:
		u.toggleDetail()
		return nil
	case tcell.KeyLeft:
		if p, ok := u.src.(Player); ok {
			p.Seek(-10 * time.Second)
		}
		return nil
	case tcell.KeyRight:
		if p, ok := u.src.(Player); ok {
			p.Seek(10 * time.Second)
		}
		return nil
	case tcell.KeyRune:
	default:
		return ev
	}
	switch ev.Rune() {
	case 'q':
		u.app.Stop()
		return nil
	case 'j':
		return tcell.NewEventKey(tcell.KeyDown, 0, tcell.ModNone)
	case 'k':
		return tcell.NewEventKey(tcell.KeyUp, 0, tcell.ModNone)
	case 'p', ' ':
		u.mu.Lock()
		u.paused = !u.paused
		paused := u.paused
		u.mu.Unlock()
		if p, ok := u.src.(Player); ok {
			p.SetPaused(paused)
		}
		u.renderHeader()
		return nil
	case 'r':
		for _, r := range u.rows {
			u.base[r.key] = r.qp.Counters
		}
		u.alertsFrom = u.snap.LastNS + 1
		u.message = "counters reset"
		u.Apply(u.snap, u.now())
		return nil
	case 's':
		u.message = u.save()
		u.renderFooter()
		return nil
	case '/':
		u.filterF.SetText(u.filter)
		u.root.AddItem(u.filterF, 1, 0, true)
		u.app.SetFocus(u.filterF)
		return nil
	case '?':
		u.pages.ShowPage("help")
		return nil
	case 'o':
		u.sortCol = (u.sortCol + 1) % len(columns)
		u.render()
		return nil
	case 'O':
		u.sortDesc = !u.sortDesc
		u.render()
		return nil
	case '+':
		if p, ok := u.src.(Player); ok {
			p.Speed(2)
		}
		return nil
	case '-':
		if p, ok := u.src.(Player); ok {
			p.Speed(0.5)
		}
		return nil
	}
	return ev
}

func (u *UI) toggleDetail() {
	u.detailOnly = !u.detailOnly
	// Enter gives the detail pane most of the screen, and back
	if u.detailOnly {
		u.body.ResizeItem(u.table, 0, 1)
		u.body.ResizeItem(u.lower, 0, 3)
	} else {
		u.body.ResizeItem(u.table, 0, 1)
		u.body.ResizeItem(u.lower, 0, 1)
	}
	u.renderDetail()
}

// save writes the current snapshot as a text report and says where.
func (u *UI) save() string {
	name := fmt.Sprintf("%s/sqscope-snapshot-%s.txt", u.saveDir, u.now().Format("20060102-150405"))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Sprintf("[red]saving snapshot: %v[-]", err)
	}
	analyzer.WriteText(f, u.snap)
	if err := f.Close(); err != nil {
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

// Alerts returns the alerts, newest first.
func (u *UI) Alerts() []Alert { return append([]Alert(nil), u.alertLog...) }
