package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// tracedSentinel traces a workload on rxe0 in the sentinel mode: the error
// sites are found in the stripped librxe and verified by this kernel,
// every refusal the workload saw is counted once with rxe's cause (a full
// ring: SQ full), and the overflow is diagnosed on its QP at the error
// site; a healthy run places no data-path probe and records no post.
func tracedSentinel(name, args string, overflows bool) guestCmd {
	wl := "-d rxe0 -x 1 " + args + " --json-out " + truthFile
	sh := "sqscope trace --json --mode sentinel --workload -- " + wl
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 60 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			s, truth := readTraced(t, r, sh)
			ss := sentinelOf(t, r)
			t.Logf("sentinel: %+v", *ss)
			for _, p := range s.Probes {
				if p.How == "error site" {
					t.Logf("error site %s %s+%#x %s", p.Func, p.Path, p.Offset, p.Err)
				}
			}
			if ss.Sites == 0 || ss.Without != 0 {
				t.Fatalf("%d error sites probed, %d data-path functions without one: want librxe's post_send's sites", ss.Sites, ss.Without)
			}
			for _, w := range truth.qps {
				g := s.findQP(uint64(w.QPNum))
				checkRingReads(t, g, w, overflows)
				var kinds []string
				for _, d := range s.Diagnoses {
					if d.QPNum == w.QPNum {
						kinds = append(kinds, d.Kind)
						t.Logf("diagnosis %s (%d times) for QP %#x: %s\n  fix: %s", d.Kind, d.Count, d.QPNum, d.Message, d.Fix)
					}
				}
				if !overflows {
					if w.ENOMEMSQFull != 0 || len(kinds) != 0 || ss.Hits != 0 || ss.Escalations != 0 || (g != nil && num(g, "post_calls") != 0) {
						t.Errorf("QP %#x: %d refusals, diagnoses %v, sentinel %+v, posts recorded %v: want a quiet run with nothing traced",
							w.QPNum, w.ENOMEMSQFull, kinds, *ss, g)
					}
					continue
				}
				if w.ENOMEMSQFull == 0 {
					t.Fatalf("QP %#x: the workload saw no SQ-full ENOMEM: the fault did not overflow rxe's send queue", w.QPNum)
				}
				if g == nil || num(g, "enomem_sq_full") != w.ENOMEMSQFull || num(g, "enomem") != w.App.ENOMEM {
					t.Errorf("QP %#x: trace %s; the workload saw %d SQ-full refusals, %d ENOMEM returned", w.QPNum, excerpt(g, "enomem_sq_full", "enomem"),
						w.ENOMEMSQFull, w.App.ENOMEM)
				}
				// rxe's cause needs no history of the queue: named at the
				// error site from the refused SEND, and by the window after
				if !slices.Contains(kinds, "sq_overflow_rnr_retry") || slices.Contains(kinds, "sq_overflow_at_error_site") || ss.Escalations == 0 {
					t.Errorf("QP %#x: diagnoses %v, %d escalations: want rxe's cause (sq_overflow_rnr_retry) from the error site on and a window after it", w.QPNum, kinds, ss.Escalations)
				}
			}
		},
	}
}

// sentinelSummary is the sentinel's part of a trace's JSON.
type sentinelSummary struct {
	Sites       int    `json:"sites_probed"`
	Without     int    `json:"functions_without_sites"`
	Hits        uint64 `json:"error_site_hits"`
	Escalations uint64 `json:"escalations"`
}

// sentinelOf reads the sentinel's part of the summary a traced command
// printed last.
func sentinelOf(t *testing.T, r cmdResult) *sentinelSummary {
	t.Helper()
	var sent struct {
		Sentinel *sentinelSummary `json:"sentinel"`
	}
	if err := json.Unmarshal([]byte(r.stdout[strings.Index(r.stdout, "\n{")+1:]), &sent); err != nil || sent.Sentinel == nil {
		t.Fatalf("no sentinel in the trace's JSON (%v)\n%s", err, tail(r.stdout, 30))
	}
	return sent.Sentinel
}

// checkRingReads holds the reads of a QP's ring in the target's memory
// (librxe's layout, checked on each QP) to the workload's truth: the WRs
// posted by the last read no more than it posted, the occupancy read
// within the depth, and an overflowed queue read full.
func checkRingReads(t *testing.T, g map[string]any, w wlQP, overflowed bool) {
	t.Helper()
	if g == nil {
		return
	}
	m, ok := g["memory"].(map[string]any)
	if !ok {
		t.Errorf("QP %#x: no reads of its ring in memory", w.QPNum)
		return
	}
	t.Logf("QP %#x: ring read from memory %v", w.QPNum, m)
	// the ring holds its slots less one, more than the max_send_wr rxe
	// reports; librxe counts a WR before its full-ring check
	slots, _ := m["capacity"].(float64)
	if slots < float64(w.MaxSendWR) || m["posted_includes_refused"] != true {
		t.Errorf("QP %#x: reads %v: want the ring's capacity, at least max_send_wr %d, and the refused WRs counted", w.QPNum, m, w.MaxSendWR)
	}
	if m["posted"].(float64) > float64(w.App.Attempts) || m["peak_sampled"].(float64) > slots || m["outstanding"].(float64) > slots || m["samples"].(float64) == 0 {
		t.Errorf("QP %#x: reads %v: want no more WRs than the %d tried, the occupancy within the ring's %v", w.QPNum, m, w.App.Attempts, slots)
	}
	if overflowed && m["peak_sampled"].(float64) != slots {
		t.Errorf("QP %#x: highest read %v: want the full ring, %v, after the overflow", w.QPNum, m["peak_sampled"], slots)
	}
}
