package tui

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gdamore/tcell/v2"
	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer"
)

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

// Columns of the QP table; sortable by index.
var columns = []string{"QP", "TYPE", "DEPTH", "OCCUPANCY", "PEAK", "INLINE%", "SIG 1/N", "WR/DB", "Mops", "DMA SAVED/s", "CQE SAVED/s", "STATUS"}

// BarWidth is the number of cells of an occupancy bar.
const BarWidth = 16

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
