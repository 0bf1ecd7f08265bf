package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqscope/sqscope/analyzer"
)

// The sentinel mode's own series: its error sites, escalations, sample
// windows and what their probes cost the traced processes.
var (
	siteHitsFam = newFamily("sqscope_sentinel_error_site_hits_total",
		"Failing data-path calls the sentinel mode saw at its providers' error sites.", prometheus.CounterValue)
	escalationsFam = newFamily("sqscope_sentinel_escalations_total",
		"Escalation windows the sentinel mode opened: full probes on a process after a failure.", prometheus.CounterValue)
	windowsFam = newFamily("sqscope_sentinel_sample_windows_total",
		"Sample windows the sentinel mode opened: full probes on every healthy traced process for --sample-for.", prometheus.CounterValue)
	windowSecondsFam = newFamily("sqscope_sentinel_sampled_seconds_total",
		"Time the sample windows traced in full.", prometheus.CounterValue)
	probeCostFam = newFamily("sqscope_probe_cost_ratio",
		"What the sample windows' probes cost the traced processes over their own CPU time, measured (BPF run time and the uprobe traps at their measured price); absent until measured.", prometheus.GaugeValue)
	sharesFam = newFamily("sqscope_sampled_wr_share_ratio",
		"The share of the traced processes' WRs that were inline or signaled, estimated from the WRs the sample windows saw (bound=\"estimate\"), with its 95% confidence interval (bound=\"ci95_low\", \"ci95_high\") once two windows saw WRs; absent before a window saw one.", prometheus.GaugeValue, "share", "bound")
	budgetFam = newFamily("sqscope_probe_budget_ratio",
		"The --budget the sample windows keep to, over the traced processes' own CPU time; absent without one.", prometheus.GaugeValue)
)

// visitSentinel emits the sentinel mode's series, none in the other
// modes.
func visitSentinel(emit emitFunc, s *analyzer.Sentinel) {
	if s == nil {
		return
	}
	emit(siteHitsFam, float64(s.Hits))
	emit(escalationsFam, float64(s.Escalations))
	m := s.Sampling
	if m == nil {
		return
	}
	emit(windowsFam, float64(m.Windows))
	emit(windowSecondsFam, m.TracedSeconds)
	if c := m.Cost; c != nil && c.TargetCPUSeconds > 0 {
		emit(probeCostFam, c.SharePct/100)
	}
	if m.BudgetPct > 0 {
		emit(budgetFam, m.BudgetPct/100)
	}
	if sh := m.Shares; sh != nil {
		for _, e := range []struct {
			share string
			est   analyzer.Estimate
		}{{"inline", sh.Inline}, {"signaled", sh.Signaled}} {
			emit(sharesFam, e.est.Pct/100, e.share, "estimate")
			if e.est.Low != nil && e.est.High != nil {
				emit(sharesFam, *e.est.Low/100, e.share, "ci95_low")
				emit(sharesFam, *e.est.High/100, e.share, "ci95_high")
			}
		}
	}
}
