package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tracedShared traces `sqscope workload -d rxe0` with QPs spread over
// threads that share a send CQ (--shared-cq) and, with --srq, take their
// peers' receives from one SRQ per thread, and requires, beyond what
// tracedWorkload requires of every QP, each send CQ's polls, empty polls
// and completions and the QPs that send on it, and each SRQ's receives
// posted, to equal the workload's application-side truth.
func tracedShared(name, via, args string, threads int) guestCmd {
	c := tracedWorkload(name, via, args)
	c.timeout = 120 * time.Second
	check := c.check
	c.check = func(t *testing.T, r cmdResult) {
		check(t, r)
		s, err := parseSnapshot(r.stdout)
		if err != nil {
			t.Fatalf("tracer JSON: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(r.dir, truthFile))
		if err != nil {
			t.Fatalf("the workload's truth: %v", err)
		}
		srq := strings.Contains(args, "--srq")
		if srq {
			checkProbes(t, s, "post_srq_recv")
		}
		compareQueues(t, c.sh, s, b, threads, srq)
	}
	return c
}

// queueTruth is the part of a workload QP's JSON that names its send CQ
// and SRQ.
type queueTruth struct {
	QPNum uint32 `json:"qp_num"`
	CQ    *struct {
		Addr       uint64 `json:"addr"`
		Polls      uint64 `json:"polls"`
		EmptyPolls uint64 `json:"empty_polls"`
		CQEs       uint64 `json:"cqes"`
		Truth      string `json:"truth"`
	} `json:"cq"`
	SRQ *struct {
		Addr        uint64 `json:"addr"`
		Filled      uint64 `json:"filled"`
		Posted      uint64 `json:"posted"`
		Outstanding uint64 `json:"outstanding"`
		Truth       string `json:"truth"`
	} `json:"srq"`
}

// traceQueues is the part of the tracer's JSON about CQs and SRQs.
type traceQueues struct {
	CQs []struct {
		CQ         uint64   `json:"cq"`
		Polls      uint64   `json:"polls"`
		EmptyPolls uint64   `json:"empty_polls"`
		CQEs       uint64   `json:"cqes"`
		SendQPs    []uint32 `json:"send_qps"`
		Destroyed  bool     `json:"destroyed"`
	} `json:"cqs"`
	SRQs []struct {
		SRQ       uint64 `json:"srq"`
		Destroyed bool   `json:"destroyed"`
		Recv      *struct {
			Posted uint64 `json:"posted"`
		} `json:"recv"`
	} `json:"srqs"`
	SRQRecvs *uint64 `json:"srq_recvs"`
}

func compareQueues(t *testing.T, sh string, s *snapshot, truthJSON []byte, threads int, srq bool) {
	t.Helper()
	var truth []queueTruth
	if err := json.Unmarshal(truthJSON, &truth); err != nil {
		t.Fatalf("the workload's truth: %v", err)
	}
	var raws []map[string]any
	json.Unmarshal(truthJSON, &raws)
	tq := s.traceQueues
	checkDestroyed(t, s)
	cqQPs := map[uint64][]uint32{}
	for i, q := range truth {
		if q.CQ == nil {
			t.Fatalf("QP %#x has no send CQ truth\ncommand: %s", q.QPNum, sh)
		}
		if q.CQ.Truth != "application" {
			t.Errorf("QP %#x: CQ truth %q, want application", q.QPNum, q.CQ.Truth)
		}
		if cq, _ := raws[i]["cq"].(map[string]any); cq["overruns"] != nil || cq["resizes"] != nil {
			t.Errorf("QP %#x: CQ truth %v gives counts only the HCA knows", q.QPNum, cq)
		}
		cqQPs[q.CQ.Addr] = append(cqQPs[q.CQ.Addr], q.QPNum)
		if srq != (q.SRQ != nil) {
			t.Fatalf("QP %#x: SRQ truth %v, want one: %v", q.QPNum, q.SRQ, srq)
		}
	}
	if len(cqQPs) != threads {
		t.Errorf("%d send CQs in the truth, want one per thread (%d)", len(cqQPs), threads)
	}
	done := map[uint64]bool{}
	for _, q := range truth {
		w := q.CQ
		if done[w.Addr] {
			continue
		}
		done[w.Addr] = true
		n := 0
		for _, g := range tq.CQs {
			if g.CQ != w.Addr {
				continue
			}
			n++
			if g.Polls != w.Polls || g.EmptyPolls != w.EmptyPolls || g.CQEs != w.CQEs {
				t.Errorf("CQ %#x: trace polls %d, empty %d, CQEs %d; workload polls %d, empty %d, CQEs %d\ncommand: %s",
					w.Addr, g.Polls, g.EmptyPolls, g.CQEs, w.Polls, w.EmptyPolls, w.CQEs, sh)
			}
			got, want := slices.Sorted(slices.Values(g.SendQPs)), slices.Sorted(slices.Values(cqQPs[w.Addr]))
			if !slices.Equal(got, want) {
				t.Errorf("CQ %#x: the trace's send QPs %#x, the workload's %#x", w.Addr, got, want)
			}
			t.Logf("CQ %#x (send CQ of %d QPs): trace = workload: polls %d, empty polls %d, CQEs %d",
				w.Addr, len(want), g.Polls, g.EmptyPolls, g.CQEs)
		}
		if n != 1 {
			t.Errorf("CQ %#x of the workload is %d times in the trace, want once\ncommand: %s", w.Addr, n, sh)
		}
	}
	if !srq {
		return
	}
	var sum uint64
	done = map[uint64]bool{}
	for _, q := range truth {
		w := q.SRQ
		if done[w.Addr] {
			continue
		}
		done[w.Addr] = true
		sum += w.Posted
		if w.Truth != "application" || w.Posted < w.Filled || w.Outstanding > w.Posted {
			t.Errorf("SRQ %#x truth %+v", w.Addr, *w)
		}
		n := 0
		for _, g := range tq.SRQs {
			if g.SRQ != w.Addr {
				continue
			}
			n++
			if g.Recv == nil || g.Recv.Posted != w.Posted {
				t.Errorf("SRQ %#x: trace %v, workload posted %d\ncommand: %s", w.Addr, g.Recv, w.Posted, sh)
				continue
			}
			t.Logf("SRQ %#x: trace = workload: receives posted %d (%d when created); outstanding at the end %d",
				w.Addr, g.Recv.Posted, w.Filled, w.Outstanding)
		}
		if n != 1 {
			t.Errorf("SRQ %#x of the workload is %d times in the trace, want once", w.Addr, n)
		}
	}
	if len(done) != threads {
		t.Errorf("%d SRQs in the truth, want one per thread (%d)", len(done), threads)
	}
	if tq.SRQRecvs == nil || *tq.SRQRecvs != sum {
		t.Errorf("the trace's srq_recvs %v, the workload's SRQs were posted %d", tq.SRQRecvs, sum)
	}
}

// checkDestroyed requires every CQ and SRQ the trace saw to have been
// destroyed: ibv_destroy_cq and ibv_destroy_srq returned 0, which they do
// only once no QP uses the CQ or SRQ.
func checkDestroyed(t *testing.T, s *snapshot) {
	t.Helper()
	for _, c := range s.CQs {
		if !c.Destroyed {
			t.Errorf("CQ %#x was not destroyed", c.CQ)
		}
	}
	for _, q := range s.SRQs {
		if !q.Destroyed {
			t.Errorf("SRQ %#x was not destroyed", q.SRQ)
		}
	}
	t.Logf("%d CQs and %d SRQs created and destroyed", len(s.CQs), len(s.SRQs))
}

// sharedCreateFails traces a workload whose first QP cannot be created
// (rxe takes no such max_inline_data) once each thread's shared CQ and SRQ
// exist: the run fails with one line naming the cap, and every CQ and SRQ
// it made is destroyed.
func sharedCreateFails(name string) guestCmd {
	args := "-d rxe0 -x 1 --opcode send -s 64 -I 100000 -n 10 --qps 4 --threads 2 --shared-cq --srq"
	sh := "sqscope trace --json --workload -- " + args
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 30 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			if r.status == 0 {
				t.Fatalf("exit status 0, want the workload's failure\nstderr:\n%s", tail(r.stderr, 20))
			}
			var lines []string
			for l := range strings.Lines(r.stderr) {
				if strings.Contains(l, "max_inline_data 100000") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 || !strings.Contains(lines[0], "creating QP on rxe0") {
				t.Errorf("want one error line creating the QP, naming max_inline_data 100000; stderr:\n%s", tail(r.stderr, 20))
			} else {
				t.Logf("status %d: %s", r.status, strings.TrimSpace(lines[0]))
			}
			s, err := parseSnapshot(r.stdout)
			if err != nil {
				t.Fatalf("tracer JSON: %v\nstdout:\n%s", err, tail(r.stdout, 40))
			}
			// two shared send CQs, two SRQs and their CQs, and the
			// failed endpoint's own peer send CQ
			if len(s.SRQs) != 2 || len(s.CQs) < 4 {
				t.Errorf("%d SRQs and %d CQs in the trace, want 2 and at least 4", len(s.SRQs), len(s.CQs))
			}
			checkDestroyed(t, s)
		},
	}
}
