package report

import (
	"fmt"
	"io"

	"github.com/sqscope/sqscope/analyzer"
)

// writeSentinel says what the sentinel mode's probes saw and what its
// sample windows traced and cost; nothing in the other modes.
func writeSentinel(w io.Writer, s *analyzer.Sentinel, firstNS uint64) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "  sentinel: %d error site(s) probed", s.SitesProbed)
	if s.FunctionsWithout > 0 {
		fmt.Fprintf(w, " (%d data-path function(s) without one: their failures are not seen)", s.FunctionsWithout)
	}
	fmt.Fprintf(w, "; %d ran (failing calls), %d escalation window(s)", s.Hits, s.Escalations)
	if at := s.FirstEscalationNS; at != 0 && at >= firstNS {
		fmt.Fprintf(w, "; traced in full from %.6f s into the trace (the first escalation window's probes in place)", float64(at-firstNS)/1e9)
	}
	fmt.Fprintln(w)
	if m := s.Sampling; m != nil {
		fmt.Fprintln(w, "  "+SamplingText(m))
	}
}

// SamplingText is one line on the sample windows: how many, what they
// traced, what their probes cost the traced processes (or why that was
// not measured) against the budget.
func SamplingText(m *analyzer.Sampling) string {
	t := fmt.Sprintf("sample windows: %d, %.2f s traced in full (the counts and rates of a QP traced only in windows are of those seconds, which the probes slow)",
		m.Windows, m.TracedSeconds)
	switch c := m.Cost; {
	case c != nil && c.TargetCPUSeconds > 0:
		t += fmt.Sprintf("; their probes cost %.2f%% of the traced processes' own CPU (%.1f ms of %.2f s: %d traps at %d ns, %.1f ms in BPF programs)",
			c.SharePct, c.ProbeCPUSeconds*1e3, c.TargetCPUSeconds, c.Traps, c.TrapNS, float64(c.BPFRunNS)/1e6)
	case c != nil:
		t += fmt.Sprintf("; their probes cost %.1f ms of CPU, the traced processes used none besides", c.ProbeCPUSeconds*1e3)
	case m.NotMeasured != "":
		t += "; their cost not measured: " + m.NotMeasured
	}
	if m.LowerBound != "" && m.Cost != nil {
		t += " (at least: " + m.LowerBound + ")"
	}
	if m.BudgetPct > 0 {
		t += fmt.Sprintf(", budget %g%%", m.BudgetPct)
	}
	if m.Ended {
		t += "; to the trace's end"
	} else {
		t += fmt.Sprintf("; next window in %.1f s", m.NextInSeconds)
	}
	if sh := m.Shares; sh != nil {
		t += fmt.Sprintf("; estimated from the %d WRs of %d window(s): inline %s, signaled %s",
			sh.WRs, sh.Windows, EstimateText(sh.Inline), EstimateText(sh.Signaled))
		if sh.NoInterval != "" {
			t += " (no interval: " + sh.NoInterval + ")"
		}
	}
	return t
}

// EstimateText is an estimated percentage with its 95% interval, when it
// has one.
func EstimateText(e analyzer.Estimate) string {
	if e.Low == nil || e.High == nil {
		return fmt.Sprintf("%.2f%%", e.Pct)
	}
	return fmt.Sprintf("%.2f%% (95%% CI %.2f-%.2f%%)", e.Pct, *e.Low, *e.High)
}
