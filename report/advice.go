package report

import (
	"fmt"
	"io"

	"github.com/sqscope/sqscope/analyzer"
)

// Advice is what sqscope advise says of the run, in its own words (its
// text), for the page to lay out: the text of each QP it advised on, and
// the rest (the QPs not advised on and why, the model, what a replay
// cannot know); or why there is no advice.
type Advice struct {
	Absent string // why there is none; the rest is then empty
	// Note says which QPs were advised on, when not every one was.
	Note string
	QPs  []AdviceQP
	Rest string
}

// AdviceQP is advise's text of one QP.
type AdviceQP struct {
	PID, QPNum uint32
	Text       string
}

// Featured is the QPs the page plots when it opens, the first n at most,
// by index into snap.QPs: those with diagnoses, then the busiest and the
// fullest.
func Featured(snap *analyzer.Snapshot, n int) []int {
	plot := buildPage(&Page{Snap: *snap}).Plot
	return plot[:min(n, len(plot))]
}

// writeAdvice writes the page's advice section; none when a is nil.
func writeAdvice(w io.Writer, a *Advice, s *analyzer.Snapshot, d *pageData) {
	if a == nil {
		return
	}
	fmt.Fprint(w, `<section id="advice"><h2>Advice: which settings would have done best</h2>
<p class="note">sqscope advise replays each QP's recorded WR stream under other inline, signaling, post-list and depth settings through the simulated HCA's NIC timing and the mlx5 model, and keeps the settings no other beats on both WR/s and PCIe bytes per WR.`)
	if a.Note != "" {
		fmt.Fprint(w, " "+esc(a.Note))
	}
	fmt.Fprint(w, "</p>\n")
	if a.Absent != "" {
		fmt.Fprintf(w, "<p class=\"absent\">No advice: %s</p>\n</section>\n", esc(a.Absent))
		return
	}
	label := map[failKey]string{}
	for i := range s.QPs { // the latest lifetime of a number, as advise keys QPs
		label[failKey{s.QPs[i].PID, s.QPs[i].QPNum}] = d.QPs[i].Label
	}
	for i, q := range a.QPs {
		l, ok := label[failKey{q.PID, q.QPNum}]
		if !ok {
			l = fmt.Sprintf("QP %#x (pid %d)", q.QPNum, q.PID)
		}
		fmt.Fprintf(w, "<div class=\"advice\" id=\"advice-%d\"><h3>%s</h3>\n<pre class=\"advice\">%s</pre></div>\n", i, esc(l), esc(q.Text))
	}
	if a.Rest != "" {
		fmt.Fprintf(w, "<details><summary>QPs not advised on, the model and what a replay cannot know</summary>\n<pre class=\"advice\">%s</pre></details>\n", esc(a.Rest))
	}
	fmt.Fprint(w, "</section>\n")
}
