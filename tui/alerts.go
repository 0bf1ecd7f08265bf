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
		at := ""
		if u.snap.FirstNS > 0 && a.LastNS >= u.snap.FirstNS {
			at = fmt.Sprintf("+%.1fs ", float64(a.LastNS-u.snap.FirstNS)/1e9)
		}
		count := ""
		if a.Count > 1 {
			count = fmt.Sprintf(" (x%d)", a.Count)
		}
		fmt.Fprintf(&b, "[%s]%sQP %#x %s%s: %s[-]\n  fix: %s\n", color, at, a.QPNum, strings.ToUpper(a.Severity), count,
			tview.Escape(a.Message), tview.Escape(a.Fix))
	}
	if b.Len() == 0 {
		b.WriteString("no alerts")
	}
	u.alerts.SetText(b.String())
}

// Alerts returns the alerts, newest first.
func (u *UI) Alerts() []Alert { return append([]Alert(nil), u.alertLog...) }
