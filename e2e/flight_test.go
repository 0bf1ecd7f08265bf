package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// flightRxe records an rxe overflow with the flight recorder: nothing is
// written until the first ENOMEM, then one file holding the seconds
// before it and after, which report reads as any recording and
// diagnoses with rxe's cause.
func flightRxe(name, args string) guestCmd {
	wl := "-d rxe0 -x 1 " + args + " --json-out " + truthFile
	// the after window outlasts the workload, however slow the guest: one
	// file holds the overflow to the end
	sh := "sqscope record --flight 10s --after 60s --trigger enomem --max-files 2 -o flight --workload -- " + wl +
		" && set -- flight/sqscope-flight-*.sqscope && echo \"files: $#\" >&2 && sqscope report --json \"$1\" && sqscope report \"$1\" > report.txt"
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 60 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			s, truth := readTraced(t, r, sh)
			if !strings.Contains(r.stderr, "files: 1\n") {
				t.Errorf("want one flight recording:\n%s", tail(r.stderr, 20))
			}
			b, err := os.ReadFile(filepath.Join(r.dir, "report.txt"))
			if err != nil {
				t.Fatalf("the text report: %v", err)
			}
			if text := string(b); !strings.Contains(text, "flight recording: triggered by enomem") {
				t.Errorf("the report does not say what triggered the file:\n%s", tail(text, 30))
			}
			if len(truth.qps) == 0 {
				t.Fatalf("the workload's truth lists no QP:\n%s", tail(r.stderr, 20))
			}
			for _, w := range truth.qps {
				t.Logf("QP %#x: %d SQ-full refusals, %v of them in the file", w.QPNum, w.ENOMEMSQFull, excerpt(s.findQP(uint64(w.QPNum)), "enomem_sq_full"))
				if w.ENOMEMSQFull == 0 {
					t.Fatalf("QP %#x: the workload saw no SQ-full ENOMEM: the fault did not overflow rxe's send queue", w.QPNum)
				}
				g := s.findQP(uint64(w.QPNum))
				if g == nil || num(g, "enomem_sq_full") == 0 || num(g, "enomem_sq_full") > w.ENOMEMSQFull {
					t.Errorf("QP %#x: the file holds %s; the workload saw %d SQ-full refusals: want some of them, no more", w.QPNum, excerpt(g, "enomem_sq_full"), w.ENOMEMSQFull)
				}
				var kinds []string
				for _, d := range s.Diagnoses {
					if d.QPNum == w.QPNum {
						kinds = append(kinds, d.Kind)
					}
				}
				if !slices.Contains(kinds, "sq_overflow_rnr_retry") {
					t.Errorf("QP %#x: diagnoses %v, want rxe's cause, sq_overflow_rnr_retry", w.QPNum, kinds)
				}
			}
		},
	}
}
