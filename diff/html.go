package diff

import (
	"cmp"
	_ "embed"
	"fmt"
	"html"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sqscope/sqscope/report"
)

// The diff page's own script, after the helpers every sqscope page
// shares (report/page.go).
//
//go:embed html/diff.js
var pageJS string

// The most QPs whose cards are open when the page opens: those that
// changed (diagnoses, settings, ENOMEMs) first, then the busiest.
const (
	openChanged = 8
	openTop     = 4
)

// pageData is the JSON the page's script reads: the comparison as
// diff --json writes it, each QP's label, the cards open at first.
type pageData struct {
	Diff   *Report  `json:"diff"`
	Labels []string `json:"labels"`
	Plot   []int    `json:"plot"`
}

// WriteHTML writes the comparison as one self-contained HTML page: the
// two runs, the totals, every QP in a sortable, filterable table, and a
// card per QP drawing its figures before and after as bars; a figure not
// given is absent with its reason. Nothing is fetched.
func WriteHTML(w io.Writer, r *Report, before, after *Side) error {
	ew := &errWriter{w: w}
	d := &pageData{Diff: r, Labels: make([]string, len(r.QPs)), Plot: opened(r)}
	for i := range r.QPs {
		q := &r.QPs[i]
		d.Labels[i] = fmt.Sprintf("%s: %s -> %s", q.Match, who(q.Before), who(q.After))
	}
	report.PageStart(ew, fmt.Sprintf("sqscope diff: %s -> %s", filepath.Base(r.Before), filepath.Base(r.After)))
	writeRuns(ew, r, before, after)
	writeTotal(ew, r)
	fmt.Fprint(ew, `<section id="perqp"><h2>Per QP, before and after</h2>
<p class="note">Each figure of a QP as two bars on its own scale: <span class="key before">before</span> above, <span class="key after">after</span> below; the dashed mark is max_send_wr. A figure not given is written n/a with the reason.</p>
<p><label>Show another QP: <select id="pick"><option value="">(choose, or click a row of the table)</option></select></label></p>
<div id="cards"></div>
</section>
`)
	writeQPTable(ew, r)
	if err := report.PageEnd(ew, d, pageJS); err != nil {
		return err
	}
	return ew.err
}

func esc(s string) string { return html.EscapeString(s) }

// writeRuns writes the two recordings side by side: what was read of
// each, the run, the providers and models of its QPs.
func writeRuns(w io.Writer, r *Report, before, after *Side) {
	how := "process name and QP order"
	if r.Match == ByQPN {
		how = "QP number"
	}
	fmt.Fprintf(w, `<section id="runs"><h2>The runs</h2>
<p>QPs matched by %s.</p>
<table class="runs"><thead><tr><th></th><th>before</th><th>after</th></tr></thead><tbody>
`, esc(how))
	row := func(name string, f func(s *Side) string) {
		fmt.Fprintf(w, "<tr><th>%s</th><td>%s</td><td>%s</td></tr>\n", esc(name), esc(f(before)), esc(f(after)))
	}
	row("recording", func(s *Side) string { return s.Info.TextHeader() })
	row("run", func(s *Side) string { return report.RunLine(&s.Snap) })
	row("providers", providers)
	row("settings inferred", func(s *Side) string {
		if s.noSettings != "" {
			return "none: " + s.noSettings
		}
		return fmt.Sprintf("for %d of %d QPs", len(s.settings), len(s.Snap.QPs))
	})
	row("receives", func(s *Side) string {
		if s.Snap.ReceivesNotTraced != "" {
			return "not traced: " + s.Snap.ReceivesNotTraced
		}
		return "traced"
	})
	fmt.Fprint(w, "</tbody></table>\n</section>\n")
}

// providers names each provider and model of a recording's QPs, with
// how many QPs each.
func providers(s *Side) string {
	var names []string
	n := map[string]int{}
	for i := range s.Snap.QPs {
		p := report.ProviderModel(&s.Snap.QPs[i])
		if n[p] == 0 {
			names = append(names, p)
		}
		n[p]++
	}
	if len(names) == 0 {
		return "no QP"
	}
	for i, p := range names {
		names[i] = fmt.Sprintf("%s: %d QP(s)", p, n[p])
	}
	return strings.Join(names, "; ")
}

// figureRow is one figure of a side, as text: "n/a (why)" when absent.
type figureRow struct {
	name string
	text func(f *Figures) string
	v    func(f *Figures) *float64 // the value the change is of; nil: no change shown
}

func u(v uint64) *float64 { f := float64(v); return &f }

func fixed(format string, v func(f *Figures) *float64, key string) func(f *Figures) string {
	return func(f *Figures) string {
		if x := v(f); x != nil {
			return fmt.Sprintf(format, *x)
		}
		return "n/a (" + f.Absent[key] + ")"
	}
}

var figureRows = []figureRow{
	{"WRs", func(f *Figures) string { return fmt.Sprint(f.WRs) }, func(f *Figures) *float64 { return u(f.WRs) }},
	{"WRs per doorbell", fixed("%.2f", func(f *Figures) *float64 { return f.WRsPerDoorbell }, "wrs_per_doorbell"), func(f *Figures) *float64 { return f.WRsPerDoorbell }},
	{"inline", fixed("%.1f%%", func(f *Figures) *float64 { return f.InlinePct }, "inline_pct"), func(f *Figures) *float64 { return f.InlinePct }},
	{"signaled", fixed("%.1f%%", func(f *Figures) *float64 { return f.SignaledPct }, "signaled_pct"), func(f *Figures) *float64 { return f.SignaledPct }},
	{"PCIe bytes per WR", fixed("%.1f", func(f *Figures) *float64 { return f.PCIeBytesPerWR }, "pcie_bytes_per_wr"), func(f *Figures) *float64 { return f.PCIeBytesPerWR }},
	{"peak outstanding", peakText, func(f *Figures) *float64 {
		if f.Peak == nil {
			return nil
		}
		return u(*f.Peak)
	}},
	{"ENOMEM", func(f *Figures) string { return fmt.Sprint(f.ENOMEM) }, func(f *Figures) *float64 { return u(f.ENOMEM) }},
}

func peakText(f *Figures) string {
	switch {
	case f.Peak == nil:
		return "n/a (" + f.Absent["peak_outstanding"] + ")"
	case f.Depth == nil:
		return fmt.Sprintf("%d of max_send_wr n/a (%s)", *f.Peak, f.Absent["depth"])
	}
	return fmt.Sprintf("%d of %d", *f.Peak, *f.Depth)
}

// writeTotal writes the totals, before, after and the change, and where
// the page's script draws them as bars.
func writeTotal(w io.Writer, r *Report) {
	fmt.Fprint(w, `<section id="total"><h2>In total</h2>
<table class="runs"><thead><tr><th></th><th>before</th><th>after</th><th>change</th></tr></thead><tbody>
`)
	b, a := &r.Total.Before, &r.Total.After
	for _, fr := range figureRows {
		change := ""
		switch bv, av := fr.v(b), fr.v(a); {
		case bv == nil || av == nil:
		case *av == *bv:
			change = "none"
		default:
			change = fmt.Sprintf("%+.4g", *av-*bv)
		}
		fmt.Fprintf(w, "<tr><th>%s</th><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(fr.name), esc(fr.text(b)), esc(fr.text(a)), esc(change))
	}
	fmt.Fprint(w, "</tbody></table>\n")
	fmt.Fprintf(w, "<p>Diagnoses that appeared: %s. Diagnoses that went: %s.</p>\n", esc(kinds(r.Total.Appeared)), esc(kinds(r.Total.Went)))
	fmt.Fprint(w, "<p class=\"note\">The peak is that of the QP fullest against its depth.</p>\n<div id=\"total-bars\"></div>\n</section>\n")
}

func kinds(k []string) string {
	if len(k) == 0 {
		return "none"
	}
	return strings.Join(k, ", ")
}

// tableCol is one column of the QP table: the cell of a matched pair.
type tableCol struct {
	head string
	cell func(q *QP) report.Cell
}

// sideCol is a figure's column of one side: absent with why when that
// side has no such QP or does not give the figure.
func sideCol(head string, after bool, cell func(f *Figures) report.Cell) tableCol {
	return tableCol{head, func(q *QP) report.Cell {
		s, name := q.Before, "before"
		if after {
			s, name = q.After, "after"
		}
		if s == nil {
			return report.Absent("no such QP in the " + name + " recording")
		}
		return cell(&s.Figures)
	}}
}

func listCell(k []string) report.Cell { return report.Cell{Text: strings.Join(k, ", ")} }

var qpCols = func() []tableCol {
	cols := []tableCol{
		{"match", func(q *QP) report.Cell { return report.Cell{Text: q.Match} }},
		{"before", func(q *QP) report.Cell { return report.Cell{Text: who(q.Before)} }},
		{"after", func(q *QP) report.Cell { return report.Cell{Text: who(q.After)} }},
	}
	for _, f := range []struct {
		head string
		cell func(f *Figures) report.Cell
	}{
		{"WRs", func(f *Figures) report.Cell { return report.UintCell(f.WRs) }},
		{"WRs/doorbell", func(f *Figures) report.Cell {
			return report.NumCell(f.WRsPerDoorbell, "%.2f", f.Absent["wrs_per_doorbell"])
		}},
		{"inline %", func(f *Figures) report.Cell { return report.NumCell(f.InlinePct, "%.1f", f.Absent["inline_pct"]) }},
		{"signaled %", func(f *Figures) report.Cell { return report.NumCell(f.SignaledPct, "%.1f", f.Absent["signaled_pct"]) }},
		{"PCIe B/WR", func(f *Figures) report.Cell {
			return report.NumCell(f.PCIeBytesPerWR, "%.1f", f.Absent["pcie_bytes_per_wr"])
		}},
		{"peak", func(f *Figures) report.Cell {
			if f.Peak == nil {
				return report.Absent(f.Absent["peak_outstanding"])
			}
			c := report.UintCell(*f.Peak)
			if f.Depth == nil {
				c.Text += " of n/a"
				c.Title = f.Absent["depth"]
			} else {
				c.Text += fmt.Sprintf(" of %d", *f.Depth)
			}
			return c
		}},
		{"ENOMEM", func(f *Figures) report.Cell { return report.UintCell(f.ENOMEM) }},
	} {
		cols = append(cols, sideCol(f.head+" before", false, f.cell), sideCol(f.head+" after", true, f.cell))
	}
	return append(cols,
		tableCol{"diagnoses appeared", func(q *QP) report.Cell { return listCell(q.Appeared) }},
		tableCol{"diagnoses went", func(q *QP) report.Cell { return listCell(q.Went) }},
		tableCol{"settings changed", func(q *QP) report.Cell {
			ch := make([]string, len(q.Changed))
			for i, c := range q.Changed {
				ch[i] = fmt.Sprintf("%s: %s -> %s", c.Setting, c.Before, c.After)
			}
			return listCell(ch)
		}})
}()

// writeQPTable writes every matched pair as a row of the table.
func writeQPTable(w io.Writer, r *Report) {
	fmt.Fprint(w, "<section id=\"qps\"><h2>Send queues</h2>\n<p class=\"note\">n/a: a figure not given; the cell's tooltip and the QP's card say why.</p>\n")
	heads := make([]string, len(qpCols))
	for i, c := range qpCols {
		heads[i] = c.head
	}
	report.WriteTable(w, heads, len(r.QPs), func(i int) (string, []report.Cell) {
		q := &r.QPs[i]
		cells := make([]report.Cell, len(qpCols))
		for j, c := range qpCols {
			cells[j] = c.cell(q)
		}
		switch {
		case len(q.Appeared) > 0:
			return "diagnosed", cells
		case changed(q):
			return "changed", cells
		}
		return "", cells
	})
	if len(r.QPs) == 0 {
		fmt.Fprint(w, "<p>No QP in either recording.</p>\n")
	}
	fmt.Fprint(w, "</section>\n")
}

// changed says a pair differs in more than its counts: a diagnosis came
// or went, a setting or the ENOMEMs changed, or one side has no QP.
func changed(q *QP) bool {
	return len(q.Appeared)+len(q.Went)+len(q.Changed) > 0 || q.Before == nil || q.After == nil || q.Before.ENOMEM != q.After.ENOMEM
}

// opened picks the QPs whose cards are open when the page opens.
func opened(r *Report) []int {
	out := []int{}
	for i := range r.QPs {
		if changed(&r.QPs[i]) && len(out) < openChanged {
			out = append(out, i)
		}
	}
	wrs := func(i int) uint64 {
		var n uint64
		for _, s := range []*QPSide{r.QPs[i].Before, r.QPs[i].After} {
			if s != nil {
				n += s.WRs
			}
		}
		return n
	}
	busy := make([]int, 0, len(r.QPs))
	for i := range r.QPs {
		if wrs(i) > 0 && !slices.Contains(out, i) {
			busy = append(busy, i)
		}
	}
	slices.SortStableFunc(busy, func(a, b int) int { return cmp.Compare(wrs(b), wrs(a)) })
	return append(out, busy[:min(openTop, len(busy))]...)
}
