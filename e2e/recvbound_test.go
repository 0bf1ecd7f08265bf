package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// tracedRecvPastBound traces a lazily polled SEND stream on rxe whose
// receiver reaps up to 64 completions a poll, past the 32 a poll record
// holds: the receiver's CQ is its own and no QP sends to it, so the
// completions past the record are its receives, counted exactly (the
// workload's count of receive completions polled), and its receive queue
// never shows more outstanding than it holds.
func tracedRecvPastBound(name, args string) guestCmd {
	wl := "-d rxe0 -x 1 " + args + " --json-out " + truthFile
	sh := "sqscope trace --json --workload -- " + wl
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 40 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			s, truth := readTraced(t, r, sh)
			compareTruth(t, sh, s, truth)
			if len(truth.qps) != 1 {
				t.Fatalf("%d sending QPs in the truth, want 1", len(truth.qps))
			}
			// on a device the workload counts its receiver's receives in
			// the sender's "app"
			var m struct {
				App struct {
					Posted *uint64 `json:"recvs_posted"`
					Polled *uint64 `json:"recv_cqes"`
				} `json:"app"`
			}
			sender := truth.qps[0].QPNum
			if err := json.Unmarshal([]byte(truth.raw[sender]), &m); err != nil || m.App.Posted == nil || m.App.Polled == nil {
				t.Fatalf("no receives in the truth (%v): %s", err, truth.raw[sender])
			}
			var g, rq map[string]any
			for _, q := range s.QPs {
				if r, _ := q["recv"].(map[string]any); r != nil && num(q, "qp_num") != uint64(sender) && num(r, "posted") > 0 {
					if g != nil {
						t.Fatalf("two QPs posted receives: %#x and %#x", num(g, "qp_num"), num(q, "qp_num"))
					}
					g, rq = q, r
				}
			}
			if g == nil {
				t.Fatalf("no receiving QP in the trace: %v", s.QPs)
			}
			want := struct{ QPNum, PostRecvs, Polled uint64 }{num(g, "qp_num"), *m.App.Posted, *m.App.Polled}
			depth := num(rq, "max_recv_wr")
			// the receiver's first fill of max_recv_wr receives, then one
			// for each completion (the workload's recvs_posted)
			if num(rq, "consumed") != want.Polled || rq["consumed_lower_bound"] != nil || num(rq, "posted") != depth+want.PostRecvs ||
				num(rq, "outstanding") > depth || num(rq, "peak_outstanding") > depth || depth == 0 {
				t.Errorf("receiver's queue %v: want %d consumed exactly of %d posted, never more than max_recv_wr (%d) outstanding",
					rq, want.Polled, depth+want.PostRecvs, depth)
			}
			var raw struct {
				CQs []map[string]any `json:"cqs"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
				t.Fatal(err)
			}
			past := uint64(0)
			for _, c := range raw.CQs {
				b := num(c, "cqes_past_bound")
				past += b
				if b != 0 && num(c, "cqes_past_bound_receives") != b {
					t.Errorf("CQ %#x: %d completions past the poll record bound, %d of them receives: want all", num(c, "cq"), b, num(c, "cqes_past_bound_receives"))
				}
			}
			if past == 0 {
				t.Errorf("no completion past the poll record bound: the receiver polls 64 at a time, past the 32 a record holds")
			}
			t.Logf("receiver %#x: %d receives posted, %d consumed (workload %d), peak %d of max_recv_wr %d; %d completions past the poll record bound",
				want.QPNum, num(rq, "posted"), num(rq, "consumed"), want.Polled, num(rq, "peak_outstanding"), depth, past)
		},
	}
}
