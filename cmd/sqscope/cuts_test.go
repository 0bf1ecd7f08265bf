package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// cutReport is what report and report --json say about the WR lists and SGE
// lists the tracer's bounds cut.
type cutReport struct {
	text string
	QPs  []map[string]any `json:"qps"`
	// Total holds the cut counts of every QP.
	Total map[string]any `json:"total"`
}

// recordAndReport records `sqscope record -o FILE ARGS...` and reads the
// recording back with report and report --json.
func recordAndReport(t *testing.T, args ...string) cutReport {
	t.Helper()
	bin := sqscopeBin(t)
	rec := filepath.Join(t.TempDir(), "run.sqscope")
	args = append([]string{"record", "-o", rec}, args...)
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("sqscope %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	text, err := exec.Command(bin, "report", rec).Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	r := cutReport{text: string(text)}
	reportInto(t, rec, &r)
	return r
}

// cutFields are the report's JSON names of what was cut.
var cutFields = []string{"wrs_sge_cut", "sges_not_summed", "posts_walk_capped"}

// cutModes are the tracing modes, both of which report the cuts: per call
// in events, in the kernel's totals in counters.
var cutModes = []string{"events", "counters"}

// checkCuts requires the cut counts of a QP's JSON object (or the total)
// to be want, and absent where want has none.
func checkCuts(t *testing.T, what string, got map[string]any, want map[string]float64) {
	t.Helper()
	for _, f := range cutFields {
		v, ok := got[f]
		switch w, cut := want[f]; {
		case !cut && ok:
			t.Errorf("%s: %s %v, want it left out (nothing cut)", what, f, v)
		case cut && v != w:
			t.Errorf("%s: %s %v, want %v", what, f, v, w)
		}
	}
}

// The built-in workload posts lists longer than the tracer walks (1024
// WRs): in either mode, the report says how many calls were cut and that
// the WR counts are lower bounds, and says nothing of cuts for lists
// within the bound.
func TestReportCutWorkloadLists(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	tests := []struct {
		name   string
		list   int
		capped float64
	}{
		{"lists of 1500", 1500, 4},
		{"lists of 1024, the bound", 1024, 0},
	}
	for _, mode := range cutModes {
		for _, tc := range tests {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				truthFile := filepath.Join(t.TempDir(), "truth.json")
				n := 4 * tc.list
				r := recordAndReport(t, "--mode", mode, "--workload", "--", "-s", "64", "-l", fmt.Sprint(tc.list),
					"-t", "2048", "-Q", fmt.Sprint(tc.list), "-n", fmt.Sprint(n), "--sim-deterministic",
					"--json-out", truthFile)
				truth := readTruth(t, truthFile)
				if len(r.QPs) != 1 || len(truth) != 1 || truth[0]["wrs"] != float64(n) {
					t.Fatalf("QPs: report %d, truth %v", len(r.QPs), truth)
				}
				q := r.QPs[0]
				want := map[string]float64{}
				line := "4 post calls with lists past the walk bound (WRs past it not seen: WR counts are lower bounds)"
				if tc.capped > 0 {
					want["posts_walk_capped"] = tc.capped
					// each call seen up to the walk bound
					if q["wrs"] != float64(4*1024) {
						t.Errorf("wrs %v, want %d (the walk bound per call)", q["wrs"], 4*1024)
					}
				} else if q["wrs"] != float64(n) {
					t.Errorf("wrs %v, truth %d", q["wrs"], n)
				}
				checkCuts(t, "QP", q, want)
				checkCuts(t, "total", r.Total, want)
				if got := strings.Contains(r.text, line); got != (tc.capped > 0) {
					t.Errorf("report text has the cut line %v, want %v:\n%s", got, tc.capped > 0, r.text)
				}
				if tc.capped == 0 && strings.Contains(r.text, "cut by the tracer's bounds") {
					t.Errorf("report text says something was cut:\n%s", r.text)
				}
			})
		}
	}
}

// The workload has no flag for SGEs per WR: the probe tests' target posts
// WRs with more SGEs than the tracer sums (16), through ibv_post_send and
// the wr API, and one list past the walk bound. Both modes report the same
// cut lines and counts.
func TestReportCutSGELists(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	target := buildProbeTarget(t)
	for _, mode := range cutModes {
		t.Run(mode, func(t *testing.T) {
			r := recordAndReport(t, "--mode", mode, "-c", target+" cut")
			if len(r.QPs) != 2 {
				t.Fatalf("%d QPs in the report, want 2", len(r.QPs))
			}
			// QP 0x100: lists of 1500 and 1024 WRs of one SGE, 3 WRs of 20 SGEs;
			// QP 0x101: a wr batch with an SGE list of 20 and an inline list of 18
			checkCuts(t, "QP 0x100", r.QPs[0], map[string]float64{"wrs_sge_cut": 3, "sges_not_summed": 12, "posts_walk_capped": 1})
			checkCuts(t, "QP 0x101", r.QPs[1], map[string]float64{"wrs_sge_cut": 2, "sges_not_summed": 6})
			checkCuts(t, "total", r.Total, map[string]float64{"wrs_sge_cut": 5, "sges_not_summed": 18, "posts_walk_capped": 1})
			for _, line := range []string{
				"  cut by the tracer's bounds: 3 WRs with SGEs past the SGE bound (12 SGEs not summed: byte counts are lower bounds), " +
					"1 post calls with lists past the walk bound (WRs past it not seen: WR counts are lower bounds)\n",
				"  cut by the tracer's bounds: 2 WRs with SGEs past the SGE bound (6 SGEs not summed: byte counts are lower bounds)\n",
			} {
				if !strings.Contains(r.text, line) {
					t.Errorf("report text lacks %q:\n%s", line, r.text)
				}
			}
		})
	}
}

// buildProbeTarget compiles the probe tests' target (probe/testdata/target.c).
func buildProbeTarget(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
			t.Fatal("no C compiler (cc) to build the probe tests' target")
		}
		t.Skip("no C compiler (cc) to build the probe tests' target")
	}
	bin := filepath.Join(t.TempDir(), "target")
	src := filepath.Join("..", "..", "probe", "testdata", "target.c")
	provider := filepath.Join("..", "..", "probe", "testdata", "target_provider.c")
	if out, err := exec.Command(cc, "-O2", "-g", "-Wall", "-pthread", "-o", bin, src, provider, "-libverbs").CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", src, err, out)
	}
	return bin
}
