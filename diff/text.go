package diff

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes the comparison for a person: each matched QP, then the
// totals, one line per figure, before -> after.
func WriteText(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	how := "process name and QP order"
	if r.Match == ByQPN {
		how = "QP number"
	}
	fmt.Fprintf(ew, "sqscope diff: before %s, after %s; QPs matched by %s\n", r.Before, r.After, how)
	for i := range r.QPs {
		q := &r.QPs[i]
		fmt.Fprintf(ew, "\n%s: %s -> %s\n", q.Match, who(q.Before), who(q.After))
		var b, a *Figures
		if q.Before != nil {
			b = &q.Before.Figures
		}
		if q.After != nil {
			a = &q.After.Figures
		}
		writeFigures(ew, b, a, q.Appeared, q.Went)
		if len(q.Changed) > 0 {
			for _, c := range q.Changed {
				fmt.Fprintf(ew, "  %-26s %s -> %s\n", "setting: "+c.Setting, c.Before, c.After)
			}
		} else if q.Before != nil && q.After != nil {
			writeSettingsSame(ew, q)
		}
	}
	fmt.Fprintf(ew, "\nin total:\n")
	writeFigures(ew, &r.Total.Before, &r.Total.After, r.Total.Appeared, r.Total.Went)
	return ew.err
}

func writeSettingsSame(w io.Writer, q *QP) {
	switch {
	case q.Before.Settings != nil && q.After.Settings != nil:
		fmt.Fprintln(w, "  settings                   unchanged (inline threshold, signal interval, post list, depth)")
	case q.Before.Settings == nil:
		fmt.Fprintf(w, "  settings                   not inferred before: %s\n", q.Before.SettingsNot)
	default:
		fmt.Fprintf(w, "  settings                   not inferred after: %s\n", q.After.SettingsNot)
	}
}

func who(s *QPSide) string {
	if s == nil {
		return "(no such QP)"
	}
	return fmt.Sprintf("QP %#x (pid %d)", s.QPNum, s.PID)
}

func writeFigures(w io.Writer, b, a *Figures, appeared, went []string) {
	row := func(name string, f func(*Figures) string) {
		fmt.Fprintf(w, "  %-26s %s -> %s\n", name, sideText(b, f), sideText(a, f))
	}
	row("WRs", func(f *Figures) string { return fmt.Sprint(f.WRs) })
	row("WRs per doorbell", func(f *Figures) string { return num(f.WRsPerDoorbell, "%.2f") })
	row("inline", func(f *Figures) string { return num(f.InlinePct, "%.1f%%") })
	row("signaled", func(f *Figures) string { return num(f.SignaledPct, "%.1f%%") })
	row("PCIe bytes per WR", func(f *Figures) string { return num(f.PCIeBytesPerWR, "%.1f") })
	row("peak outstanding", func(f *Figures) string {
		switch {
		case f.Peak == nil:
			return "n/a"
		case f.Depth == nil:
			return fmt.Sprintf("%d (depth unknown)", *f.Peak)
		}
		return fmt.Sprintf("%d of %d", *f.Peak, *f.Depth)
	})
	row("ENOMEM", func(f *Figures) string { return fmt.Sprint(f.ENOMEM) })
	if len(appeared) > 0 {
		fmt.Fprintf(w, "  %-26s %s\n", "diagnoses appeared", strings.Join(appeared, ", "))
	}
	if len(went) > 0 {
		fmt.Fprintf(w, "  %-26s %s\n", "diagnoses went", strings.Join(went, ", "))
	}
}

func sideText(f *Figures, fn func(*Figures) string) string {
	if f == nil {
		return "-"
	}
	return fn(f)
}

// num writes a figure, "n/a" when the recording's mode or provider model
// does not give it.
func num(v *float64, format string) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

// errWriter keeps the first write error and writes nothing after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
