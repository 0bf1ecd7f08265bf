package report

import (
	"fmt"
	"io"

	"github.com/sqscope/sqscope/analyzer"
)

var sevLabel = map[string]string{analyzer.SevError: "ERROR", analyzer.SevWarning: "WARNING", analyzer.SevPrediction: "PREDICTION"}

// WriteDiagnoses writes the diagnoses, newest first: for each the QP, when
// it was first and last seen (seconds into the trace) and how often, what
// was found with its numbers, and the fix.
func WriteDiagnoses(w io.Writer, s analyzer.Snapshot) {
	if len(s.Diagnoses) == 0 {
		fmt.Fprintln(w, "diagnoses: none")
		return
	}
	fmt.Fprintf(w, "diagnoses (%d, newest first):\n", len(s.Diagnoses))
	for _, d := range s.Diagnoses {
		fmt.Fprintf(w, "  %s %s: QP %#x (pid %d) ", sevLabel[d.Severity], d.Kind, d.QPNum, d.PID)
		if d.Count > 1 {
			fmt.Fprintf(w, "first at %s, last at %s, %d times", analyzer.RelTime(d.FirstS), analyzer.RelTime(d.LastS), d.Count)
		} else {
			fmt.Fprintf(w, "at %s", analyzer.RelTime(d.FirstS))
		}
		fmt.Fprintf(w, "\n    %s\n    fix: %s\n", d.Message, d.Fix)
	}
	if s.DiagnosesDropped > 0 {
		fmt.Fprintf(w, "  %d more diagnoses not kept (limit %d)\n", s.DiagnosesDropped, analyzer.MaxDiagnoses)
	}
}
