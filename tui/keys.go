package tui

import (
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
)

func helpModal() tview.Primitive {
	// it fits a screen of 80×24 whole
	lines := []string{
		"↑↓ j/k  select a QP              Enter   detail of the QP (again: back)",
		"o / O   sort by next column/back p       pause / resume",
		"r       reset counters and rates s       save a snapshot report",
		"/       filter QPs (number, pid) g       group: process, CQ, none",
		"← / →   replay: seek 10 s        + / -   replay: faster / slower",
		"a       QP of the newest alert   q ^C    quit        ? this help",
		"",
		"QP          its number in hex (the detail and alerts add decimal, the",
		"            base of Prometheus's qpn label and rdma res show)",
		"OCCUPANCY   WRs outstanding now, bar of the depth",
		"PEAK        most WRs ever outstanding",
		"INLINE%     WRs posted with IBV_SEND_INLINE",
		"SIG 1/N     one WR in N signaled (never: none)",
		"WR/DB       WRs per doorbell (post call)",
		"WR/s        WRs posted per second (k, M)",
		"SAVED/s     DMA reads and CQE writes saved per second",
		"STATUS      OK, NEAR FULL (75% of depth), OVERFLOW",
		"alerts      first seen, how often, last seen (+s of trace)",
		"",
		"past 256 QPs the lines on screen are fresh at every refresh;",
		"the order, filter, group totals and new QPs once a second",
	}
	t := tview.NewTextView().SetText(strings.Join(lines, "\n"))
	t.SetBorder(true).SetTitle(" sqscope live view: keys and columns (any key closes) ")
	return tview.NewFlex().
		AddItem(nil, 0, 1, false).
		AddItem(tview.NewFlex().SetDirection(tview.FlexRow).
			AddItem(nil, 0, 1, false).AddItem(t, len(lines)+2, 0, true).AddItem(nil, 0, 1, false), 76, 0, true).
		AddItem(nil, 0, 1, false)
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
		u.reset()
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
	case 'a':
		u.jumpToAlert()
		return nil
	case 'o':
		u.sortCol = (u.sortCol + 1) % len(columns)
		u.render()
		return nil
	case 'O':
		u.sortDesc = !u.sortDesc
		u.render()
		return nil
	case 'g':
		u.grouping = (u.grouping + 1) % groupings
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
