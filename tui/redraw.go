package tui

import (
	"slices"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
)

// A refresh draws the screen only when it changed what the screen shows:
// drawing every widget and comparing every cell costs more than the rest
// of a refresh, and most refreshes of an idle or finished trace change
// nothing. Keys and resizes are drawn by tview itself, always.

// setText sets a text view's text when it differs: SetText makes tview
// lay the text out again on the next draw.
func (u *UI) setText(tv *tview.TextView, s string) {
	if tv.GetText(false) != s {
		tv.SetText(s)
		u.dirty = true
	}
}

// setTitle sets a pane's title when it differs.
func (u *UI) setTitle(tv *tview.TextView, s string) {
	if tv.GetTitle() != s {
		tv.SetTitle(s)
		u.dirty = true
	}
}

// tableChanged reports whether the table's lines on screen differ from
// those last drawn: the selection, the number of lines, the window, the
// columns shown or a text in the window. It makes the texts of the lines
// on screen, which the draw then reuses.
func (u *UI) tableChanged() bool {
	_, _, w, h := u.table.GetInnerRect()
	off, _ := u.table.GetOffset()
	sel, _ := u.table.GetSelection()
	u.textsChanged = false
	widths := u.windowWidths(off, h)
	changed := u.textsChanged || sel != u.drawn.sel || len(u.lines) != u.drawn.lines ||
		off != u.drawn.off || w != u.drawn.w || h != u.drawn.h || !slices.Equal(fitColumns(w, widths), u.shown)
	u.drawn.sel, u.drawn.lines, u.drawn.off, u.drawn.w, u.drawn.h = sel, len(u.lines), off, w, h
	return changed
}

// tableWindow is the table as last compared by tableChanged.
type tableWindow struct {
	sel, lines, off, w, h int
}

// stack is the pages (the view, the help over it) drawn without clearing
// the screen first, as tview.Pages does: the view covers all of it, each
// pane clears its own, and tview has cleared the screen before the draw.
type stack struct {
	*tview.Pages
	// resized is told the screen's width when it changes, before the
	// pages are drawn at it
	resized func(width int)
	width   int
}

func (s *stack) Draw(screen tcell.Screen) {
	x, y, w, h := s.GetRect()
	if w != s.width && s.resized != nil {
		s.width = w
		s.resized(w)
	}
	names := s.GetPageNames(true) // front to back
	for i := len(names) - 1; i >= 0; i-- {
		p := s.GetPage(names[i])
		p.SetRect(x, y, w, h)
		p.Draw(screen)
	}
}
