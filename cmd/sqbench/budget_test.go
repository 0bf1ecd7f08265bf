package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// run1M is a run of a million post calls of one WR that took cpuNS of
// the thread's CPU time per call over secs seconds.
func run1M(cpuNS, secs float64) wlRun {
	return wlRun{WRs: 1e6, PostCalls: 1e6, CPUSeconds: cpuNS * 1e6 / 1e9, Seconds: secs}
}

// sentinelTrace is a sentinel trace's summary: its windows, their cost
// (share < 0: not measured) and one QP's counts in them.
func sentinelTrace(windows uint64, share float64, seen counts) traceJSON {
	sm := &sampling{Windows: windows, BudgetPct: 1}
	if share >= 0 {
		sm.Cost = &sampleCost{SharePct: share}
	} else {
		sm.NotMeasured = "BPF statistics unavailable"
	}
	tr := traceJSON{QPs: []traceQP{{WRs: seen.WRs, Inline: seen.Inline, Signaled: seen.Signaled, Sentinel: true}}}
	tr.Sentinel = &struct {
		Sampling *sampling `json:"sampling"`
	}{sm}
	return tr
}

// budgetRound3 is three rounds at post_list 1: 150 ns untraced, the
// sentinel 0.5%, 1% and 2% dearer, its windows seeing all WRs inline
// and one in 16 signaled but for the third round's 17 in 256, the WR/s
// it read in memory 0.5% above, 1% below and 4% above the workload's.
func budgetRound3() []budgetRound {
	truth := counts{WRs: 1600, Inline: 1600, Signaled: 100}
	var rounds []budgetRound
	for i, r := range []struct {
		added, share float64
		seen         counts
		readOff      float64 // the WR/s read in memory off the workload's, in %
	}{{0.5, 0.4, counts{256, 256, 16}, 0.5}, {1, 0.6, counts{512, 512, 32}, -1}, {2, 0.9, counts{256, 256, 17}, 4}} {
		t := run1M(150*(1+r.added/100), 60)
		t.Truth = truth
		tr := sentinelTrace(uint64(3+i), r.share, r.seen)
		tr.QPs[0].Memory = &struct {
			WRPerS float64 `json:"wrs_per_s"`
		}{1e6 / 60 * (1 + r.readOff/100)}
		rounds = append(rounds, budgetRound{Untraced: run1M(150, 60+float64(i)), Traced: t, Trace: tr})
	}
	return rounds
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestBudgetRow(t *testing.T) {
	b := budgetRowOf(1, 60, budgetRound3())
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"untraced ns", b.Untraced.Med, 150},
		{"sentinel ns", b.NS.Med, 151.5},
		{"ratio", b.Ratio.Med, 1.01},
		{"ratio max", b.Ratio.Max, 1.02},
		{"added %", b.AddedPct.Med, 1},
		{"added % min", b.AddedPct.Min, 0.5},
		{"windows", b.Windows.Med, 4},
		{"probe share %", b.SharePct.Med, 0.6},
		{"inline sampled %", b.Inline.Sampled.Med, 100},
		{"inline diff %", b.Inline.Diff.Max, 0},
		{"signaled truth %", b.Signaled.Truth.Med, 6.25},
		{"signaled diff max %", b.Signaled.Diff.Max, 6.25}, // 17/256 against 1/16
		{"untraced WR/s", b.UntracedWRs.Max, 1e6 / 60},
		{"WR/s read, diff max %", b.Rate.Diff.Max, 4},
		{"WR/s read, diff min %", b.Rate.Diff.Min, -1},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if b.Ratio.HasCI {
		t.Errorf("a 95%% interval of 3 rounds: %+v", b.Ratio)
	}
	if b.ShareAbsent != "" || b.Inline.Absent != "" || b.Signaled.Absent != "" || b.Rate.Absent != "" {
		t.Errorf("absent: %q, %q, %q, %q: every round measured them", b.ShareAbsent, b.Inline.Absent, b.Signaled.Absent, b.Rate.Absent)
	}
	if ok, far := b.Rate.within(5); !ok || !near(far, 4) {
		t.Errorf("WR/s 4%% off at most: within 5%% %v (farthest %v)", ok, far)
	}
	if ok, _ := b.Rate.within(3); ok {
		t.Error("a round 4% off within 3%")
	}
}

// What a round lacks is said, per round, not replaced by a number.
func TestBudgetRowAbsent(t *testing.T) {
	rounds := budgetRound3()
	rounds[0].Trace = sentinelTrace(2, -1, counts{})
	rounds[1].Trace = traceJSON{}
	b := budgetRowOf(16, 30, rounds)
	if b.SharePct.N != 1 || !strings.Contains(b.ShareAbsent, "round 1: BPF statistics unavailable") || !strings.Contains(b.ShareAbsent, "round 2: no window ended") {
		t.Errorf("share %+v, absent %q: want round 3's only, and why not the others'", b.SharePct, b.ShareAbsent)
	}
	if got, want := b.shareCell("%"), "0.90 [0.90–0.90]% (round 1: BPF statistics unavailable; round 2: no window ended)"; got != want {
		t.Errorf("probe cost %q, want %q", got, want)
	}
	if b.Windows.Min != 0 || b.Windows.Max != 5 {
		t.Errorf("windows %+v: want 0 (no sampling) to 5", b.Windows)
	}
	if got := b.Inline.say(false); !strings.Contains(got, "no WR seen in a window in 2 of 3 rounds") || !strings.HasPrefix(got, "100.00 vs 100.00: +0.00 [+0.00–+0.00]") {
		t.Errorf("inline cell %q", got)
	}
	if ok, _ := b.Inline.within(5); ok {
		t.Error("a share missing from 2 rounds of 3 passes its target")
	}
	none := shareOf(nil, func(n counts) uint64 { return n.Inline }, inlineEst)
	if got := none.say(false); got != "absent: " {
		t.Errorf("no rounds: %q", got)
	}
	if got := b.Rate.say(false); !strings.Contains(got, "round 1: 1 of 1 QPs with no rate read from memory; round 2: no QP listed") {
		t.Errorf("WR/s cell %q: want the rounds without it said", got)
	}
	if ok, _ := b.Rate.within(5); ok {
		t.Error("a rate missing from 2 rounds of 3 passes its target")
	}
	rounds[2].Traced.Truth.Inline = 0
	if got := shareOf(rounds[2:], func(n counts) uint64 { return n.Inline }, inlineEst).say(false); got != "absent: none in the truth in 1 of 1 rounds" {
		t.Errorf("no inline WR in the truth: %q", got)
	}
}

// The section's table, summary and verdicts: the ratio with its
// interval, the added CPU, sqscope's own account, the shares against the
// truth, and the WR/s read in memory against the workload's.
func TestBudgetMarkdown(t *testing.T) {
	r := &report{budget: []budgetRow{budgetRowOf(1, 60, budgetRound3())}}
	md := r.markdown(&config{})
	for _, want := range []string{
		"## The sentinel's sample windows under --budget 1",
		"60 s runs, median [min–max] of 3 rounds.",
		"| 1 | untraced | 150 [150–150] |",
		"| 1 | sentinel --budget 1 | 152 [151–153] | 1.010 [1.005–1.020]; 95% CI none (3 rounds; 95% needs 6) | +1.00 [+0.50–+2.00] | 4 [3–5] | 0.60 [0.40–0.90] | 100.00 vs 100.00: +0.00 [+0.00–+0.00] | 6.25 vs 6.25: +0.00 [+0.00–+6.25] | 17k [17k–17k] |",
		"| 17k [16k–17k] vs 17k [17k–17k]: +0.50 [-1.00–+4.00] |",
		"post_list 1, sentinel --budget 1 over 60 s: ratio to untraced | 1.010",
		"post_list 1, sentinel --budget 1 over 60 s: added CPU ≤ 1.5% of the untraced's: met (+1.00 [+0.50–+2.00]% of 3 rounds; sqscope measured 0.60 [0.40–0.90]%)",
		"sampled inline share within ±5% of the truth's in every round: met",
		"sampled signaled share within ±5% of the truth's in every round: NOT met (sampled 6.25% vs the truth's 6.25%, a difference of +0.00 [+0.00–+6.25]% of the truth's; the farthest round 6.25%; sqscope gave no estimate (sentinel.sampling.shares) in any round: the share of the WRs its QPs counted in windows)",
		"WR/s within ±5% of the truth's in every round: met (read 17k [16k–17k] WR/s vs the workload's 17k [17k–17k], a difference of +0.50 [-1.00–+4.00]% of the workload's; the farthest round 4.00%; a rate of counts read",
		"- **sentinel --budget 1**:",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the markdown lacks %q", want)
		}
	}
	r.budget[0].AddedPct = summary{Med: 1.6, Min: 1.2, Max: 2, N: 3}
	wantVerdicts(t, r.verdicts(), "added CPU ≤ 1.5% of the untraced's: NOT met (+1.60 [+1.20–+2.00]%")
	if txt := r.text(); !strings.Contains(txt, "== the sentinel's sample windows under --budget 1, 60 s runs (median [min–max] of 3 rounds)") ||
		!strings.Contains(txt, "== summary\nfigure") || !strings.Contains(txt, "post_list 1, sentinel --budget 1 over 60 s: thread CPU time per post call") {
		t.Errorf("the text lacks the section:\n%s", txt)
	}
}

// The overhead table's ratio to untraced, and the sentinel's WRs said
// sampled, never missing.
func TestOverheadToUntraced(t *testing.T) {
	un := []wlRun{run1M(150, 1), run1M(160, 1)}
	floor := []wlRun{run1M(3000, 1), run1M(3200, 1)}
	se := []wlRun{run1M(153, 1), run1M(160, 1)}
	for i := range se {
		se[i].Traced, se[i].Sampled, se[i].TracedWR = true, true, 250000
	}
	ev := []wlRun{run1M(3600, 1), run1M(3840, 1)}
	for i := range ev {
		ev[i].Traced, ev[i].TracedWR = true, 1e6
	}
	r := &report{overhead: []ovRow{ovRowOf(1, untraced, un, un, floor), ovRowOf(1, floorVariant, floor, un, floor),
		ovRowOf(1, sqscopeVariant("sentinel"), se, un, floor), ovRowOf(1, sqscopeVariant("events"), ev, un, floor)}}
	se1, _ := r.row(1, "sqscope sentinel")
	if !near(se1.RatioU.Med, 1.01) || !near(se1.Ratio.Med, (153.0/3000+160.0/3200)/2) {
		t.Errorf("sentinel ratios %+v to untraced, %+v to the floor", se1.RatioU, se1.Ratio)
	}
	if got := se1.seen(); got != "sampled: 25.0% in windows" {
		t.Errorf("sentinel's WRs seen: %q", got)
	}
	md := r.overheadTable().markdown()
	for _, want := range []string{"| ratio to untraced [min–max]; 95% CI of the median |",
		"| 1 | untraced | 155 [150–160] | 0.050 [0.050–0.050]; 95% CI none (2 rounds; 95% needs 6) |  |",
		"| 1 | sqscope events | 3720 [3600–3840] | 1.200 [1.200–1.200]; 95% CI none (2 rounds; 95% needs 6) | 24.000 [24.000–24.000]; 95% CI none (2 rounds; 95% needs 6) |",
		"| sampled: 25.0% in windows |", "| yes |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the overhead table lacks %q:\n%s", want, md)
		}
	}
	sum := r.summaryTable().markdown()
	for _, want := range []string{"| post_list 1, sqscope sentinel: ratio to untraced | 1.010 [1.000–1.020]", "| post_list 1, floor: ratio to untraced | 20.000"} {
		if !strings.Contains(sum, want) {
			t.Errorf("the summary lacks %q:\n%s", want, sum)
		}
	}
	wantVerdicts(t, r.verdicts(), "post_list 1: sentinel on a healthy workload ≤ 1.05× untraced: met (1.010×")
}

// The truth's inline and signaled WRs are read from --json-out, and the
// sentinel's windows from the trace's summary.
func TestReadBudgetJSON(t *testing.T) {
	js := filepath.Join(t.TempDir(), "wl.json")
	if err := os.WriteFile(js, []byte(`[{"wrs": 1600, "inline": 1600, "signaled": 100, "app": {"wrs": 1600, "post_calls": 1600, "seconds": 2, "cpu_seconds": 1.5}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := readWorkloadJSON(js)
	if err != nil || w.Truth != (counts{1600, 1600, 100}) || w.wrsPerSec() != 800 {
		t.Errorf("readWorkloadJSON = %+v, %v", w, err)
	}
	tr, err := parseTraceJSON([]byte(`QP 0x1c0: 7 WRs
{"qps": [{"wrs": 32, "inline": 32, "signaled": 2, "sentinel": true, "rates": {"while_traced": true}}],
 "sentinel": {"sampling": {"windows": 3, "traced_s": 0.6, "probe_cost": {"share_pct": 0.8, "traps": 64}, "budget_pct": 1}}}`))
	if err != nil || len(tr.QPs) != 1 || !tr.QPs[0].Sentinel || !tr.QPs[0].Rates.WhileTraced || tr.QPs[0].Signaled != 2 ||
		tr.Sentinel == nil || tr.Sentinel.Sampling.Windows != 3 || tr.Sentinel.Sampling.Cost.SharePct != 0.8 {
		t.Errorf("parseTraceJSON = %+v, %v", tr, err)
	}
}

// Bad section names and budget flags are one-line errors before
// anything runs.
func TestBudgetFlags(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown section", []string{"-only", "budgte"}, `-only "budgte": want one of overhead, breakdown, budget, qpcache, loss, go`},
		{"no seconds", []string{"-budget-secs", "0"}, "-budget-secs 0, -budget-rounds 3: want at least 1 each"},
		{"no rounds", []string{"-budget-rounds", "0"}, "-budget-secs 60, -budget-rounds 0: want at least 1 each"},
		{"bad list", []string{"-budget-lists", "1,x"}, `want post list lengths from 1 to 16, comma-separated, got "1,x"`},
		{"list too long", []string{"-budget-lists", "32"}, `got "32"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(context.Background(), c.args, &bytes.Buffer{}, &stderr)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("run %v: %v, want one line with %q", c.args, err, c.want)
			}
		})
	}
	if l, err := parseLists("1, 16"); err != nil || len(l) != 2 || l[1] != 16 {
		t.Errorf("parseLists = %v, %v", l, err)
	}
}

func inlineEst(s *sampling) *shareEstimate { return &s.Shares.Inline }

// sqscope's own estimate, where it gives one, is the sampled share, and
// the rounds whose interval held the truth's are counted.
func TestShareEstimates(t *testing.T) {
	rounds := budgetRound3()
	lo, hi := 6.0, 6.5
	for i := range rounds {
		sm := rounds[i].Trace.Sentinel.Sampling
		sm.Shares = &struct {
			Inline   shareEstimate `json:"inline_pct"`
			Signaled shareEstimate `json:"signaled_pct"`
		}{Signaled: shareEstimate{Pct: 6.2}}
		if i > 0 {
			sm.Shares.Signaled.Low, sm.Shares.Signaled.High = &lo, &hi
		}
	}
	hi2 := 6.2
	rounds[2].Trace.Sentinel.Sampling.Shares.Signaled.High = &hi2 // below the truth's 6.25
	c := shareOf(rounds, func(n counts) uint64 { return n.Signaled }, func(s *sampling) *shareEstimate { return &s.Shares.Signaled })
	if c.Estimated != 3 || c.Intervals != 2 || c.Inside != 1 || !near(c.Sampled.Med, 6.2) {
		t.Errorf("%+v: want 3 estimates of 6.2%%, 2 with an interval, 1 holding the truth", c)
	}
	if got, want := c.intervalSay(), "sqscope's 95% interval held the truth's in 1 of 2 round(s) that had one"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
