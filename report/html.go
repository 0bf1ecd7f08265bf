package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sqscope/sqscope/analyzer"
)

// The report page's own script, after the helpers every page shares
// (page.go).
//
//go:embed html/page.js
var pageJS string

// Page is what the HTML report shows: the run, every QP in a table, plots
// of the QPs worth a look, and the diagnoses.
type Page struct {
	Title  string            // the recording's name
	Header string            // what was read of it (one line)
	Snap   analyzer.Snapshot // the report's snapshot
	Series *Series           // occupancy over the run; nil: none built
	Advice *Advice           // what sqscope advise says; nil: no section
}

// The most QPs plotted when the page opens: every QP with a diagnosis
// first, then the busiest and the fullest; the page plots any other on
// request.
const (
	plotDiagnosed = 8
	plotTop       = 4
)

// pageData is the JSON the page's script reads.
type pageData struct {
	FirstNS   uint64     `json:"first_ns"`
	SpanS     float64    `json:"span_s"`
	StepS     float64    `json:"step_s"` // a bucket of the series; 0: no series
	QPs       []pageQP   `json:"qps"`
	Diagnoses []pageDiag `json:"diagnoses"`
	Plot      []int      `json:"plot"` // QPs plotted when the page opens, by index
	// Notes are the provider notes of the QPs, each once (a QP names
	// its own by index): thousands of QPs of one provider share most.
	Notes []string `json:"notes"`
}

// pageQP is one QP for the plots: nil pointers are figures its mode or
// provider model does not give (Reason or Notes say why).
type pageQP struct {
	Label          string             `json:"label"`
	Depth          *uint64            `json:"depth"`
	WRs            uint64             `json:"wrs"`
	WRsPerS        float64            `json:"wrs_per_s"`
	DoorbellsPerS  *float64           `json:"doorbells_per_s"`
	WRsPerDoorbell *float64           `json:"wrs_per_doorbell"`
	InlinePct      *float64           `json:"inline_pct"`
	SignaledPct    *float64           `json:"signaled_pct"`
	Peak           *uint64            `json:"peak"`
	PeakBound      bool               `json:"peak_lower_bound,omitempty"`
	PeakUpper      bool               `json:"peak_upper_bound,omitempty"` // completions past the poll record bound
	ENOMEM         uint64             `json:"enomem"`
	PCIe           map[string]float64 `json:"pcie"` // the savings by cause; nil: no PCIe model (Notes say why)
	Notes          []int              `json:"notes,omitempty"`
	// Occ is the occupancy series, in buckets of StepS from T0 (seconds
	// into the trace): the fewest and the most WRs outstanding in each
	// bucket and the WRs posted in it; NoOcc says why there is none.
	Occ   *pageSeries `json:"occ,omitempty"`
	NoOcc string      `json:"no_occ,omitempty"`
	Fails [][2]uint64 `json:"fails,omitempty"` // (bucket, failed post calls)
	Diags []int       `json:"diags,omitempty"` // its diagnoses, by index
}

// pageSeries holds each series as runs (runs): a QP idle or steady for
// most of the run costs a few bytes.
type pageSeries struct {
	T0  float64 `json:"t0"`
	N   int     `json:"n"` // buckets
	Min string  `json:"min"`
	Max string  `json:"max"`
	WRs string  `json:"wrs"`
}

// runs writes v as comma-separated values, a run of n > 2 equal values
// as "value*n"; the page's script reads it back.
func runs(v []uint32) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		j := i + 1
		for j < len(v) && v[j] == v[i] {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		switch n := j - i; {
		case n > 2:
			fmt.Fprintf(&b, "%d*%d", v[i], n)
		case n == 2:
			fmt.Fprintf(&b, "%d,%d", v[i], v[i])
		default:
			fmt.Fprint(&b, v[i])
		}
		i = j
	}
	return b.String()
}

// pcieKeys are the PCIe savings the page shows: by cause, and the bytes.
var pcieKeys = []string{"doorbells_saved", "wqe_fetches_saved_batching", "wqe_fetches_saved_blueflame",
	"payload_reads_saved_inline", "cqe_writes_saved_unsignaled", "bytes_saved", "bytes_saved_pct"}

// pcieOf is the savings of q the page shows, by the QP's JSON (which
// leaves out what its mode or model does not give); nil when none.
func pcieOf(q *analyzer.QP) map[string]float64 {
	b, err := json.Marshal(q.PCIe)
	if err != nil {
		return nil
	}
	var all map[string]json.RawMessage
	if json.Unmarshal(b, &all) != nil || all == nil {
		return nil
	}
	out := map[string]float64{}
	for _, k := range pcieKeys {
		var v float64
		if raw, ok := all[k]; ok && json.Unmarshal(raw, &v) == nil {
			out[k] = v
		}
	}
	return out
}

type pageDiag struct {
	QP int `json:"qp"` // index of its QP, -1 when it is of no QP of the table
	analyzer.Diagnosis
}

// WriteHTML writes the report as one self-contained HTML page: data as
// JSON, the script and style inline, nothing fetched. The page is also
// well-formed XML, so that a test can parse it whole.
func WriteHTML(w io.Writer, p Page) error {
	ew := &errWriter{w: w}
	s := &p.Snap
	data := buildPage(&p)
	var run bytes.Buffer
	writeTrace(&run, s, true)
	PageStart(ew, "sqscope report: "+p.Title)
	fmt.Fprintf(ew, `<section id="run"><h2>The run</h2>
<p class="header">%s</p>
<p>%s</p>
<pre class="trace">%s</pre>
`, esc(p.Header), esc(RunLine(s)), esc(run.String()))
	if s.ReceivesNotTraced != "" {
		fmt.Fprintf(ew, "<p class=\"note\">Receives not traced: %s</p>\n", esc(s.ReceivesNotTraced))
	}
	fmt.Fprint(ew, "</section>\n")
	writeDiagSection(ew, s, data)
	writeAdvice(ew, p.Advice, s, data)
	fmt.Fprintf(ew, `<section id="plots"><h2>Send queues over time</h2>
<p class="note">%s</p>
<p><label>Plot another QP: <select id="pick"><option value="">(choose, or click a row of the table)</option></select></label></p>
<div id="cards"></div>
</section>
`, esc(seriesNote(&p)))
	writeTable(ew, s, data)
	if err := PageEnd(ew, data, pageJS); err != nil {
		return err
	}
	return ew.err
}

// RunLine is the run in one line: span, events and losses, QPs.
func RunLine(s *analyzer.Snapshot) string {
	lost := "no events lost"
	if s.Lost > 0 {
		lost = fmt.Sprintf("%d events LOST: counts are lower bounds", s.Lost)
	}
	return fmt.Sprintf("%d events over %.6f s, %s, %d QP(s), %d diagnosis(es)",
		s.Events, float64(s.LastNS-min(s.FirstNS, s.LastNS))/1e9, lost, len(s.QPs), len(s.Diagnoses))
}

// seriesNote says what a plotted point is.
func seriesNote(p *Page) string {
	if p.Series == nil {
		return "No occupancy series was built for this report."
	}
	return fmt.Sprintf("Each point is a bucket of %s: the shaded band spans the fewest to the most WRs outstanding at any moment in it (downsampled with min/max per bucket, so no peak is lost); the dashed line is max_send_wr; red ticks under the axis are buckets with failed posts, orange ones where a diagnosis was first and last made.%s",
		durText(p.Series.StepNS), p.Series.Note)
}

func durText(ns uint64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.3f s", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3f ms", float64(ns)/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.3f µs", float64(ns)/1e3)
	}
	return fmt.Sprintf("%d ns", ns)
}

func qpLabel(q *analyzer.QP) string {
	who := fmt.Sprint(q.PID)
	if q.Comm != "" {
		who += " " + q.Comm
	}
	l := fmt.Sprintf("QP %#x (pid %s", q.QPNum, who)
	if q.Gen != 0 {
		l += fmt.Sprintf(", generation %d", q.Gen)
	}
	return l + ")"
}

func ratio(a, b uint64) *float64 {
	if b == 0 {
		return nil
	}
	v := float64(a) / float64(b)
	return &v
}

func share(a, b uint64) *float64 {
	v := ratio(a, b)
	if v != nil {
		*v *= 100
	}
	return v
}

func buildPage(p *Page) *pageData {
	s := &p.Snap
	d := &pageData{FirstNS: s.FirstNS, SpanS: float64(s.LastNS-min(s.FirstNS, s.LastNS)) / 1e9, Diagnoses: []pageDiag{}, Notes: []string{}}
	if p.Series != nil {
		d.StepS = float64(p.Series.StepNS) / 1e9
	}
	idx := map[failKey][]int{}
	notes := map[string]int{}
	d.QPs = make([]pageQP, len(s.QPs))
	for i := range s.QPs {
		q := &s.QPs[i]
		d.QPs[i] = buildQP(p, q)
		var ns []string
		if q.CountersOnly {
			ns = append(ns, q.CountersNote())
		}
		for _, n := range append(ns, q.ProviderNotes()...) {
			j, ok := notes[n]
			if !ok {
				j = len(d.Notes)
				notes[n] = j
				d.Notes = append(d.Notes, n)
			}
			d.QPs[i].Notes = append(d.QPs[i].Notes, j)
		}
		k := failKey{q.PID, q.QPNum}
		idx[k] = append(idx[k], i)
	}
	for i := range s.Diagnoses {
		g := &s.Diagnoses[i]
		qi := -1
		for _, j := range idx[failKey{g.PID, g.QPNum}] {
			q := &s.QPs[j]
			qi = j // the latest lifetime of the number, unless one holds the time
			if d.QPs[j].Occ != nil && g.FirstNS >= q.HistoryStartNS {
				break
			}
		}
		if qi >= 0 {
			d.QPs[qi].Diags = append(d.QPs[qi].Diags, i)
		}
		d.Diagnoses = append(d.Diagnoses, pageDiag{QP: qi, Diagnosis: *g})
	}
	d.Plot = plotted(s, d)
	return d
}

func buildQP(p *Page, q *analyzer.QP) pageQP {
	pq := pageQP{Label: qpLabel(q), WRs: q.WRs, WRsPerS: q.Rates.WRsPerSec, ENOMEM: q.ENOMEM, PCIe: pcieOf(q)}
	if q.Occupancy.Depth > 0 {
		v := q.Occupancy.Depth
		pq.Depth = &v
	}
	if q.Reported("doorbells") {
		pq.WRsPerDoorbell = ratio(q.WRs, q.Doorbells)
		if q.Rates.SpanNS > 0 {
			v := float64(q.Doorbells) * 1e9 / float64(q.Rates.SpanNS)
			pq.DoorbellsPerS = &v
		}
	}
	pq.InlinePct, pq.SignaledPct = share(q.Inline, q.WRs), share(q.Signaled, q.WRs)
	if q.Reported("peak_outstanding") && !q.CompletionsNotTraced {
		v := q.PeakOutstanding
		pq.Peak, pq.PeakBound, pq.PeakUpper = &v, q.OutstandingLowerBound, q.OutstandingUpperBound
	}
	h, start := p.Series.of(q)
	switch {
	case q.CountersOnly:
		pq.NoOcc = "counters mode: occupancy needs --mode events"
	case q.CompletionsNotTraced:
		pq.NoOcc = "no poll function is traced, so no completion is seen: outstanding WRs unknown"
	case len(h) == 0:
		pq.NoOcc = "no post or completion of this QP in the trace"
	default:
		o := &pageSeries{T0: float64(start-min(start, p.Snap.FirstNS)) / 1e9, N: len(h)}
		if start < p.Snap.FirstNS {
			o.T0 = -float64(p.Snap.FirstNS-start) / 1e9
		}
		lo, hi, wrs := make([]uint32, len(h)), make([]uint32, len(h)), make([]uint32, len(h))
		for i, smp := range h {
			lo[i], hi[i], wrs[i] = smp.Min, smp.Max, smp.WRs
		}
		o.Min, o.Max, o.WRs = runs(lo), runs(hi), runs(wrs)
		pq.Occ = o
		pq.Fails = p.Series.failsOf(q, start, len(h))
	}
	return pq
}

// plotted picks the QPs plotted when the page opens.
func plotted(s *analyzer.Snapshot, d *pageData) []int {
	out := []int{}
	add := func(i int) {
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	for i := range d.QPs {
		if len(d.QPs[i].Diags) > 0 && len(out) < plotDiagnosed {
			add(i)
		}
	}
	top := func(key func(i int) float64) {
		idx := make([]int, 0, len(d.QPs))
		for i := range d.QPs {
			if key(i) > 0 {
				idx = append(idx, i)
			}
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			ka, kb := key(a), key(b)
			switch {
			case ka > kb:
				return -1
			case ka < kb:
				return 1
			}
			return 0
		})
		for _, i := range idx[:min(plotTop, len(idx))] {
			add(i)
		}
	}
	top(func(i int) float64 { return float64(s.QPs[i].WRs) })
	top(func(i int) float64 {
		q := &d.QPs[i]
		if q.Peak == nil {
			return 0
		}
		if q.Depth != nil && *q.Depth > 0 {
			return float64(*q.Peak) / float64(*q.Depth)
		}
		return 0
	})
	return out
}

func writeDiagSection(w io.Writer, s *analyzer.Snapshot, d *pageData) {
	fmt.Fprint(w, "<section id=\"diagnoses\"><h2>Diagnoses</h2>\n")
	if len(s.Diagnoses) == 0 {
		fmt.Fprint(w, "<p>No diagnosis: nothing went wrong that sqscope recognizes.</p>\n</section>\n")
		return
	}
	if s.DiagnosesDropped > 0 {
		fmt.Fprintf(w, "<p class=\"note\">%d more diagnoses were dropped past the analyzer's bound.</p>\n", s.DiagnosesDropped)
	}
	for i := range s.Diagnoses {
		g := &s.Diagnoses[i]
		when := analyzer.RelTime(g.FirstS)
		if g.Count > 1 {
			when = fmt.Sprintf("%d times, first %s, last %s", g.Count, analyzer.RelTime(g.FirstS), analyzer.RelTime(g.LastS))
		}
		if g.FirstWall != "" {
			when += " (first at " + g.FirstWall + ")"
		}
		who := fmt.Sprintf("QP %#x (pid %d)", g.QPNum, g.PID)
		if qi := d.Diagnoses[i].QP; qi >= 0 {
			who = d.QPs[qi].Label
		}
		keys := make([]string, 0, len(g.Evidence))
		for k := range g.Evidence {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		ev := make([]string, len(keys))
		for j, k := range keys {
			ev[j] = fmt.Sprintf("%s=%d", k, g.Evidence[k])
		}
		fmt.Fprintf(w, `<div class="diag %s" id="diag-%d"><h3>%s: %s on %s</h3>
<p class="when">%s</p>
<p class="message">%s</p>
<p class="fix"><b>Fix:</b> %s</p>
<p class="evidence">evidence: %s</p></div>
`, esc(g.Severity), i, esc(strings.ToUpper(g.Severity)), esc(g.Kind), esc(who), esc(when), esc(g.Message), esc(g.Fix), esc(strings.Join(ev, ", ")))
	}
	fmt.Fprint(w, "</section>\n")
}

// tableCol is one column of the QP table: its heading, and the cell of a
// QP ("n/a" when the figure is not given).
type tableCol struct {
	head string
	cell func(q *analyzer.QP, p *pageQP) Cell
}

func textCell(s string) Cell { return Cell{Text: s} }

var tableCols = []tableCol{
	{"pid", func(q *analyzer.QP, _ *pageQP) Cell { return UintCell(uint64(q.PID)) }},
	{"process", func(q *analyzer.QP, _ *pageQP) Cell { return textCell(q.Comm) }},
	{"QP", func(q *analyzer.QP, _ *pageQP) Cell {
		return Cell{Text: fmt.Sprintf("%#x", q.QPNum), V: float64(q.QPNum), Num: true}
	}},
	{"gen", func(q *analyzer.QP, _ *pageQP) Cell { return UintCell(q.Gen) }},
	{"type", func(q *analyzer.QP, _ *pageQP) Cell { return textCell(q.Type) }},
	{"provider (model)", func(q *analyzer.QP, _ *pageQP) Cell { return textCell(ProviderModel(q)) }},
	{"max_send_wr", func(q *analyzer.QP, p *pageQP) Cell {
		if p.Depth == nil {
			return Cell{Text: "unknown", V: -1, Num: true}
		}
		return UintCell(*p.Depth)
	}},
	{"WRs", func(q *analyzer.QP, _ *pageQP) Cell { return UintCell(q.WRs) }},
	{"WRs/s", func(q *analyzer.QP, _ *pageQP) Cell {
		return Cell{Text: fmt.Sprintf("%.0f", q.Rates.WRsPerSec), V: q.Rates.WRsPerSec, Num: true}
	}},
	{"doorbells/s", func(_ *analyzer.QP, p *pageQP) Cell { return NumCell(p.DoorbellsPerS, "%.0f", "") }},
	{"WRs/doorbell", func(_ *analyzer.QP, p *pageQP) Cell { return NumCell(p.WRsPerDoorbell, "%.2f", "") }},
	{"inline %", func(_ *analyzer.QP, p *pageQP) Cell { return NumCell(p.InlinePct, "%.1f", "") }},
	{"signaled %", func(_ *analyzer.QP, p *pageQP) Cell { return NumCell(p.SignaledPct, "%.1f", "") }},
	{"peak outstanding", func(_ *analyzer.QP, p *pageQP) Cell {
		if p.Peak == nil {
			return Absent("")
		}
		c := UintCell(*p.Peak)
		if p.PeakBound {
			c.Text = ">= " + c.Text
		}
		return c
	}},
	{"ENOMEM", func(q *analyzer.QP, _ *pageQP) Cell { return UintCell(q.ENOMEM) }},
	{"diagnoses", func(_ *analyzer.QP, p *pageQP) Cell { return UintCell(uint64(len(p.Diags))) }},
}

// ProviderModel names a QP's provider and the HCA model its figures
// rest on.
func ProviderModel(q *analyzer.QP) string {
	if q.Model == "" {
		return q.Provider + " (no HCA model)"
	}
	return q.Provider + " (" + q.Model + ")"
}

// writeTable writes every QP as a row of the table.
func writeTable(w io.Writer, s *analyzer.Snapshot, d *pageData) {
	fmt.Fprint(w, "<section id=\"qps\"><h2>Send queues</h2>\n")
	heads := make([]string, len(tableCols))
	for i, c := range tableCols {
		heads[i] = c.head
	}
	WriteTable(w, heads, len(s.QPs), func(i int) (string, []Cell) {
		q, p := &s.QPs[i], &d.QPs[i]
		cells := make([]Cell, len(tableCols))
		for j, c := range tableCols {
			cells[j] = c.cell(q, p)
		}
		if len(p.Diags) > 0 {
			return "diagnosed", cells
		}
		return "", cells
	})
	if len(s.QPs) == 0 {
		fmt.Fprint(w, "<p>No send queue activity seen.</p>\n")
	}
	if s.Total.WRs > 0 {
		fmt.Fprintf(w, "<p>In total: %d WRs", s.Total.WRs)
		if s.Total.ENOMEM > 0 {
			fmt.Fprintf(w, ", %d post calls failed with ENOMEM", s.Total.ENOMEM)
		}
		fmt.Fprint(w, ".</p>\n")
	}
	fmt.Fprint(w, "</section>\n")
}
