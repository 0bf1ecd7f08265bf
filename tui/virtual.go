package tui

import (
	"slices"
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"
	"github.com/rivo/uniseg"
)

// tableContent is the QP table as tview reads it: the header, then
// UI.lines. Its cells are made only for the lines drawn, when drawn, so a
// refresh of thousands of QPs formats the few dozen on screen.
type tableContent struct {
	tview.TableContentReadOnly
	u *UI
}

func (t *tableContent) GetRowCount() int    { return len(t.u.lines) + 1 }
func (t *tableContent) GetColumnCount() int { return len(t.u.shown) }

func (t *tableContent) GetCell(r, c int) *tview.TableCell {
	u := t.u
	if r < 0 || r > len(u.lines) || c < 0 || c >= len(u.shown) {
		return nil
	}
	col := u.shown[c]
	texts := u.lineTexts(r)
	for len(u.cells) <= r {
		u.cells = append(u.cells, nil)
	}
	if u.cells[r] == nil {
		u.cells[r] = make([]*tview.TableCell, len(columns))
	}
	cell := u.cells[r][col]
	if cell == nil {
		cell = tview.NewTableCell("")
		u.cells[r][col] = cell
	}
	tx := &texts[col]
	cell.SetText(tx.s).SetTextColor(tx.fg)
	header := r == 0 || u.lines[r-1].row < 0
	cell.SetSelectable(!header)
	attr := tcell.AttrNone
	if r > 0 && header {
		attr = tcell.AttrBold
	}
	cell.SetAttributes(attr)
	return cell
}

// lineTexts are the texts of every column of table line r (0: the
// header), made once per refresh.
func (u *UI) lineTexts(r int) []text {
	for len(u.texts) <= r {
		u.texts = append(u.texts, nil)
		u.textGen = append(u.textGen, 0)
	}
	if u.texts[r] != nil && u.textGen[r] == u.gen {
		return u.texts[r]
	}
	if u.texts[r] == nil {
		u.texts[r] = make([]text, len(columns))
		u.textsChanged = true
	}
	u.textGen[r] = u.gen
	if r == 0 {
		for c, col := range columns {
			name := col.name
			if c == u.sortCol {
				name += map[bool]string{false: "▲", true: "▼"}[u.sortDesc]
			}
			u.textsChanged = setText(u.texts[r], c, name, tcell.ColorYellow) || u.textsChanged
		}
		return u.texts[r]
	}
	rw := u.lineRow(r - 1)
	for c, col := range columns {
		s, fg := col.cell(rw)
		u.textsChanged = setText(u.texts[r], c, s, fg) || u.textsChanged
	}
	return u.texts[r]
}

// lineRow is the row a line draws: a QP's, or its group's totals.
func (u *UI) lineRow(i int) *row {
	if e := u.lines[i]; e.row >= 0 {
		return &u.rows[e.row]
	} else {
		return &u.groups[e.group].total
	}
}

// text is a cell's text, its colour and the cells it takes.
type text struct {
	s     string
	fg    tcell.Color
	width int
}

// setText sets a text, measuring its width again only when it changed,
// and reports whether the text or its colour changed.
func setText(texts []text, c int, s string, fg tcell.Color) bool {
	t := &texts[c]
	changed := t.s != s || t.fg != fg
	if t.s != s || t.width == 0 {
		t.s, t.width = s, uniseg.StringWidth(s)
	}
	t.fg = fg
	return changed
}

// windowWidths are the cells each column needs for the header and the
// lines on screen: height-1 lines below the header from the table's
// offset.
func (u *UI) windowWidths(offset, height int) []int {
	u.widths = u.widths[:0]
	for _, t := range u.lineTexts(0) {
		u.widths = append(u.widths, t.width)
	}
	for r := offset + 1; r <= min(len(u.lines), offset+height-1); r++ {
		for c, t := range u.lineTexts(r) {
			u.widths[c] = max(u.widths[c], t.width)
		}
	}
	return u.widths
}

// qpTable is the QP table. tview.Table keeps its selection and moves it
// on keys; the table draws itself: the header and the lines on screen,
// each cell once, its columns fitted to its width as those lines need
// them (tview.Table's own draw measures every cell's graphemes again on
// every frame, which at 10 Hz costs more than the rest of a refresh).
type qpTable struct {
	*tview.Table
	u *UI
}

func (t *qpTable) Draw(screen tcell.Screen) {
	t.Box.DrawForSubclass(screen, t)
	x, y, w, h := t.GetInnerRect()
	if w <= 0 || h <= 0 {
		return
	}
	u := t.u
	off := t.offset(h)
	widths := u.windowWidths(off, h)
	if shown := fitColumns(w, widths); !slices.Equal(shown, u.shown) {
		u.shown = shown
	}
	sel, _ := t.GetSelection()
	u.mu.Lock()
	u.onScreen = u.onScreen[:0]
	for r := off + 1; r <= min(len(u.lines), off+h-1); r++ {
		if e := u.lines[r-1]; e.row >= 0 {
			u.onScreen = append(u.onScreen, u.rows[e.row].key)
		}
	}
	u.mu.Unlock()
	for i := 0; i < h; i++ {
		r := i // the header, then the lines from the offset
		if i > 0 {
			r = off + i
		}
		if r > len(u.lines) {
			break
		}
		texts := u.lineTexts(r)
		cx := x
		for k, c := range u.shown {
			tx := &texts[c]
			style := tcell.StyleDefault.Foreground(tx.fg)
			if r > 0 && u.lines[r-1].row < 0 {
				style = style.Bold(true) // a group's line
			}
			if r == sel && r > 0 {
				style = tcell.StyleDefault.Foreground(tview.Styles.PrimitiveBackgroundColor).Background(tx.fg)
			}
			if k > 0 { // the separator
				screen.SetContent(cx, y+i, ' ', nil, style)
				if cx++; cx >= x+w {
					break
				}
			}
			printCell(screen, cx, y+i, min(widths[c], x+w-cx), tx.s, style)
			cx += widths[c]
			if cx >= x+w {
				break
			}
		}
	}
}

// offset is the first line shown below the header in a table h cells
// high, moved so that the selection is on screen (as tview.Table does),
// and set as the table's offset.
func (t *qpTable) offset(h int) int {
	off, _ := t.GetOffset()
	sel, _ := t.GetSelection()
	body := max(h-1, 1)
	if sel >= 1 {
		off = min(off, sel-1)
		off = max(off, sel-body)
	}
	off = max(min(off, len(t.u.lines)-body), 0)
	t.SetOffset(off, 0)
	return off
}

// printCell writes s from column x of line y in at most w cells, padded
// with blanks to w.
func printCell(screen tcell.Screen, x, y, w int, s string, style tcell.Style) {
	end := x + w
	for s != "" && x < end {
		if s[0] < utf8.RuneSelf {
			screen.Put(x, y, s[:1], style)
			s, x = s[1:], x+1
			continue
		}
		g, rest, cw, _ := uniseg.FirstGraphemeClusterInString(s, -1)
		if cw == 0 || x+cw > end {
			break
		}
		screen.Put(x, y, g, style)
		s, x = rest, x+cw
	}
	for ; x < end; x++ {
		screen.Put(x, y, " ", style)
	}
}

// renderTable starts a refresh of the table's texts and selects the
// selected QP (the first line when none is).
func (u *UI) renderTable() {
	u.gen++
	sel := -1
	for i, e := range u.lines {
		if e.row >= 0 {
			if sel < 0 && !u.hasSel {
				sel = i
			}
			if u.hasSel && u.rows[e.row].key == u.selected {
				sel = i
				break
			}
		}
	}
	if sel < 0 {
		for i, e := range u.lines { // the selected QP is filtered out
			if e.row >= 0 {
				sel = i
				break
			}
		}
	}
	if sel < 0 {
		u.dirty = u.tableChanged() || u.dirty
		return
	}
	if !u.hasSel {
		u.mu.Lock()
		u.selected, u.hasSel = u.rows[u.lines[sel].row].key, true
		u.mu.Unlock()
	}
	u.table.Select(sel+1, 0)
	u.dirty = u.tableChanged() || u.dirty
}
