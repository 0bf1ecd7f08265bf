package tui

import (
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/sqscope/sqscope/analyzer"
)

// countersSnap has a QP traced in counters mode (0x1c0: totals only) next
// to one traced in events mode (0x1c1).
func countersSnap(enomem uint64) analyzer.Snapshot {
	c := qp(0x1c0, 128, 0, analyzer.Counters{WRs: 20000, PostCalls: 20000, Inline: 20000, Signaled: 200,
		Doorbells: 20000, ENOMEM: enomem, Polls: 900, EmptyPolls: 700})
	c.CountersOnly = true
	c.PCIe.CQEWritesSaved = 19800
	e := qp(0x1c1, 128, 64, analyzer.Counters{WRs: 800, PostCalls: 800, Signaled: 8, Doorbells: 800, PeakOutstanding: 100})
	return analyzer.Snapshot{Events: 10, FirstNS: 1e9, LastNS: 2e9, QPs: []analyzer.QP{c, e}}
}

// cellAt returns the text of the table cell that starts at column x of
// line y, up to the next blank, and its foreground colour.
func cellAt(scr tcell.SimulationScreen, y, x int) (string, tcell.Color) {
	var b strings.Builder
	w, _ := scr.Size()
	_, style, _ := scr.Get(x, y)
	fg, _, _ := style.Decompose()
	for ; x < w; x++ {
		s, _, _ := scr.Get(x, y)
		if s == " " || s == "" {
			break
		}
		b.WriteString(s)
	}
	return b.String(), fg
}

// What counters mode does not measure is n/a in the table, never 0 or an
// empty bar, and the detail says once why.
func TestCountersModeCells(t *testing.T) {
	tests := []struct {
		name   string
		enomem uint64
		status string
		color  tcell.Color
	}{
		{"no failed post", 0, "n/a", unmeasuredColor},
		{"ENOMEM counted, cause unknown", 3, "ENOMEM", tcell.ColorRed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, _, scr := newTestUI(t, countersSnap(tc.enomem))
			// the selected row is drawn reversed: select the other one to
			// read the counters QP's colours
			u.selected, u.hasSel = qpKey{42, 0x1c1, 0}, true
			u.render()
			lines := draw(u, scr)
			hy, header := find(lines, "OCCUPANCY")
			if hy < 0 {
				t.Fatalf("no table header:\n%s", strings.Join(lines, "\n"))
			}
			col := func(name string) int {
				x := strings.Index(header, name)
				if x < 0 {
					t.Fatalf("no column %s in %q", name, header)
				}
				return len([]rune(header[:x]))
			}
			cy, _ := find(lines, "0x1c0 ")
			ey, _ := find(lines, "0x1c1 ")
			for _, c := range []struct {
				col, want string
				color     tcell.Color
			}{
				{"OCCUPANCY", "n/a", unmeasuredColor},
				{"PEAK", "n/a", unmeasuredColor},
				{"DMA", "n/a", unmeasuredColor},
				{"STATUS", tc.status, tc.color},
				{"WR/DB", "1.0", plain},
				{"SIG", "100", plain},
				{"INLINE%", "100", plain},
			} {
				got, fg := cellAt(scr, cy, col(c.col))
				if got != c.want || fg != c.color {
					t.Errorf("counters QP, %s: %q in %v, want %q in %v", c.col, got, fg, c.want, c.color)
				}
			}
			// the events-mode QP beside it keeps its figures
			for _, c := range []struct{ col, want string }{{"PEAK", "100"}, {"DMA", "0"}, {"STATUS", "OK"}} {
				if got, _ := cellAt(scr, ey, col(c.col)); got != c.want {
					t.Errorf("events QP, %s: %q, want %q", c.col, got, c.want)
				}
			}
			if got, _ := cellAt(scr, ey, col("OCCUPANCY")); !strings.HasPrefix(got, "████") {
				t.Errorf("events QP occupancy %q, want a bar", got)
			}
			u.selected = qpKey{42, 0x1c0, 0}
			u.render()
			screen := strings.Join(draw(u, scr), "\n")
			if n := strings.Count(screen, "counters mode: totals kept in the kernel"); n != 1 {
				t.Errorf("the reason is given %d times, want once:\n%s", n, screen)
			}
			for _, bad := range []string{"longest unsignaled run", "occupancy, last", "BlueFlame)", "CQEs polled", "WQE fetches 0"} {
				if strings.Contains(screen, bad) {
					t.Errorf("detail of a counters QP shows %q:\n%s", bad, screen)
				}
			}
			for _, want := range []string{"doorbells 0   CQE writes 19800 (unsignaled)", "1 in 100.0 WRs signaled",
				"WRs 20000  posts 20000  inline 20000  polls 900 (empty 700)"} {
				if !strings.Contains(screen, want) {
					t.Errorf("detail lacks %q:\n%s", want, screen)
				}
			}
		})
	}
}

// The alert keeps when it started: a diagnosis seen again later moves its
// last time and count, never its first.
func TestAlertKeepsFirstTime(t *testing.T) {
	s := healthy()
	d := analyzer.Diagnosis{Kind: "sq_overflow_never_signaled", Severity: "error", PID: 42, QPNum: 0x1c1,
		FirstNS: 1.5e9, LastNS: 1.5e9, Count: 1, Message: "SQ overflow (ENOMEM)", Fix: "signal"}
	s.Diagnoses = []analyzer.Diagnosis{d}
	u, _, scr := newTestUI(t, s)
	if _, l := find(draw(u, scr), "at +0.5s · fix: signal"); l == "" {
		t.Fatalf("first alert does not say when:\n%s", strings.Join(draw(u, scr), "\n"))
	}
	d.LastNS, d.Count = 3.25e9, 40
	s.Diagnoses, s.LastNS = []analyzer.Diagnosis{d}, 3.5e9
	u.Apply(s, u.now())
	if _, l := find(draw(u, scr), "seen 40 times, first +0.5s, last +2.2s · fix: signal"); l == "" {
		t.Fatalf("repeated alert lost its first time:\n%s", strings.Join(draw(u, scr), "\n"))
	}
}
