package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// Sample windows on a healthy workload: the windows open and close as
// asked, nothing is diagnosed, the counts in them keep the workload's
// shape (its signaled share), the occupancy they measured is kept
// between them, within the queue's depth, the rates are said to be of
// the traced seconds, and what the probes cost is measured.
func TestSentinelSampleWindows(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	// a window's probes take longer to place and remove where traps are
	// dear: the run stretches with the host, so that two windows fit
	secs := bpftest.Timeout(t, 4*time.Second).Seconds()
	// SENDs inline and READs (never inline) in turn: half the WRs inline,
	// a share no estimate gets right by saying 0 or all
	out, truth := traceSentinelWith(t, "--sample-every 0.4 --sample-for 0.1 --budget 0", fmt.Sprintf("--opcode send,read -s 32 -I 64 -D %.1f -Q 64 -t 128", secs))
	m := out.Sentinel.Sampling
	if m == nil || m.Windows < 2 || m.Traced <= 0 {
		t.Fatalf("sampling %+v: want two windows or more in 4 s at one every 0.4 s", m)
	}
	if out.Sentinel.Hits != 0 || out.Sentinel.Escalations != 0 || len(out.Diagnoses) != 0 {
		t.Errorf("sentinel %+v, diagnoses %+v: a healthy run gets none", out.Sentinel, out.Diagnoses)
	}
	if m.NotMeasured != "" || m.Cost == nil || m.Cost.Traps == 0 || m.Cost.TrapNS == 0 || m.Cost.Share <= 0 || m.Cost.Target <= 0 {
		t.Errorf("cost %+v (not measured: %q): want the windows' traps, their price and a share of the target's CPU", m.Cost, m.NotMeasured)
	}
	for _, a := range out.Probes {
		if (a.Func == "post_send" || a.Func == "poll_cq") && a.How != trace.HowErrorSite && a.How != trace.HowSample {
			t.Errorf("a data-path probe outside the windows: %+v", a)
		}
	}
	if len(out.QPs) != 1 || len(truth) != 1 {
		t.Fatalf("%d QPs traced, %d in the truth: want one", len(out.QPs), len(truth))
	}
	q, w := out.QPs[0], truth[0]
	wrs, sig := q["wrs"].(float64), q["signaled"].(float64)
	if wrs == 0 || wrs >= w["wrs"].(float64) {
		t.Fatalf("%v WRs seen in windows of %v posted: want some, not all", wrs, w["wrs"])
	}
	// one WR in 64 is signaled: in windows too, but for a window's edges
	want := w["signaled"].(float64) / w["wrs"].(float64)
	if got := sig / wrs; math.Abs(got-want) > 0.02*want+2*float64(m.Windows)/wrs {
		t.Errorf("signaled share in windows %.5f, the workload's %.5f", got, want)
	}
	// the run's signaled and inline shares estimated from the windows:
	// within 5% of the workload's, with an interval around the estimate
	sh := m.Shares
	if sh == nil || sh.Windows < 2 || sh.WRs == 0 || sh.NoInterval != "" {
		t.Fatalf("shares %+v: want estimates of two windows or more, with intervals", sh)
	}
	wantInline := 100 * w["inline"].(float64) / w["wrs"].(float64)
	for _, c := range []struct {
		name       string
		est        estimate
		truthShare float64
	}{{"signaled", sh.Signaled, 100 * want}, {"inline", sh.Inline, wantInline}} {
		t.Logf("%s share estimated %.4f%% [%v–%v] over %d windows, the workload's %.4f%%", c.name, c.est.Pct, *c.est.Low, *c.est.High, sh.Windows, c.truthShare)
		if math.Abs(c.est.Pct-c.truthShare) > 0.05*c.truthShare || c.est.Low == nil || c.est.High == nil || *c.est.Low > c.est.Pct || *c.est.High < c.est.Pct {
			t.Errorf("%s share estimated %+v: want within 5%% of the workload's %.4f%%, inside its interval", c.name, c.est, c.truthShare)
		}
	}
	depth := q["max_send_wr"].(float64)
	if o, p := q["outstanding"].(float64), q["peak_outstanding"].(float64); o > depth || p > depth || p == 0 {
		t.Errorf("outstanding %v, peak %v: want within max_send_wr %v, a peak seen", o, p, depth)
	}
	// the last window's, or (a window open at the end) of now
	if _, ok := q["outstanding_sampled_at_ns"]; !ok && q["outstanding_lower_bound"] != false {
		t.Errorf("outstanding %v neither the last window's nor exact: %v", q["outstanding"], q)
	}
	// over the seconds traced: those of the windows with their edges,
	// where probes were being placed or removed; far from the run's 4 s
	r := q["rates"].(map[string]any)
	if span := r["span_ns"].(float64) / 1e9; r["while_traced"] != true || span < m.Traced || span > 0.75*secs {
		t.Errorf("rates %v: want them over the traced seconds (%.2f s without the edges)", r, m.Traced)
	}
}

// A budget makes the windows rarer and keeps their cost to it: a busy
// target's windows, whose probes cost it most of its CPU while open (and
// while they are removed, a grace period or two), come a second or more
// apart instead of every 0.2 s, and sqscope's own account of their cost
// stays within the budget. A budget of 5% lets the first window come
// within seconds; the run stretches with the host, whose slower removals
// take longer to save for.
func TestSentinelBudget(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	const budget = 5.0
	secs := min(60, bpftest.Timeout(t, 8*time.Second).Seconds())
	out, _ := traceSentinelWith(t, fmt.Sprintf("--sample-every 0.2 --sample-for 0.1 --budget %g", budget), fmt.Sprintf("-D %.0f -Q 64 -t 128", secs))
	m := out.Sentinel.Sampling
	if m == nil || m.Windows == 0 || m.Budget != budget {
		t.Fatalf("sampling %+v: want windows under a budget of %g%% in %.0f s", m, budget, secs)
	}
	if m.Cost == nil || m.Cost.Share <= 0 {
		t.Fatalf("cost %+v (not measured: %q): want it measured", m.Cost, m.NotMeasured)
	}
	// a window opens once the budget saved its least cost and spends what
	// the budget saved: past it only where a removal of the probes took
	// longer than the last one
	t.Logf("%d windows in %.0f s, %.3f s traced, their cost %.2f%% of the target's CPU, the next in %.1f s", m.Windows, secs, m.Traced, m.Cost.Share, m.Next)
	if m.Cost.Share > 1.25*budget {
		t.Errorf("the windows cost %.2f%% of the target's CPU: want the budget's %g%% kept", m.Cost.Share, budget)
	}
	// every 0.3 s without the budget (the wait before the next is as
	// long as the budget needs to save for it: short when the last
	// window's removal cost less than it reserved)
	if float64(m.Windows) > secs/0.5 {
		t.Errorf("%d windows in %.0f s (their cost %.2f%% of the target's CPU): want the budget to space them out",
			m.Windows, secs, m.Cost.Share)
	}
}

// Without CAP_SYS_ADMIN (the deploy files grant CAP_BPF and CAP_PERFMON)
// the kernel's BPF statistics cannot be had: the windows' traps are then
// counted from the calls they recorded, and the cost is said to be a
// lower bound; the trap's price is still measured.
func TestSentinelCostWithoutSysAdmin(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	setpriv := bpftest.RequireTool(t, "setpriv", "util-linux")
	cmd := exec.Command(setpriv, "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", sqscopeBin(t),
		"trace", "--json", "--mode", "sentinel", "--sample-every", "0.5", "--sample-for", "0.1", "--budget", "0",
		"--workload", "--", "-D", "2.5", "--rate", "50000")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.String())
	}
	var out sentinelOut
	if err := json.Unmarshal(stdout.Bytes()[bytes.Index(stdout.Bytes(), []byte("\n{"))+1:], &out); err != nil {
		t.Fatalf("trace JSON: %v\n%s", err, stdout.String())
	}
	m := out.Sentinel.Sampling
	if m == nil || m.Windows == 0 || m.Cost == nil || m.Cost.Traps == 0 || m.Cost.TrapNS == 0 || !strings.Contains(m.LowerBound, "BPF run-time statistics") {
		t.Fatalf("sampling %+v (cost %+v): want the windows' traps counted, priced, and said to be a lower bound", m, m.Cost)
	}
}
