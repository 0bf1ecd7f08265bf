package main

import (
	"fmt"
	"strings"
	"time"
)

type report struct {
	start     time.Time
	elapsed   time.Duration
	machine   machine
	overhead  []ovRow
	budget    []budgetRow
	loss      []lossRow
	breakdown []bdRow
	costs     []costRow
	qpcHits   []qpcHitRow
	qpcTimes  []qpcTimeRow
	costEmpty float64
	other     []otherRow
	commands  []string
	notes     []string
	argv      []string
	// background is the share of the CPUs busy in the second before the
	// run (other load), pressure the CPU pressure during it, in percent.
	background, pressure float64
}

// otherRow is a figure measured by a go test benchmark.
type otherRow struct {
	What  string
	Value summary
	Unit  string
}

func fmtNS(s summary) string {
	return fmt.Sprintf("%.0f [%.0f–%.0f]", s.Med, s.Min, s.Max)
}

func fmtRatio(s summary) string {
	return fmt.Sprintf("%.3f [%.3f–%.3f]", s.Med, s.Min, s.Max)
}

// fmtRatioCI is a ratio's median and range, then its median's 95%
// interval, saying when the rounds ran out before it was within ±3%.
func fmtRatioCI(s summary, capped bool) string {
	more := ""
	if capped {
		more = ", -max-runs reached"
	}
	return fmtRatio(s) + "; 95% CI " + fmtCI(s) + more
}

// fmtPct is a summary of percentages, without the unit; signed, a
// change.
func fmtPct(s summary, signed bool) string {
	f := "%.2f"
	if signed {
		f = "%+.2f"
	}
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", s.Med, s.Min, s.Max)
}

// fmtNum prints a figure with a precision that suits its size.
func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func fmtSummary(s summary) string {
	if s.N <= 1 {
		return fmtNum(s.Med)
	}
	return fmt.Sprintf("%s [%s–%s]", fmtNum(s.Med), fmtNum(s.Min), fmtNum(s.Max))
}

// table is rows of cells printed as an aligned text table or markdown.
type table struct {
	head []string
	rows [][]string
}

func (t *table) text() string {
	w := make([]int, len(t.head))
	for i, h := range t.head {
		w[i] = len([]rune(h))
	}
	for _, r := range t.rows {
		for i, c := range r {
			w[i] = max(w[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c + strings.Repeat(" ", w[i]-len([]rune(c))))
		}
		b.WriteString("\n")
	}
	line(t.head)
	for _, r := range t.rows {
		line(r)
	}
	return b.String()
}

func (t *table) markdown() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.head, " | ") + " |\n|")
	for range t.head {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

func (r *report) overheadTable() *table {
	t := &table{head: []string{"post_list", "variant", "CPU ns/post call", "ratio to floor [min–max]; 95% CI of the median",
		"ratio to untraced [min–max]; 95% CI of the median", "CPU ns above floor", "wall ns/post call", "ns inside post", "lost", "all WRs seen"}}
	for _, o := range r.overhead {
		lost, exact, toUntraced := "", "", ""
		if o.Traced {
			lost = fmt.Sprint(o.Lost)
			exact = o.seen()
		}
		if o.Variant.name != untraced.name {
			toUntraced = fmtRatioCI(o.RatioU, false)
		}
		t.rows = append(t.rows, []string{fmt.Sprint(o.List), o.Variant.name, fmtNS(o.NS), fmtRatioCI(o.Ratio, o.Capped),
			toUntraced, fmtNS(o.Above), fmtNS(o.Wall), fmtNS(o.PostNS), lost, exact})
	}
	return t
}

// seen says whether a traced variant saw every WR; a sampling one sees
// those of its windows by design, and says what share that was.
func (o ovRow) seen() string {
	switch {
	case o.Sampled:
		share := 0.0
		if o.WRs > 0 {
			share = 100 * float64(o.Seen) / float64(o.WRs)
		}
		return fmt.Sprintf("sampled: %.1f%% in windows", share)
	case o.Exact:
		return "yes"
	}
	return "NO"
}

func (r *report) lossTable() *table {
	t := &table{head: []string{"case", "ring", "QPs", "threads", "post_list", "reader stopped", "WR/s", "post calls/s", "lost records (reported)", "WRs missing from the trace",
		"sqscope's CPU (a core)", "sqscope's CPU per event, ns"}}
	for _, l := range r.loss {
		t.rows = append(t.rows, l.cells())
	}
	return t
}

func (r *report) breakdownTable() *table {
	t := &table{head: append(append([]string{"post_list", "variant"}, dataPathProgs...), "sum", "sum above floor")}
	floor := map[int]float64{}
	for _, b := range r.breakdown {
		if b.Variant == "floor" {
			floor[b.List] = b.sum()
		}
	}
	for _, b := range r.breakdown {
		row := []string{fmt.Sprint(b.List), b.Variant}
		for _, p := range dataPathProgs {
			cell := fmt.Sprintf("%.0f", b.NS[p])
			if b.Runs[p] == 0 {
				cell = "-"
			}
			row = append(row, cell)
		}
		row = append(row, fmt.Sprintf("%.0f", b.sum()), fmt.Sprintf("%.0f", b.sum()-floor[b.List]))
		t.rows = append(t.rows, row)
	}
	return t
}

func (r *report) otherTable() *table {
	t := &table{head: []string{"figure", "median [min–max]", "unit"}}
	for _, o := range r.other {
		t.rows = append(t.rows, []string{o.What, fmtSummary(o.Value), o.Unit})
	}
	return t
}
