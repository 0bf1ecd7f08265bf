package tui

import (
	"fmt"
	"strings"

	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer"
)

// Alert is one line of the alerts pane: an analyzer diagnosis.
type Alert = analyzer.Diagnosis

func (u *UI) renderAlerts() {
	var b strings.Builder
	for _, a := range u.alertLog {
		color := "orange"
		switch a.Severity {
		case "error":
			color = "red"
		case "prediction":
			color = "yellow"
		}
		// when it started, and how often and until when it came back
		when := ""
		switch {
		case a.Count > 1 && u.snap.FirstNS > 0:
			when = fmt.Sprintf("seen %d times, first +%.1fs, last +%.1fs · ", a.Count, u.since(a.FirstNS), u.since(a.LastNS))
		case a.Count > 1:
			when = fmt.Sprintf("seen %d times · ", a.Count)
		case u.snap.FirstNS > 0:
			when = fmt.Sprintf("at +%.1fs · ", u.since(a.FirstNS))
		}
		if u.width > 0 && u.width < narrowWidth {
			// narrow: the kind names it (the detail has the evidence),
			// and the fix comes before when, so that it is seen whole
			fmt.Fprintf(&b, "[%s]QP %#x (%d) %s %s[-]\n  fix: %s\n", color, a.QPNum, a.QPNum, strings.ToUpper(a.Severity),
				a.Kind, tview.Escape(a.Fix))
			if when != "" {
				fmt.Fprintf(&b, "  %s\n", strings.TrimSuffix(when, " · "))
			}
			continue
		}
		fmt.Fprintf(&b, "[%s]QP %#x (%d) %s: %s[-]\n  %sfix: %s\n", color, a.QPNum, a.QPNum, strings.ToUpper(a.Severity),
			tview.Escape(a.Message), when, tview.Escape(a.Fix))
	}
	if b.Len() == 0 {
		b.WriteString("no alerts")
	} else {
		u.setTitle(u.alerts, " alerts (a: go to newest) ")
	}
	u.setText(u.alerts, b.String())
}

// since is how far into the trace a trace time is, in seconds.
func (u *UI) since(ns uint64) float64 { return float64(ns-min(u.snap.FirstNS, ns)) / 1e9 }

// jumpToAlert selects the QP of the newest alert, clearing a filter that
// hides it.
func (u *UI) jumpToAlert() {
	if len(u.alertLog) == 0 {
		u.message = "no alerts"
		u.renderFooter()
		return
	}
	a := u.alertLog[0]
	// the QP of that number, its latest life if the number was reused
	key, found := qpKey{}, false
	for _, r := range u.rows {
		if r.key.pid == a.PID && r.key.qpNum == a.QPNum && (!found || r.key.gen > key.gen) {
			key, found = r.key, true
		}
	}
	if !found {
		u.message = fmt.Sprintf("QP %#x is no longer shown", a.QPNum)
		u.renderFooter()
		return
	}
	u.mu.Lock()
	u.selected, u.hasSel = key, true
	u.mu.Unlock()
	u.filter = ""
	u.message = fmt.Sprintf("QP %#x: %s", a.QPNum, a.Kind)
	u.render()
}

// Alerts returns the alerts, newest first.
func (u *UI) Alerts() []Alert { return append([]Alert(nil), u.alertLog...) }
