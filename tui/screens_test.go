package tui

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdamore/tcell/v2"

	"github.com/sqscope/sqscope/analyzer"
)

var updateScreens = flag.Bool("update-screens", false, "rewrite the goldens of the live view's screens (testdata/screens)")

// overflowing is a snapshot with one QP overflowing, its alert and fix.
func overflowing() analyzer.Snapshot {
	s := healthy()
	s.QPs = append(s.QPs,
		qp(0x1c2, 204, 204, analyzer.Counters{WRs: 204, PostCalls: 300, Doorbells: 204, ENOMEMSQFull: 96, LongestUnsignaledRun: 204}),
		qp(0x1c3, 204, 3, analyzer.Counters{WRs: 5000, PostCalls: 5000, Signaled: 300, Doorbells: 5000}))
	s.Diagnoses = []analyzer.Diagnosis{{Kind: "sq_overflow_never_signaled", Severity: "error", PID: 42, QPNum: 0x1c2,
		FirstNS: 1.5e9, LastNS: 1.9e9, Count: 96, Message: "SQ overflow (ENOMEM): 204 of 204 WRs outstanding, no WR signaled since the QP was created",
		Fix: "Set IBV_SEND_SIGNALED on at least one WR per max_send_wr/2 (e.g. every 64th), or create the QP with sq_sig_all=1, and poll the send CQ."}}
	return s
}

// The live view at 80×24 and 200×50: the table, the alert with its whole
// fix, the help overlay with its first and last lines, and the paused
// header with the target, each as its golden shows it.
func TestScreens(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {200, 50}} {
		for _, sc := range []struct {
			name string
			keys string
		}{{"table", ""}, {"alert", "a"}, {"help", "?"}, {"paused", "p"}} {
			name := fmt.Sprintf("%s-%dx%d", sc.name, size[0], size[1])
			t.Run(name, func(t *testing.T) {
				u, app, scr := newTestUI(t, overflowing())
				u.start = u.now() // the header's time, 0s
				u.renderHeader()
				scr.SetSize(size[0], size[1])
				draw(u, scr)
				for _, k := range sc.keys {
					app.key(tcell.KeyRune, k)
				}
				lines := draw(u, scr)
				screen := strings.Join(lines, "\n") + "\n"
				checkScreen(t, sc.name, lines)
				path := filepath.Join("testdata", "screens", name+".txt")
				if *updateScreens {
					os.MkdirAll(filepath.Dir(path), 0o755)
					if err := os.WriteFile(path, []byte(screen), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (-update-screens writes it)", err)
				}
				if string(want) != screen {
					t.Errorf("the screen differs from %s (-update-screens rewrites it):\n%s", path, screen)
				}
			})
		}
	}
}

// checkScreen holds a screen to what must be on it whatever its golden.
func checkScreen(t *testing.T, name string, lines []string) {
	t.Helper()
	all := strings.Join(lines, "\n")
	squeezed := strings.Join(strings.Fields(all), " ")
	switch name {
	case "alert":
		if !strings.Contains(squeezed, "and poll the send CQ.") || !strings.Contains(squeezed, "fix: Set IBV_SEND_SIGNALED") {
			t.Errorf("the alert's fix is cut:\n%s", all)
		}
	case "help":
		for _, want := range []string{"sqscope live view", "↑↓ j/k  select a QP", "the order, filter, group totals and new QPs once a second"} {
			if !strings.Contains(all, want) {
				t.Errorf("the help lacks %q:\n%s", want, all)
			}
		}
	case "paused":
		if !strings.Contains(lines[0], "PAUSED") || !strings.Contains(lines[0], "sqscope workload") {
			t.Errorf("the header lacks PAUSED or the target: %q", lines[0])
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "q quit") && name != "help" {
		t.Errorf("footer: %q", last)
	}
}

// A long command line is cut to a third of the screen, its pid kept, so
// that the figures after it are seen (all of them on a wide screen).
func TestHeaderLongTarget(t *testing.T) {
	for _, width := range []int{80, 160} {
		u, _, scr := newTestUI(t, healthy())
		u.info.Target = "sqscope workload --qps 4 -s 64 -I 64 -Q 16 -t 128 --rate 4000 -D 40 --fault never-signal --fault-after 3 --fault-qp 2"
		u.start = u.now()
		scr.SetSize(width, 40)
		draw(u, scr)
		header := draw(u, scr)[0]
		if !strings.Contains(header, "… (pid 42)") || width >= 120 && !strings.Contains(header, "lost 0") {
			t.Errorf("%d columns: header %q; want the command line cut, its pid and the figures after it", width, header)
		}
	}
}
