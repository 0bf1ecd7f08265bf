package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
)

// The frame every sqscope page shares (report --html, diff --html): the
// style, the script's helpers, the QP table. A page is one file that
// needs no network (docs/design.md, the HTML report).
var (
	//go:embed html/page.css
	pageCSS string
	//go:embed html/common.js
	commonJS string
)

// PageStart writes the start of a page: its head with the shared style,
// and title as its heading.
func PageStart(w io.Writer, title string) {
	fmt.Fprintf(w, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/><meta name="generator" content="sqscope"/>
<title>%s</title>
<style>/*<![CDATA[*/
%s
/*]]>*/</style></head><body>
<h1>%s</h1>
`, esc(title), pageCSS, esc(title))
}

// PageEnd writes data as the JSON the page's script reads
// (#sqscope-data), then the shared helpers and script in one closure,
// and ends the page. The page stays well-formed XML, so that a test can
// parse it whole.
func PageEnd(w io.Writer, data any, script string) error {
	js, err := json.Marshal(data) // escapes <, > and &: nothing closes the script
	if err != nil {
		return fmt.Errorf("encoding the page's data: %w", err)
	}
	fmt.Fprintf(w, `<script type="application/json" id="sqscope-data">%s</script>
<script>//<![CDATA[
(function () {
"use strict";
%s
%s
})();
//]]></script>
</body></html>
`, js, commonJS, script)
	return nil
}

// Cell is one cell of a page's table: its text, and for a number the
// value it sorts by; Title, shown on hover, says why a figure is absent.
type Cell struct {
	Text, Title string
	V           float64
	Num         bool
}

// Absent is the cell of a figure not given, sorted below every value.
func Absent(why string) Cell { return Cell{Text: "n/a", Title: why, V: -1, Num: true} }

// NumCell is the cell of v written by format; absent (why) when nil.
func NumCell(v *float64, format, why string) Cell {
	if v == nil {
		return Absent(why)
	}
	return Cell{Text: fmt.Sprintf(format, *v), V: *v, Num: true}
}

// UintCell is the cell of a count.
func UintCell(v uint64) Cell { return Cell{Text: fmt.Sprint(v), V: float64(v), Num: true} }

// WriteTable writes the filter and the table of n QPs, a row each with
// its index as data-qp and the class row gives, one row a line. The
// table is inside <noscript id="qprows">: without script it is the table
// as it reads; a browser running script keeps it as text, which costs
// nothing to parse, and the page's script (common.js) shows it as
// #qptable a page of rows at a time, sorted and filtered over all of
// them, since laying out thousands of rows at once takes seconds.
func WriteTable(w io.Writer, heads []string, n int, row func(i int) (class string, cells []Cell)) {
	fmt.Fprint(w, `<p><label>Filter: <input id="filter" type="search" placeholder="text in any cell, e.g. a process or 0x1c2"/></label> <span id="shown"></span></p>
<div id="qpview"><noscript id="qprows"><table><thead><tr>`)
	for i, h := range heads {
		fmt.Fprintf(w, `<th data-col="%d">%s</th>`, i, esc(h))
	}
	fmt.Fprint(w, "</tr></thead><tbody>\n")
	for i := range n {
		cls, cells := row(i)
		if cls != "" {
			cls = ` class="` + esc(cls) + `"`
		}
		fmt.Fprintf(w, `<tr data-qp="%d"%s>`, i, cls)
		for _, c := range cells {
			title := ""
			if c.Title != "" {
				title = ` title="` + esc(c.Title) + `"`
			}
			if c.Num {
				fmt.Fprintf(w, `<td data-v="%g"%s>%s</td>`, c.V, title, esc(c.Text))
			} else {
				fmt.Fprintf(w, `<td%s>%s</td>`, title, esc(c.Text))
			}
		}
		fmt.Fprint(w, "</tr>\n")
	}
	fmt.Fprint(w, "</tbody></table></noscript></div>\n")
}

func esc(s string) string { return html.EscapeString(s) }
