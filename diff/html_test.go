package diff

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/report/pagetest"
	"github.com/sqscope/sqscope/trace"
)

// page is the HTML page of the comparison of before and after, parsed.
type page struct {
	pagetest.Page
	raw  []byte
	data struct {
		Diff   json.RawMessage `json:"diff"`
		Labels []string        `json:"labels"`
		Plot   []int           `json:"plot"`
	}
}

func pageOf(t *testing.T, before, after *Side, m Match) (*Report, page) {
	t.Helper()
	rep := Compare(before, after, m)
	var b bytes.Buffer
	if err := WriteHTML(&b, rep, before, after); err != nil {
		t.Fatal(err)
	}
	p := page{Page: pagetest.Parse(t, b.Bytes()), raw: b.Bytes()}
	if err := json.Unmarshal(p.Data, &p.data); err != nil {
		t.Fatalf("the page's data does not decode: %v", err)
	}
	if len(p.Rows) != len(rep.QPs) || len(p.data.Labels) != len(rep.QPs) {
		t.Fatalf("%d rows and %d labels for %d QPs", len(p.Rows), len(p.data.Labels), len(rep.QPs))
	}
	for _, i := range p.data.Plot {
		if i < 0 || i >= len(rep.QPs) {
			t.Fatalf("opens the card of QP %d of %d", i, len(rep.QPs))
		}
	}
	return rep, p
}

var goldenCases = []struct {
	name, before, after string
	match               Match
}{
	{"lazy_poll_to_sig_all", "lazy-poll", "sig-all-with-flags", ByProcess},
	{"never_signal_to_after_healthy", "never-signal", "never-signal-after-healthy", ByProcess},
	{"rq_starve_by_qpn", "rq-starve", "cq-overrun", ByQPN},
}

// The page embeds the comparison diff --json writes, number for number
// (the golden JSON of the same recordings), and writes the totals and
// each absent figure's reason where they read without the script.
func TestHTMLData(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			rep, p := pageOf(t, load(t, tc.before), load(t, tc.after), tc.match)
			want, err := os.ReadFile(filepath.Join("testdata", tc.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var got, golden any
			if err := json.Unmarshal(p.data.Diff, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &golden); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, golden) {
				t.Errorf("the page's comparison differs from diff --json's:\n%s\nwant\n%s", p.data.Diff, want)
			}
			for _, fr := range figureRows {
				line := fr.name + fr.text(&rep.Total.Before) + fr.text(&rep.Total.After)
				if !strings.Contains(p.Text, line) {
					t.Errorf("the totals lack %q", line)
				}
			}
			for _, q := range rep.QPs {
				for _, s := range []*QPSide{q.Before, q.After} {
					if s == nil {
						continue
					}
					for _, why := range s.Absent {
						if !bytes.Contains(p.raw, []byte(`title="`+why+`"`)) {
							t.Errorf("%s: no cell says %q", q.Match, why)
						}
					}
				}
				if (q.Before == nil || q.After == nil) && !bytes.Contains(p.raw, []byte("no such QP in the")) {
					t.Errorf("%s: no cell says which recording lacks it", q.Match)
				}
			}
		})
	}
}

// A process name is the target's to choose: one that closes the script
// and opens another is text on the page and a string in its data.
func TestHTMLEscapes(t *testing.T) {
	const comm = `</script><script>alert("x")</script>&amp;'`
	s := streamtest.New()
	s.Add(&trace.Proc{Header: s.Header(), Comm: comm})
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
	s.Send(1, 4, 0, 4)
	s.Poll(1, 3)
	side := sideOf(s)
	if side.Snap.QPs[0].Comm != comm {
		t.Fatalf("the QP's process is %q", side.Snap.QPs[0].Comm)
	}
	_, p := pageOf(t, side, side, ByProcess)
	var d Report
	if err := json.Unmarshal(p.data.Diff, &d); err != nil {
		t.Fatal(err)
	}
	if d.QPs[0].Before.Comm != comm || d.QPs[0].Match != comm+" #1" {
		t.Errorf("the data holds %q, matched as %q", d.QPs[0].Before.Comm, d.QPs[0].Match)
	}
	if !strings.Contains(p.Text, comm+" #1") {
		t.Error("the table does not show the process name as text")
	}
	if n := bytes.Count(p.raw, []byte("</script>")); n != 2 {
		t.Errorf("%d </script> on the page, want the 2 that close its scripts", n)
	}
}

// drawing is what dom.js saw drawn in a card or element.
type drawing struct {
	ID   string `json:"id"`
	Bars []struct {
		Cls   string  `json:"cls"`
		Width float64 `json:"width"`
	} `json:"bars"`
	LimitY []float64 `json:"limitY"`
	Text   string    `json:"text"`
}

// widths are the bars of a drawing by side, in figure order.
func (d drawing) widths(side string) []float64 {
	var out []float64
	for _, b := range d.Bars {
		if b.Cls == "bar "+side {
			out = append(out, b.Width)
		}
	}
	return out
}

// The page's script runs without an error: it draws the totals and the
// QPs that changed as bars in proportion to the figures, the depth
// marked, every absent figure as n/a with its reason; it sorts and
// filters the table.
func TestHTMLScript(t *testing.T) {
	rep, p := pageOf(t, load(t, "rq-starve"), load(t, "cq-overrun"), ByQPN)
	var r struct {
		Opened    []string           `json:"opened"`
		ShownNone string             `json:"shownNone"`
		ShownAll  string             `json:"shownAll"`
		Cards     []drawing          `json:"cards"`
		Drawn     map[string]drawing `json:"drawn"`
	}
	pagetest.RunScript(t, p.raw, &r)
	if len(r.Opened) != 2 || r.Opened[0] != "qp-card-0" || r.Opened[1] != "qp-card-1" {
		t.Fatalf("opened %v, want both QPs (both changed)", r.Opened)
	}
	if r.ShownNone != "0 of 2 QPs" || r.ShownAll != "2 of 2 QPs" {
		t.Errorf("filter showed %q, then %q", r.ShownNone, r.ShownAll)
	}
	tot := r.Drawn["total-bars"]
	b, a := tot.widths("before"), tot.widths("after")
	if len(b) != len(figureRows) || len(a) != len(figureRows) {
		t.Fatalf("totals: %d bars before, %d after, want %d each", len(b), len(a), len(figureRows))
	}
	tb, ta := rep.Total.Before, rep.Total.After
	// WRs: the larger fills the bar, the other in proportion
	if math.Abs(a[0]-330) > 0.1 || math.Abs(b[0]-330*float64(tb.WRs)/float64(ta.WRs)) > 0.1 {
		t.Errorf("WRs %d -> %d drawn %g -> %g", tb.WRs, ta.WRs, b[0], a[0])
	}
	// signaled: a share, on 0-100%
	if math.Abs(b[3]-3.3**tb.SignaledPct) > 0.1 || math.Abs(a[3]-3.3**ta.SignaledPct) > 0.1 {
		t.Errorf("signaled %g%% -> %g%% drawn %g -> %g", *tb.SignaledPct, *ta.SignaledPct, b[3], a[3])
	}
	// ENOMEM 372 -> 0
	if b[6] != 330 || a[6] != 0 {
		t.Errorf("ENOMEM %d -> %d drawn %g -> %g", tb.ENOMEM, ta.ENOMEM, b[6], a[6])
	}
	if len(tot.LimitY) != 2 || !strings.Contains(tot.Text, "64 of 64") || !strings.Contains(tot.Text, "128 of 128") {
		t.Errorf("totals' peaks: limits %v, text %q", tot.LimitY, tot.Text)
	}
	byID := map[string]drawing{}
	for _, c := range r.Cards {
		byID[c.ID] = c
		for _, bad := range []string{"undefined", "NaN", "null"} {
			if strings.Contains(c.Text, bad) {
				t.Errorf("%s says %q: %s", c.ID, bad, c.Text)
			}
		}
	}
	c0 := byID["qp-card-0"]
	for _, want := range []string{"Diagnoses that appeared: cq_overrun, cq_overrun_risk", "Diagnoses that went: rq_starved",
		"signal interval: every 8 WRs -> every 1 WRs", "Settings inferred before: inline up to 0 B, signal every 8 WR(s)"} {
		if !strings.Contains(c0.Text, want) {
			t.Errorf("QP 0x1c0's card lacks %q:\n%s", want, c0.Text)
		}
	}
	c1 := byID["qp-card-1"]
	if n := len(c1.widths("before")); n != 3 || len(c1.widths("after")) != 0 {
		t.Errorf("QP 0x1c1 (no WR, in one recording): %d bars before, %d after; want WRs, peak, ENOMEM before, none after", n, len(c1.widths("after")))
	}
	for _, want := range []string{"before n/a: no WR was posted", "before n/a: no doorbell was rung", "after n/a: no such QP in the after recording",
		"Settings not inferred before: it posted no WR"} {
		if !strings.Contains(c1.Text, want) {
			t.Errorf("QP 0x1c1's card lacks %q:\n%s", want, c1.Text)
		}
	}
}

// A page of two recordings of no QP: the script runs and draws the
// totals, each figure absent because there is no QP.
func TestHTMLNoQPs(t *testing.T) {
	s := streamtest.New()
	s.Add(&trace.Proc{Header: s.Header(), Comm: "idle"})
	side := sideOf(s)
	_, p := pageOf(t, side, side, ByProcess)
	if !strings.Contains(p.Text, "No QP in either recording.") || !strings.Contains(p.Text, "n/a (no QP in the recording)") {
		t.Errorf("page text: %s", p.Text)
	}
	var r struct {
		Opened []string           `json:"opened"`
		Drawn  map[string]drawing `json:"drawn"`
	}
	pagetest.RunScript(t, p.raw, &r)
	if tot := r.Drawn["total-bars"]; len(r.Opened) != 0 || !strings.Contains(tot.Text, "before n/a: no QP in the recording") {
		t.Errorf("opened %v, totals %q", r.Opened, tot.Text)
	}
}
