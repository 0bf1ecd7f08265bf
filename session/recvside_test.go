package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/report"
)

// recvTruth is what testdata/recvside.c prints: what it posted, and what
// the simulator counted per CQ and per QP.
type recvTruth struct {
	CQs []struct {
		Name       string `json:"name"`
		CQ         uint64 `json:"cq"`
		Polls      uint64 `json:"polls"`
		EmptyPolls uint64 `json:"empty_polls"`
		CQEs       uint64 `json:"cqes"`
		Depth      uint32 `json:"depth"`
	} `json:"cqs"`
	QPs []struct {
		QPNum uint32 `json:"qp_num"`
		// the target's own counts: receives posted, taken (receive
		// completions polled), most held at once
		RecvsPosted uint64 `json:"recvs_posted"`
		RecvsTaken  uint64 `json:"recvs_taken"`
		RQPeak      uint64 `json:"rq_peak"`
		// the simulator's
		PostRecvs      uint64 `json:"post_recvs"`
		RecvsConsumed  uint64 `json:"recvs_consumed"`
		RecvCQEsPolled uint64 `json:"recv_cqes_polled"`
		WRs            uint64 `json:"wrs"`
		CQEsPolled     uint64 `json:"cqes_polled"`
		MaxRecvWR      uint32 `json:"max_recv_wr"`
		SendCQ         uint64 `json:"send_cq"`
		RecvCQ         uint64 `json:"recv_cq"`
	} `json:"qps"`
}

// Four senders share a send CQ and a receive CQ; a receiver, connected to
// the first on the simulated wire, only posts receives and polls its own
// CQ for the receives the SENDs take. Traced, each CQ's polls are the
// simulator's, written once per CQ; each QP's receives posted and
// consumed are what the target and the simulator counted, outstanding
// and its peak against max_recv_wr; the receiver is no QP of zeros.
// Counters mode counts the same polls per CQ and receives posted per QP,
// and says that it sees no receive completions.
func TestReceiveSideMatchesSimulator(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	const senders, rounds, recvs = 4, 200, 64
	for _, mode := range []string{ModeEvents, ModeCounters} {
		t.Run(mode, func(t *testing.T) {
			var out, warnings bytes.Buffer
			s, err := Start(Config{Argv: []string{recvsideProg.path(t), fmt.Sprint(senders), fmt.Sprint(rounds), fmt.Sprint(recvs)},
				Mode: mode, VerbsTimeout: 10 * time.Second, ChildOut: &out, Warnings: &warnings, Version: "test"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), bpftest.Timeout(t, time.Minute))
			defer cancel()
			if err := s.Run(ctx); err != nil {
				t.Fatalf("run: %v (warnings: %s)", err, warnings.String())
			}
			snap := s.Analyzer().Snapshot()
			var truth recvTruth
			if err := json.Unmarshal(out.Bytes(), &truth); err != nil || len(truth.QPs) != senders+1 || len(truth.CQs) != 3 {
				t.Fatalf("target said %q: %v", out.String(), err)
			}
			if snap.Lost != 0 {
				t.Fatalf("%d events lost", snap.Lost)
			}

			var text bytes.Buffer
			if err := report.WriteText(&text, snap); err != nil {
				t.Fatal(err)
			}
			report := text.String()
			cqs := map[uint64]analyzer.CQ{}
			for _, c := range snap.CQs {
				cqs[c.CQ] = c
			}
			for _, w := range truth.CQs {
				c, ok := cqs[w.CQ]
				if !ok || c.Polls != w.Polls || c.EmptyPolls != w.EmptyPolls || c.CQEs != w.CQEs || c.CQE != w.Depth {
					t.Errorf("%s CQ %#x: traced %+v; the simulator counted %+v", w.Name, w.CQ, c, w)
				}
				head, polls := fmt.Sprintf("CQ %#x (", w.CQ), fmt.Sprintf("; polls %d (empty %d), CQEs %d", w.Polls, w.EmptyPolls, w.CQEs)
				var lines []string
				for _, l := range strings.Split(report, "\n") {
					if strings.HasPrefix(l, head) {
						lines = append(lines, l)
					}
				}
				if len(lines) != 1 || !strings.Contains(lines[0], polls) {
					t.Errorf("%s CQ: lines %q, want one with %q", w.Name, lines, polls)
				}
			}
			// polls are written on the CQs' lines only, never per QP
			for _, l := range strings.Split(report, "\n") {
				if strings.Contains(l, "(empty ") && !strings.HasPrefix(l, "CQ ") {
					t.Errorf("polls written outside a CQ's line: %q", l)
				}
			}
			send, recv, own := cqs[truth.CQs[0].CQ], cqs[truth.CQs[1].CQ], cqs[truth.CQs[2].CQ]
			if mode == ModeEvents && (own.RecvCQEs == nil || *own.RecvCQEs != truth.CQs[2].CQEs || send.RecvCQEs == nil || *send.RecvCQEs != 0) {
				t.Errorf("receive CQEs: receiver's CQ %v, send CQ %v; want %d and 0", own.RecvCQEs, send.RecvCQEs, truth.CQs[2].CQEs)
			}
			var senderNums []uint32
			for _, w := range truth.QPs[:senders] {
				senderNums = append(senderNums, w.QPNum)
			}
			if !slices.Equal(send.SendQPs, senderNums) || !slices.Equal(recv.RecvQPs, senderNums) {
				t.Errorf("send CQ of %x, receive CQ of %x; want both %x", send.SendQPs, recv.RecvQPs, senderNums)
			}

			qps := map[uint32]analyzer.QP{}
			for _, q := range snap.QPs {
				qps[q.QPNum] = q
			}
			for _, w := range truth.QPs {
				q, ok := qps[w.QPNum]
				if !ok || w.PostRecvs != w.RecvsPosted || w.RecvsConsumed != w.RecvsTaken || w.RecvCQEsPolled != w.RecvsTaken || q.WRs != w.WRs {
					t.Fatalf("QP %#x: traced %v, WRs %d; the target posted %d receives and took %d (simulator: %d posted, %d consumed, %d polled), %d WRs",
						w.QPNum, ok, q.WRs, w.RecvsPosted, w.RecvsTaken, w.PostRecvs, w.RecvsConsumed, w.RecvCQEsPolled, w.WRs)
				}
				r := q.Recv
				if mode == ModeCounters {
					if r == nil || r.Posted != w.RecvsPosted || q.PostRecvs != w.RecvsPosted || r.Outstanding != nil ||
						r.Depth == nil || *r.Depth != w.MaxRecvWR {
						t.Errorf("QP %#x: counted receives %+v; the target posted %d (max_recv_wr %d), and no completion is seen",
							w.QPNum, r, w.RecvsPosted, w.MaxRecvWR)
					}
					continue
				}
				held := w.RecvsPosted - w.RecvsTaken
				if r == nil || r.Posted != w.RecvsPosted || r.Consumed != w.RecvsTaken || r.Outstanding == nil ||
					*r.Outstanding != held || *r.Peak != w.RQPeak || r.Depth == nil ||
					*r.Depth != w.MaxRecvWR || r.RecvCQ != w.RecvCQ || q.PostRecvs != w.RecvsPosted || q.CQEsPolled != w.CQEsPolled {
					t.Errorf("QP %#x: traced receives %+v, CQEs %d; the target posted %d receives and took %d, %d at most held (max_recv_wr %d, recv CQ %#x), %d CQEs",
						w.QPNum, r, q.CQEsPolled, w.RecvsPosted, w.RecvsTaken, w.RQPeak, w.MaxRecvWR, w.RecvCQ, w.CQEsPolled)
				}
				want := fmt.Sprintf("  receives: %d posted in %d post_recv calls, %d consumed by receive CQEs; outstanding now %d, peak %d of max_recv_wr %d",
					w.RecvsPosted, r.PostCalls, w.RecvsTaken, held, w.RQPeak, w.MaxRecvWR)
				if !strings.Contains(report, want) {
					t.Errorf("QP %#x: report lacks %q", w.QPNum, want)
				}
			}
			if mode == ModeCounters {
				if snap.ReceivesNotTraced == "" || snap.SRQRecvs != nil || !strings.Contains(report, "receive side: counters mode counts") {
					t.Errorf("counters mode: receives not traced %q, SRQ receives %v; want the reason, said in the report",
						snap.ReceivesNotTraced, snap.SRQRecvs)
				}
			}
			if !strings.Contains(report, "  sends: none traced") || strings.Count(report, "polls 0 (empty 0)") != 0 {
				t.Errorf("the receiver shows zeros:\n%s", report)
			}
			if t.Failed() {
				t.Logf("report:\n%s", report)
			}
		})
	}
}
