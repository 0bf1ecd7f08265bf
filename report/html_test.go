package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/report/pagetest"
	"github.com/sqscope/sqscope/trace"
)

// pageOf makes the HTML report of evs as sqscope report --html does: the
// snapshot of one pass, the series of a second.
func pageOf(t testing.TB, opts analyzer.Options, each func(fn func([]trace.Event))) (analyzer.Snapshot, []byte) {
	t.Helper()
	a := analyzer.New(opts)
	each(a.IngestAll)
	snap := a.Snapshot()
	analyzertest.Check(t, snap)
	so := SeriesOptions(opts, snap.FirstNS, snap.LastNS, len(snap.QPs))
	sa := analyzer.New(so)
	s := NewSeries(so.HistoryStepNS)
	each(func(evs []trace.Event) {
		for _, ev := range evs {
			sa.Ingest(ev)
			s.Event(ev)
		}
	})
	s.Take(sa.Snapshot())
	var b bytes.Buffer
	if err := WriteHTML(&b, Page{Title: "test.sqscope", Header: "recording test.sqscope:", Snap: snap, Series: s}); err != nil {
		t.Fatal(err)
	}
	return snap, b.Bytes()
}

func eventsOf(evs []trace.Event) func(fn func([]trace.Event)) {
	return func(fn func([]trace.Event)) { fn(evs) }
}

// parsedPage is a page and the data it embeds.
type parsedPage struct {
	pagetest.Page
	data pageData
}

// parsePage parses page strictly (pagetest.Parse) and decodes its data.
func parsePage(t testing.TB, page []byte) parsedPage {
	t.Helper()
	p := parsedPage{Page: pagetest.Parse(t, page)}
	if err := json.Unmarshal(p.Data, &p.data); err != nil {
		t.Fatalf("the page's data does not decode: %v", err)
	}
	return p
}

// checkPage checks what every page must be: well-formed, its data
// decoding, every QP of snap a row of the table and in the data, nothing
// to fetch (pagetest.Parse).
func checkPage(t *testing.T, snap analyzer.Snapshot, page []byte) parsedPage {
	t.Helper()
	p := parsePage(t, page)
	if len(p.Rows) != len(snap.QPs) || len(p.data.QPs) != len(snap.QPs) {
		t.Fatalf("%d table rows and %d QPs in the data, want %d", len(p.Rows), len(p.data.QPs), len(snap.QPs))
	}
	for i, r := range p.Rows {
		if r != fmt.Sprint(i) {
			t.Fatalf("row %d is QP %s", i, r)
		}
		if !strings.Contains(p.data.QPs[i].Label, fmt.Sprintf("QP %#x", snap.QPs[i].QPNum)) {
			t.Fatalf("QP %d's label %q", i, p.data.QPs[i].Label)
		}
	}
	return p
}

// The page of an overflowing QP: its series reaches the depth, the first
// failed post is marked in its bucket, its diagnosis and fix are on the
// page and the QP is plotted when the page opens.
func TestHTMLOverflow(t *testing.T) {
	s := streamtest.New()
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
	s.Create(2, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
	for i := range uint64(4) { // a healthy neighbour
		s.Send(2, 4, 0, 4)
		s.Poll(2, 4*i+3)
	}
	s.Wait(10_000)
	s.LazyPoll(1, 16, ibv.WRSend)
	failAt := s.T + s.DT
	s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
	s.Wait(5_000)
	s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
	snap, page := pageOf(t, withBF, eventsOf(s.Events))
	p := checkPage(t, snap, page)

	qi := -1
	for i, q := range snap.QPs {
		if q.QPNum == 1 {
			qi = i
		}
	}
	q := p.data.QPs[qi]
	if q.Occ == nil || q.Depth == nil || *q.Depth != 16 {
		t.Fatalf("overflowing QP: series %v, depth %v (%s)", q.Occ != nil, q.Depth, q.NoOcc)
	}
	top := uint32(0)
	for _, m := range unruns(t, q.Occ.Max) {
		top = max(top, m)
	}
	if top != 16 {
		t.Errorf("series peaks at %d, want the depth 16", top)
	}
	if len(q.Fails) == 0 {
		t.Fatal("no failed post marked")
	}
	firstBucket := q.Fails[0][0]
	bucketStart := q.Occ.T0 + float64(firstBucket)*p.data.StepS
	at := float64(failAt-snap.FirstNS) / 1e9
	if at < bucketStart-1e-12 || at >= bucketStart+p.data.StepS+1e-12 {
		t.Errorf("first failure marked in the bucket from %g s (step %g), it was at %g s", bucketStart, p.data.StepS, at)
	}
	var fails uint64
	for _, f := range q.Fails {
		fails += f[1]
	}
	if fails != 2 {
		t.Errorf("%d failed posts marked, want 2", fails)
	}
	if len(q.Diags) == 0 || len(snap.Diagnoses) == 0 {
		t.Fatal("the overflow's diagnosis is not on its QP")
	}
	g := snap.Diagnoses[q.Diags[0]]
	for _, want := range []string{g.Message, g.Fix, "no peak is lost"} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("page text lacks %q", want)
		}
	}
	if len(p.data.Plot) == 0 || p.data.Plot[0] != qi {
		t.Errorf("plotted first: %v, want the diagnosed QP %d", p.data.Plot, qi)
	}
}

// A provider no model applies to: the page gives no PCIe figure, and
// the notes say why (as the text report).
func TestHTMLNoPCIeModel(t *testing.T) {
	s := streamtest.New()
	s.CreateOn(1, streamtest.RCCaps(16, 60, 1), "/usr/lib/libibverbs/libvendor-rdmav34.so")
	s.Send(1, 4, 0, 4)
	s.Poll(1, 3)
	snap, page := pageOf(t, withBF, eventsOf(s.Events))
	p := checkPage(t, snap, page)
	q := p.data.QPs[0]
	if q.PCIe != nil {
		t.Errorf("PCIe %v on a provider without a model", q.PCIe)
	}
	var notes []string
	for _, n := range q.Notes {
		notes = append(notes, p.data.Notes[n])
	}
	if !strings.Contains(strings.Join(notes, " "), "PCIe") {
		t.Errorf("notes %q do not say why there is no PCIe figure", notes)
	}
}

// With 4,096 QPs the page stays under 10 MB, every QP in the table with
// its series.
func TestHTMLSize4096(t *testing.T) {
	if testing.Short() {
		t.Skip("4,096 QPs: not in -short")
	}
	const qps, limit = 4096, 10 << 20
	// on the mlx5 model (the simulated HCA's), whose QPs carry the most:
	// PCIe savings and notes with the HCA's figures
	snap, page := pageOf(t, withBF, func(fn func([]trace.Event)) {
		h := trace.Header{TimeNS: 1e9, PID: 1}
		fn([]trace.Event{&trace.Attach{Header: h, Func: "post_send", Path: "app", How: trace.HowSimSymbol},
			&trace.Attach{Header: h, Func: "poll_cq", Path: "app", How: trace.HowSimSymbol}})
		analyzertest.SteadyEvents(qps, 100, 100_000, fn)
	})
	if len(page) >= limit {
		t.Fatalf("page of %d QPs is %d bytes, over %d", qps, len(page), limit)
	}
	p := checkPage(t, snap, page)
	for i, q := range p.data.QPs {
		if q.Occ == nil || len(unruns(t, q.Occ.Max)) != q.Occ.N || q.Occ.N == 0 || q.Occ.N > Buckets(qps)+2 {
			t.Fatalf("QP %d: series %+v", i, q.Occ)
		}
	}
	t.Logf("%d QPs: %d bytes (%.1f MB), %d buckets of %g s each", qps, len(page), float64(len(page))/(1<<20), p.data.QPs[0].Occ.N, p.data.StepS)
}

// unruns reads a series the page holds as runs.
func unruns(t testing.TB, s string) []uint32 {
	t.Helper()
	var out []uint32
	for _, tok := range strings.Split(s, ",") {
		var v, n uint32 = 0, 1
		if _, err := fmt.Sscanf(tok, "%d*%d", &v, &n); err != nil {
			if _, err := fmt.Sscanf(tok, "%d", &v); err != nil {
				t.Fatalf("series %q: token %q", s, tok)
			}
		}
		for range n {
			out = append(out, v)
		}
	}
	return out
}

func TestRuns(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []uint32
		want string
	}{
		{"one", []uint32{7}, "7"},
		{"a pair stays", []uint32{1, 1, 2}, "1,1,2"},
		{"a run folds", []uint32{0, 0, 0, 0, 5, 3, 3, 3}, "0*4,5,3*3"},
		{"no runs", []uint32{1, 2, 3}, "1,2,3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runs(tc.in)
			if got != tc.want {
				t.Fatalf("runs(%v) = %q, want %q", tc.in, got, tc.want)
			}
			if back := unruns(t, got); !slices.Equal(back, tc.in) {
				t.Fatalf("read back %v, want %v", back, tc.in)
			}
		})
	}
}

// scriptRun is what testdata/dom.js saw the page's script do.
type scriptRun struct {
	Opened      []string `json:"opened"`
	Rows        []string `json:"rows"` // the QP of each row shown at first
	Shown       string   `json:"shown"`
	More        string   `json:"more"` // the button for more rows, "" when hidden
	AfterMore   int      `json:"rowsAfterMore"`
	SortedFirst string   `json:"sortedFirst"`
	ShownNone   string   `json:"shownNone"`
	ShownAll    string   `json:"shownAll"`
	Cards       []struct {
		ID     string      `json:"id"`
		SVGs   int         `json:"svgs"`
		Band   int         `json:"band"`
		LineYs [][]float64 `json:"lineYs"`
		LimitY []float64   `json:"limitY"`
		Fails  int         `json:"fails"`
		Marks  int         `json:"marks"`
		Text   string      `json:"text"`
	} `json:"cards"`
}

// runScript runs the page's script (pagetest.RunScript).
func runScript(t *testing.T, page []byte) scriptRun {
	t.Helper()
	var r scriptRun
	pagetest.RunScript(t, page, &r)
	return r
}

// The page's script runs without an error, plots the overflowing QP
// when the page opens with its points up to the depth, marks its failed
// posts and diagnosis, sorts and filters the table and plots any QP on
// request.
func TestHTMLScript(t *testing.T) {
	s := streamtest.New()
	for q := uint32(1); q <= 3; q++ {
		s.Create(q, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
	}
	for i := range uint64(4) {
		s.Send(2, 4, 0, 4)
		s.Poll(2, 4*i+3)
	}
	s.LazyPoll(1, 16, ibv.WRSend)
	s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
	snap, page := pageOf(t, withBF, eventsOf(s.Events))
	p := checkPage(t, snap, page)
	r := runScript(t, page)
	if len(r.Opened) != len(p.data.Plot) || len(r.Opened) == 0 || r.Opened[0] != "qp-card-0" {
		t.Fatalf("opened %v, want the cards of %v, the overflowing QP first", r.Opened, p.data.Plot)
	}
	c := r.Cards[0]
	if c.SVGs != 2 || c.Band != 1 || len(c.LimitY) != 1 || len(c.LineYs) != 2 {
		t.Fatalf("overflowing QP's card: %d plots, %d bands, limits %v, %d lines", c.SVGs, c.Band, c.LimitY, len(c.LineYs))
	}
	if top := slices.Min(c.LineYs[0]); math.Abs(top-c.LimitY[0]) > 0.01 {
		t.Errorf("the occupancy line reaches y=%g, the depth is at y=%g", top, c.LimitY[0])
	}
	if c.Fails == 0 || c.Marks == 0 {
		t.Errorf("%d failure marks, %d diagnosis marks", c.Fails, c.Marks)
	}
	if !strings.Contains(c.Text, "so no peak is lost") {
		t.Error("the plot does not say how it was downsampled")
	}
	if g := snap.Diagnoses[0]; !strings.Contains(c.Text, g.Fix) {
		t.Errorf("card text lacks the fix %q", g.Fix)
	}
	if !slices.Equal(r.Rows, []string{"0", "1", "2"}) || r.Shown != "3 of 3 QPs" || r.More != "" {
		t.Errorf("table at first: rows %v, %q, button %q", r.Rows, r.Shown, r.More)
	}
	if r.ShownNone != "0 of 3 QPs" || r.ShownAll != "3 of 3 QPs" {
		t.Errorf("filter showed %q, then %q", r.ShownNone, r.ShownAll)
	}
	if r.SortedFirst != "2" {
		t.Errorf("first row after sorting by QP number twice (descending): QP %s, want 2 (0x3)", r.SortedFirst)
	}
	ids := map[string]bool{}
	for _, c := range r.Cards {
		ids[c.ID] = true
	}
	if !ids["qp-card-2"] {
		t.Errorf("cards %v: the QP picked was not plotted", ids)
	}
}

// A table of more QPs than a page of rows shows the first 200, in the
// order of the page, and the rest on request.
func TestHTMLScriptRowPages(t *testing.T) {
	const qps = 1300
	snap, page := pageOf(t, withBF, func(fn func([]trace.Event)) { analyzertest.SteadyEvents(qps, 2, 100_000, fn) })
	checkPage(t, snap, page)
	r := runScript(t, page)
	if len(r.Rows) != 200 || r.Rows[0] != "0" || r.Rows[199] != "199" {
		t.Fatalf("%d rows shown at first (%v...), want QPs 0 to 199", len(r.Rows), r.Rows[:min(3, len(r.Rows))])
	}
	if r.Shown != "1300 of 1300 QPs, the first 200 shown" || r.More != "show 1000 more of 1100" || r.AfterMore != 1200 {
		t.Errorf("shown %q, button %q, then %d rows", r.Shown, r.More, r.AfterMore)
	}
	if r.ShownAll != "1300 of 1300 QPs, the first 200 shown" {
		t.Errorf("after the filter is cleared: %q (a filter shows the first rows again)", r.ShownAll)
	}
}

// A trace of no QP makes a page whose script runs and plots nothing.
func TestHTMLNoQPs(t *testing.T) {
	s := streamtest.New()
	s.Add(&trace.Proc{Header: s.Header(), Comm: "idle"})
	snap, page := pageOf(t, withBF, eventsOf(s.Events))
	p := checkPage(t, snap, page)
	if !strings.Contains(p.Text, "No send queue activity seen.") {
		t.Error("the page does not say no send queue was seen")
	}
	if r := runScript(t, page); len(r.Opened) != 0 || r.ShownAll != "0 of 0 QPs" {
		t.Errorf("opened %v, shown %q", r.Opened, r.ShownAll)
	}
}
