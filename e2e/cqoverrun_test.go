package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tracedRxeCQOverrun records a send CQ smaller than the signaled WRs its
// QP keeps outstanding, polled late (the workload's cq-overrun fault): rxe
// drops the completions due on the full CQ and the QP goes on (the
// workload polls fewer completions than it signaled). The report names
// the overrun with rxe's behaviour, the completions that never came, not
// mlx5's CQ in error.
func tracedRxeCQOverrun(name, args string) guestCmd {
	wl := "-d rxe0 -x 1 " + args + " --json-out " + truthFile
	sh := "sqscope record -o run.sqscope --workload -- " + wl +
		" && sqscope report --json run.sqscope && sqscope report run.sqscope > report.txt"
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 40 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			s, truth := readTraced(t, r, sh)
			w := droppedQP(t, truth)
			var kinds []string
			for _, d := range s.Diagnoses {
				if d.QPNum != w.QPNum {
					t.Errorf("diagnosis %s for QP %#x, not the workload's sending QP: %s", d.Kind, d.QPNum, d.Message)
					continue
				}
				kinds = append(kinds, d.Kind)
				if d.Kind != "cq_overrun" {
					continue
				}
				if sk := d.Evidence["completions_skipped"]; sk == 0 || sk > w.Signaled-w.CQEsPolled {
					t.Errorf("cq_overrun: %d completions skipped, the workload lost %d: %v", sk, w.Signaled-w.CQEsPolled, d.Evidence)
				}
				if !strings.Contains(d.Message, "dropped and the QPs went on") || strings.Contains(d.Message, "error state") {
					t.Errorf("cq_overrun names mlx5's behaviour, not rxe's: %s", d.Message)
				}
				t.Logf("%s: %s", d.Kind, d.Message)
			}
			slices.Sort(kinds)
			if strings.Join(kinds, " ") != "cq_overrun cq_overrun_risk" {
				t.Errorf("diagnoses %v, want cq_overrun and cq_overrun_risk", kinds)
			}
			b, err := os.ReadFile(filepath.Join(r.dir, "report.txt"))
			if err != nil || !strings.Contains(string(b), "ERROR cq_overrun") {
				t.Errorf("the text report (%v) does not give the overrun:\n%s", err, b)
			}
			t.Logf("QP %#x: %d signaled, %d completions polled (the workload's count)", w.QPNum, w.Signaled, w.CQEsPolled)
		},
	}
}

// sentinelRxeCQOverrun runs the same overrun under the sentinel with no
// sample window: no post fails, so no error site sees it; the reads of
// the send CQ's ring find it full, which traces the process in full (an
// escalation window), whose completions show the ones dropped.
func sentinelRxeCQOverrun(name, args string) guestCmd {
	wl := "-d rxe0 -x 1 " + args + " --json-out " + truthFile
	sh := "sqscope trace --json --mode sentinel --sample-every 0 --budget 0 --workload -- " + wl
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 60 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			s, truth := readTraced(t, r, sh)
			w := droppedQP(t, truth)
			ss := sentinelOf(t, r)
			g := s.findQP(uint64(w.QPNum))
			if g == nil {
				t.Fatalf("QP %#x not in the trace", w.QPNum)
			}
			m, _ := g["memory"].(map[string]any)
			if num(m, "send_cq_full_reads") == 0 || num(m, "send_cq_capacity") == 0 {
				t.Errorf("QP %#x: its send CQ never read full: memory %v", w.QPNum, m)
			}
			if ss.Hits != 0 || ss.Escalations == 0 {
				t.Errorf("sentinel %+v: want no error site run and an escalation from the full CQ read", *ss)
			}
			var kinds []string
			for _, d := range s.Diagnoses {
				kinds = append(kinds, d.Kind)
				t.Logf("%s (QP %#x): %s", d.Kind, d.QPNum, d.Message)
			}
			if !slices.Contains(kinds, "cq_overrun") {
				t.Errorf("diagnoses %v: want cq_overrun, from the escalation window's completions", kinds)
			}
			t.Logf("QP %#x: %d signaled, %d polled; memory %v; sentinel %+v", w.QPNum, w.Signaled, w.CQEsPolled, m, *ss)
		},
	}
}

// droppedQP is the one sending QP of the truth, which must have polled
// fewer completions than it signaled (rxe dropped the rest).
func droppedQP(t *testing.T, truth workloadTruth) wlQP {
	t.Helper()
	if len(truth.qps) != 1 {
		t.Fatalf("%d sending QPs in the truth, want 1", len(truth.qps))
	}
	w := truth.qps[0]
	if w.CQEsPolled >= w.Signaled {
		t.Fatalf("QP %#x: %d completions polled of %d signaled: rxe dropped none\ntruth: %s", w.QPNum, w.CQEsPolled, w.Signaled, truth.raw[w.QPNum])
	}
	return w
}
