package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/report/pagetest"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

// htmlReport runs report --html -o on rec and returns the page's path and
// what its strict parse found (pagetest.Parse).
func htmlReport(t *testing.T, rec string) (string, pagetest.Page) {
	t.Helper()
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(rec), ".sqscope")+".html")
	if _, stderr, code, err := sqscope("report", "--html", "-o", out, rec); code != 0 {
		t.Fatalf("report --html: exit %d: %v\n%s", code, err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, pagetest.Parse(t, b)
}

// checkClean fails t when the page logged a problem or asked for
// anything but its own file.
func checkClean(t *testing.T, tab *pagetest.Tab) {
	t.Helper()
	if p := tab.Problems(); len(p) > 0 {
		t.Errorf("the page logged %d problem(s):\n%s", len(p), strings.Join(p, "\n"))
	}
	if r := tab.Requests(); !slices.Equal(r, []string{tab.URL}) {
		t.Errorf("the page made requests %q, want only its own file %s", r, tab.URL)
	}
}

// overflowCard is what the browser drew for the overflowing QP.
type overflowCard struct {
	Found      bool      `json:"found"`
	LineYs     []float64 `json:"lineYs"`
	LimitY     []float64 `json:"limitY"`
	LimitLabel string    `json:"limitLabel"`
	Fails      []struct {
		X     float64 `json:"x"`
		Title string  `json:"title"`
	} `json:"fails"`
	Marks    []string `json:"marks"`
	Card     string   `json:"card"`
	Page     string   `json:"page"`
	Visible  bool     `json:"visible"`
	Shown    string   `json:"shown"`
	Rows     int      `json:"rows"`
	PlotSize [2]int   `json:"plotSize"`
}

// readCard reads the card of QP i from the page: its first plot's
// occupancy line, limit and marks, its text and the page's.
const readCard = `(function (i) {
  var c = document.getElementById("qp-card-" + i);
  if (!c) return { found: false };
  var svg = c.querySelector("svg.plot"), line = svg.querySelector("path.line");
  var nums = function (d) { return (d.match(/,[-\d.]+/g) || []).map(function (s) { return Number(s.slice(1)); }); };
  var box = svg.getBoundingClientRect();
  return {
    found: true,
    lineYs: line ? nums(line.getAttribute("d")) : [],
    limitY: Array.prototype.map.call(svg.querySelectorAll("line.limit"), function (l) { return Number(l.getAttribute("y1")); }),
    limitLabel: (svg.querySelector("text.limitlabel") || {}).textContent || "",
    fails: Array.prototype.map.call(svg.querySelectorAll("rect.fail"), function (r) { return { x: Number(r.getAttribute("x")), title: r.textContent }; }),
    marks: Array.prototype.map.call(svg.querySelectorAll("path.mark"), function (m) { return m.textContent; }),
    card: c.innerText, page: document.body.innerText,
    visible: box.width > 0 && box.height > 0, plotSize: [Math.round(box.width), Math.round(box.height)],
    shown: document.getElementById("shown").textContent,
    rows: document.querySelectorAll("#qptable tbody tr").length
  };
})`

// The HTML report of a recording of the demo's fault (the workload on
// the demo's settings, healthy and then never signaling until its send
// queue overflows) in headless Chromium: it loads with no console error
// and no request but its own file; the overflowing QP's plot reaches its
// depth and marks the first ENOMEM in its bucket; the diagnoses and their
// fixes are on the page. Screenshots go to the test's artifacts (go test
// -artifacts keeps them).
func TestReportHTMLInBrowser(t *testing.T) {
	b := pagetest.Chromium(t)
	rec := filepath.Join("testdata", "faults", "never-signal-after-healthy.sqscope")
	stdout, _, code, err := sqscope("report", "--json", rec)
	if code != 0 {
		t.Fatalf("report --json: exit %d: %v", code, err)
	}
	var r struct {
		QPs []struct {
			QPNum     uint32 `json:"qp_num"`
			MaxSendWR uint32 `json:"max_send_wr"`
			ENOMEM    uint64 `json:"enomem"`
		} `json:"qps"`
		Diagnoses []struct{ Kind, Message, Fix string } `json:"diagnoses"`
	}
	if err := decodeReport(t, []byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.QPs) != 1 || r.QPs[0].ENOMEM == 0 || len(r.Diagnoses) == 0 {
		t.Fatalf("the recording holds no overflow: %+v", r)
	}
	qp := r.QPs[0]
	failNS := firstENOMEM(t, rec, qp.QPNum)

	path, p := htmlReport(t, rec)
	var data struct {
		FirstNS uint64  `json:"first_ns"`
		StepS   float64 `json:"step_s"`
	}
	if err := json.Unmarshal(p.Data, &data); err != nil {
		t.Fatal(err)
	}
	tab, load := b.Open(t, path, 30*time.Second)
	t.Logf("%s: %s", filepath.Base(path), load)
	checkClean(t, tab)

	c := pagetest.Eval[overflowCard](t, tab, readCard+"(0)")
	if !c.Found || !c.Visible {
		t.Fatalf("the overflowing QP's card is not drawn on opening (found %v, visible %v)", c.Found, c.Visible)
	}
	if len(c.LineYs) == 0 || len(c.LimitY) != 1 {
		t.Fatalf("occupancy plot: %d points, limits %v", len(c.LineYs), c.LimitY)
	}
	if top := slices.Min(c.LineYs); top-c.LimitY[0] > 0.05 || top-c.LimitY[0] < -0.05 {
		t.Errorf("the occupancy line reaches y=%g, max_send_wr is drawn at y=%g", top, c.LimitY[0])
	}
	if want := fmt.Sprintf("max_send_wr %d", qp.MaxSendWR); c.LimitLabel != want {
		t.Errorf("limit labelled %q, want %q", c.LimitLabel, want)
	}

	// the failure marks: the first in the bucket of the first ENOMEM, all
	// of them the QP's ENOMEMs
	if len(c.Fails) == 0 {
		t.Fatal("no failure marked on the plot")
	}
	first, sum := c.Fails[0], uint64(0)
	for _, f := range c.Fails {
		var n uint64
		var from float64
		if _, err := fmt.Sscanf(f.Title, "%d failed post call(s) from +%g s", &n, &from); err != nil {
			t.Fatalf("failure mark %q: %v", f.Title, err)
		}
		sum += n
		if f.X < first.X {
			first = f
		}
	}
	if sum != qp.ENOMEM {
		t.Errorf("the marks count %d failed posts, the QP has %d ENOMEMs", sum, qp.ENOMEM)
	}
	var from float64
	fmt.Sscanf(first.Title, "%d failed post call(s) from +%g s", new(uint64), &from)
	at := float64(failNS-data.FirstNS) / 1e9
	const slack = 1e-6 // the title gives µs
	if at < from-slack || at >= from+data.StepS+slack {
		t.Errorf("first failure marked in the bucket from +%g s (%g s each), the first ENOMEM was at +%g s", from, data.StepS, at)
	}
	if !slices.ContainsFunc(c.Marks, func(m string) bool { return strings.Contains(m, r.Diagnoses[0].Kind+", first at") }) {
		t.Errorf("no mark of %s on the plot: %q", r.Diagnoses[0].Kind, c.Marks)
	}
	for _, g := range r.Diagnoses {
		for _, want := range []string{g.Message, g.Fix} {
			if !strings.Contains(c.Page, want) {
				t.Errorf("the page does not show %q", want)
			}
		}
	}
	if !strings.Contains(c.Card, "Fix: "+r.Diagnoses[0].Fix) {
		t.Errorf("the QP's card does not give the fix of %s", r.Diagnoses[0].Kind)
	}
	if c.Shown != "1 of 1 QPs" || c.Rows != 1 {
		t.Errorf("table: %q, %d rows", c.Shown, c.Rows)
	}

	screenshot(t, tab, "overflow-report.png", "")
	screenshot(t, tab, "overflow-card.png", "#qp-card-0")
	readmeShot(t, tab)

	// without script: the table as Go wrote it, the diagnoses and fixes
	bare := b.OpenWithoutScript(t, path, 30*time.Second)
	checkClean(t, bare)
	got := pagetest.Eval[[3]string](t, bare, `[String(document.querySelectorAll("table tbody tr").length),
  String(document.querySelectorAll("#cards .card, #qptable").length), document.body.innerText]`)
	if got[0] != "1" || got[1] != "0" {
		t.Errorf("without script: %s table rows, %s cards or tables made by script; want the row as written, nothing drawn", got[0], got[1])
	}
	if g := r.Diagnoses[0]; !strings.Contains(got[2], g.Fix) || !strings.Contains(got[2], fmt.Sprintf("%#x", qp.QPNum)) {
		t.Errorf("without script the page does not show the fix or the QP's row")
	}
}

// firstENOMEM is when the first post to QP qpn failed with ENOMEM in rec.
func firstENOMEM(t *testing.T, rec string, qpn uint32) uint64 {
	t.Helper()
	var at uint64
	err := session.ReadFile(context.Background(), rec, func(ev trace.Event) {
		if at != 0 {
			return
		}
		switch e := ev.(type) {
		case *trace.Post:
			if e.QPNum == qpn && e.Ret == ibv.ENOMEM {
				at = e.TimeNS
			}
		case *trace.PostFail:
			if e.QPNum == qpn && e.Errno == ibv.ENOMEM {
				at = e.TimeNS
			}
		}
	})
	if err != nil || at == 0 {
		t.Fatalf("reading %s: no ENOMEM of QP %#x (%v)", rec, qpn, err)
	}
	return at
}

// screenshot writes the page (or the element sel selects) as a PNG named
// name to the test's artifacts, and checks it is one.
func screenshot(t *testing.T, tab *pagetest.Tab, name, sel string) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), name)
	tab.Screenshot(t, path, sel)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if r := img.Bounds(); r.Dx() < 300 || r.Dy() < 200 {
		t.Errorf("%s is %dx%d", path, r.Dx(), r.Dy())
	}
	t.Logf("screenshot: %s", path)
}

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite the README's screenshot of the HTML report ("+readmePNG+") from TestReportHTMLInBrowser's")

// readmePNG is the README's picture of the HTML report.
const readmePNG = "../../docs/report.png"

// readmeShot writes the README's picture of the page to the test's
// artifacts, and over readmePNG with -update-screenshot: the window
// scrolled to the plots, the overflowing QP's card first among them.
func readmeShot(t *testing.T, tab *pagetest.Tab) {
	t.Helper()
	path := filepath.Join(t.ArtifactDir(), "readme.png")
	tab.ScreenshotViewport(t, path, "#plots")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	checkReadmePNG(t, path, b)
	t.Logf("screenshot: %s", path)
	if *updateScreenshot {
		if err := os.WriteFile(readmePNG, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", readmePNG)
	}
}

// tableView is what the QP table showed and did when worked.
type tableView struct {
	Shown     string `json:"shown"`     // what it says it shows, at first
	Rows      int    `json:"rows"`      // rows shown at first
	Picks     int    `json:"picks"`     // QPs in the list to plot
	Cards     int    `json:"cards"`     // cards open
	More      string `json:"more"`      // the button for more rows
	AfterMore int    `json:"afterMore"` // rows shown after it
	Sorted    string `json:"sorted"`    // the first row's QP, sorted by QP descending
	Filtered  string `json:"filtered"`  // what it says after a filter
	Hit       string `json:"hit"`       // the first row's QP then
}

// The HTML report of 4,096 QPs (a recording made here, no BPF) stays
// under 10 MB and opens in headless Chromium in under 3 s: navigation
// start to the first frame after the load event, the median of three
// loads. The table shows a page of rows, sorted and filtered over all.
func TestReportHTMLInBrowser4096(t *testing.T) {
	if testing.Short() {
		t.Skip("4,096 QPs: not in -short")
	}
	b := pagetest.Chromium(t)
	const qps, sizeLimit = 4096, 10 << 20
	// 3 s with a whole CPU: longer in proportion on a host whose busy
	// thread gets less of one (measured, as the tests' waits are)
	share := bpftest.CPUShare(200 * time.Millisecond)
	loadLimit := time.Duration(float64(3*time.Second) / share)
	rec := filepath.Join(t.TempDir(), "4096.sqscope")
	w := createRecording(t, rec)
	write := func(evs []trace.Event) {
		for _, ev := range evs {
			if err := w.Write(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	// on the mlx5 model (the simulated HCA's), whose QPs carry the most:
	// PCIe savings and notes with the HCA's figures
	h := trace.Header{TimeNS: 1e9, PID: 1}
	write([]trace.Event{&trace.Attach{Header: h, Func: "post_send", Path: "app", How: trace.HowSimSymbol},
		&trace.Attach{Header: h, Func: "poll_cq", Path: "app", How: trace.HowSimSymbol}})
	analyzertest.SteadyEvents(qps, 100, 100_000, write)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	path, p := htmlReport(t, rec)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() >= sizeLimit {
		t.Errorf("the page of %d QPs is %d bytes, over %d", qps, st.Size(), sizeLimit)
	}
	if len(p.Rows) != qps {
		t.Fatalf("%d rows in the page, want %d", len(p.Rows), qps)
	}
	var loads []time.Duration
	var tab *pagetest.Tab
	for range 3 {
		var l pagetest.Load
		tab, l = b.Open(t, path, 30*time.Second)
		checkClean(t, tab)
		loads = append(loads, l.Drawn)
		t.Logf("%d QPs, %.1f MB: %s", qps, float64(st.Size())/(1<<20), l)
	}
	slices.Sort(loads)
	if loads[1] >= loadLimit {
		t.Errorf("the page of %d QPs took %v to draw (median of %v), over %v (3 s at the %.0f%% of a CPU a busy thread gets here)", qps, loads[1], loads, loadLimit, 100*share)
	}

	table := pagetest.Eval[tableView](t, tab, `(function () {
  var rows = function () { return document.querySelectorAll("#qptable tbody tr"); };
  var out = { shown: document.getElementById("shown").textContent, rows: rows().length,
    picks: document.querySelectorAll("#pick option[value]:not([value=''])").length,
    cards: document.querySelectorAll("#cards .card").length };
  var more = document.getElementById("qpmore");
  out.more = more.textContent; more.click(); out.afterMore = rows().length;
  var qp = document.querySelector("#qptable th[data-col='2']"); qp.click(); qp.click();
  out.sorted = rows()[0].cells[2].textContent;
  var f = document.getElementById("filter"); f.value = "0x10ff"; f.dispatchEvent(new Event("input"));
  out.filtered = document.getElementById("shown").textContent; out.hit = rows()[0].cells[2].textContent;
  return out;
})()`)
	if want := fmt.Sprintf("%d of %d QPs, the first 200 shown", qps, qps); table.Shown != want || table.Rows != 200 {
		t.Errorf("the table shows %d rows, says %q; want 200, %q", table.Rows, table.Shown, want)
	}
	if table.Picks != qps || table.Cards == 0 {
		t.Errorf("%d QPs to pick, %d cards open", table.Picks, table.Cards)
	}
	if table.More != "show 1000 more of 3896" || table.AfterMore != 1200 {
		t.Errorf("button %q showed %d rows", table.More, table.AfterMore)
	}
	if last := fmt.Sprintf("%#x", 0x100+qps-1); table.Sorted != last {
		t.Errorf("sorted by QP, descending: first %s, want %s", table.Sorted, last)
	}
	if table.Filtered != "1 of 4096 QPs" || table.Hit != "0x10ff" {
		t.Errorf("filter 0x10ff: %q, first row %s", table.Filtered, table.Hit)
	}
}

// The page of diff --html, on the report's frame, in headless Chromium:
// no console error, no request but its file, the totals and the pair's
// card drawn as bars, the pair in the table.
func TestDiffHTMLInBrowser(t *testing.T) {
	b := pagetest.Chromium(t)
	out := filepath.Join(t.TempDir(), "change.html")
	before := filepath.Join("testdata", "faults", "lazy-poll.sqscope")
	after := filepath.Join("testdata", "faults", "sig-all-with-flags.sqscope")
	if _, stderr, code, err := sqscope("diff", "--html", "-o", out, before, after); code != 0 {
		t.Fatalf("diff --html: exit %d: %v\n%s", code, err, stderr)
	}
	tab, load := b.Open(t, out, 30*time.Second)
	t.Logf("change.html: %s", load)
	checkClean(t, tab)
	got := pagetest.Eval[[4]string](t, tab, `[String(document.querySelectorAll("#total-bars svg.bars rect").length),
  String(document.querySelectorAll("#qp-card-0 svg.bars rect").length),
  document.getElementById("shown").textContent, document.querySelector("#qptable tbody tr").getAttribute("data-qp")]`)
	if got[0] == "0" || got[1] == "0" || got[2] != "1 of 1 QPs" || got[3] != "0" {
		t.Errorf("bars in the totals %s, in the pair's card %s; table %q, first row %s", got[0], got[1], got[2], got[3])
	}
	screenshot(t, tab, "diff.png", "")
}

// checkReadmePNG says whether b, the PNG at path, is a picture of a page:
// the window's size, and drawn (many colours, not all but a hundredth
// of it one).
func checkReadmePNG(t testing.TB, path string, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	r := img.Bounds()
	if r.Dx() != pagetest.WindowWidth || r.Dy() != pagetest.WindowHeight {
		t.Fatalf("%s is %dx%d, want the window's %dx%d", path, r.Dx(), r.Dy(), pagetest.WindowWidth, pagetest.WindowHeight)
	}
	colours := map[[4]uint32]int{}
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			c0, c1, c2, c3 := img.At(x, y).RGBA()
			colours[[4]uint32{c0 >> 12, c1 >> 12, c2 >> 12, c3 >> 12}]++
		}
	}
	most, all := 0, 0
	for _, n := range colours {
		most, all = max(most, n), all+n
	}
	if len(colours) < 32 || most > all*99/100 {
		t.Errorf("%s: %d colours, the commonest %d of %d pixels looked at: not a drawn page", path, len(colours), most, all)
	}
}
