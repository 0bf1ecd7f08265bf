package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gdamore/tcell/v2"

	"github.com/sqscope/sqscope/analyzer"
)

// row is one QP as the table shows it, or a group's totals (label names
// the group).
type row struct {
	key       qpKey
	qp        *analyzer.QP       // in the snapshot shown
	c         *analyzer.Counters // after the reset baseline (the QP's own when none)
	label     string
	wrsPS     float64 // WRs posted per second
	dmaSaved  float64 // DMA reads saved per second
	cqeSaved  float64 // CQE writes saved per second
	status    string
	occupancy uint64
	// the last sample of the QP's figures, at trace time sampleNS, for
	// the rates (apply.go)
	sampleNS         uint64
	sWRs, sDMA, sCQE uint64
	since            *analyzer.Counters // the counters since the reset, when there was one
}

// column is one column of the QP table, defined once: rendering, sorting
// (o/O) and fitting a narrow terminal all read it. Its width is its widest
// text, measured as the table lays it out.
type column struct {
	name string
	// drop orders the columns a terminal too narrow for all of them leaves
	// out: the highest first (the rightmost of equals); 0 is always shown.
	drop int
	// less orders two rows by the column; nil orders them by pid and QP
	// number.
	less func(a, b *row) bool
	// cell is a row's text in the column and its colour.
	cell func(r *row) (string, tcell.Color)
}

const plain = tcell.ColorWhite

// notMeasured is the text of a figure the QP's trace does not measure
// (counters mode); the detail says why, once.
const (
	notMeasured     = "n/a"
	unmeasuredColor = tcell.ColorGray
)

var columns = []column{
	{name: "QP",
		cell: func(r *row) (string, tcell.Color) {
			if r.label != "" {
				return r.label, tcell.ColorAqua
			}
			return fmt.Sprintf("%#x", r.qp.QPNum), plain
		}},
	{name: "TYPE", drop: 1,
		cell: func(r *row) (string, tcell.Color) { return r.qp.Type, plain }},
	{name: "DEPTH", drop: 1,
		less: func(a, b *row) bool { return a.qp.MaxSendWR < b.qp.MaxSendWR },
		cell: func(r *row) (string, tcell.Color) {
			depth := fmt.Sprint(r.qp.MaxSendWR)
			if !r.qp.CapsKnown {
				depth += "?"
			}
			return depth, plain
		}},
	{name: "OCCUPANCY",
		less: func(a, b *row) bool { return a.occupancy < b.occupancy },
		cell: func(r *row) (string, tcell.Color) {
			if !r.qp.Measured("outstanding") {
				return notMeasured, unmeasuredColor
			}
			return fmt.Sprintf("%s %s%d", Bar(r.occupancy, uint64(r.qp.MaxSendWR)), bound(r), r.occupancy), statusColor(r.status)
		}},
	{name: "PEAK", drop: 4,
		less: func(a, b *row) bool { return a.qp.PeakOutstanding < b.qp.PeakOutstanding },
		cell: func(r *row) (string, tcell.Color) {
			if !r.qp.Measured("peak_outstanding") {
				return notMeasured, unmeasuredColor
			}
			return bound(r) + fmt.Sprint(r.qp.PeakOutstanding), plain
		}},
	{name: "INLINE%", drop: 3,
		less: func(a, b *row) bool {
			return analyzer.Ratio(a.c.Inline, a.c.WRs) < analyzer.Ratio(b.c.Inline, b.c.WRs)
		},
		cell: func(r *row) (string, tcell.Color) {
			return fmt.Sprintf("%.0f", analyzer.Percent(r.c.Inline, r.c.WRs)), plain
		}},
	{name: "SIG 1/N", drop: 3,
		cell: func(r *row) (string, tcell.Color) {
			switch {
			case r.c.Signaled > 0:
				return fmt.Sprintf("%.0f", analyzer.Ratio(r.c.WRs, r.c.Signaled)), plain
			case r.c.WRs > 0:
				return "never", plain
			}
			return "-", plain
		}},
	{name: "WR/DB", drop: 4,
		cell: func(r *row) (string, tcell.Color) {
			if r.c.Doorbells > 0 {
				return fmt.Sprintf("%.1f", analyzer.Ratio(r.c.WRs, r.c.Doorbells)), plain
			}
			return "-", plain
		}},
	{name: "WR/s", drop: 2,
		less: func(a, b *row) bool { return a.wrsPS < b.wrsPS },
		cell: func(r *row) (string, tcell.Color) { return humanRate(r.wrsPS), plain }},
	{name: "DMA SAVED/s", drop: 5,
		less: func(a, b *row) bool { return a.dmaSaved < b.dmaSaved },
		cell: func(r *row) (string, tcell.Color) {
			if !r.qp.Measured("wqe_fetches_saved_batching") || !r.qp.Measured("payload_reads_saved_inline") {
				return notMeasured, unmeasuredColor
			}
			return modeled(r, r.dmaSaved), plain
		}},
	{name: "CQE SAVED/s", drop: 5,
		less: func(a, b *row) bool { return a.cqeSaved < b.cqeSaved },
		cell: func(r *row) (string, tcell.Color) { return modeled(r, r.cqeSaved), plain }},
	{name: "STATUS",
		less: func(a, b *row) bool { return a.status < b.status },
		cell: func(r *row) (string, tcell.Color) { return r.status, statusColor(r.status) }},
}

// allColumns are the indices of every column, in order.
func allColumns() []int {
	out := make([]int, len(columns))
	for i := range out {
		out[i] = i
	}
	return out
}

// fitColumns returns the columns that fit in width cells, with one cell
// between columns, given the cells each needs: all when they fit, else
// without the ones to drop first.
func fitColumns(width int, widths []int) []int {
	shown := allColumns()
	need := -1
	for _, w := range widths {
		need += w + 1
	}
	for need > width {
		worst := -1
		for i, c := range shown {
			if columns[c].drop > 0 && (worst < 0 || columns[c].drop >= columns[shown[worst]].drop) {
				worst = i
			}
		}
		if worst < 0 {
			break
		}
		need -= widths[shown[worst]] + 1
		shown = slices.Delete(shown, worst, worst+1)
	}
	return shown
}

// status is OK, NEAR FULL or OVERFLOW, by the counters since the reset. A
// QP traced in counters mode has no occupancy and no ENOMEM cause: ENOMEM
// when a post failed so, else n/a.
func status(q *analyzer.QP, c *analyzer.Counters) string {
	if !q.Measured("outstanding") {
		if c.ENOMEM > 0 {
			return "ENOMEM"
		}
		return notMeasured
	}
	switch {
	case c.ENOMEMSQFull > 0:
		return "OVERFLOW"
	case q.NearFullSince(c):
		return "NEAR FULL"
	}
	return "OK"
}

func statusColor(status string) tcell.Color {
	switch status {
	case "OVERFLOW", "ENOMEM":
		return tcell.ColorRed
	case notMeasured:
		return unmeasuredColor
	case "NEAR FULL":
		return tcell.ColorOrange
	}
	return tcell.ColorGreen
}

// BarWidth is the number of cells of an occupancy bar.
const BarWidth = 16

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

func humanRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// modeled is a rate of the mlx5 model, "n/a" for a QP it does not apply to.
func modeled(r *row, rate float64) string {
	if r.qp.Model == "" {
		return "n/a"
	}
	return humanRate(rate)
}

// bound marks an occupancy that is a bound: a lower one while the QP's
// WRs posted before the attach are not known (analyzer.QP
// OutstandingLowerBound), an upper one once completions past the poll
// record bound may have retired WRs it counts (OutstandingUpperBound),
// neither with both.
func bound(r *row) string {
	switch lo, hi := r.qp.OutstandingLowerBound, r.qp.OutstandingUpperBound; {
	case lo && hi:
		return "~"
	case lo:
		return ">="
	case hi:
		return "<="
	}
	return ""
}
