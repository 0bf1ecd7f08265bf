package probe

import (
	"fmt"
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// qpTotals derives, per QP number, the counters mode's totals from an
// events-mode trace, and says which QPs had WRs past the record bound
// (which the counters mode sees and events do not).
func qpTotals(evs []trace.Event) (m map[uint32]trace.QPCounters, truncated map[uint32]bool) {
	m = map[uint32]trace.QPCounters{}
	truncated = map[uint32]bool{}
	for _, e := range evs {
		if r, ok := e.(*trace.PostRecv); ok && !r.SRQ { // the kernel counts a QP's receives, not an SRQ's
			c := m[r.QPNum]
			c.QPNum, c.RecvsCounted = r.QPNum, true
			c.RecvCalls++
			c.Recvs += uint64(r.Accepted)
			if r.Ret != 0 {
				c.RecvFailed++
			}
			m[r.QPNum] = c
			continue
		}
		p, ok := e.(*trace.Post)
		if !ok || p.Aborted {
			continue
		}
		c := m[p.QPNum]
		c.RecvsCounted = true
		c.QPNum = p.QPNum
		c.PostCalls++
		c.WRs += uint64(p.Accepted)
		if p.Accepted > 0 {
			c.Doorbells++
		}
		if p.Ret != 0 {
			c.Errors++
			switch p.Ret {
			case 12:
				c.ENOMEM++
			case 22:
				c.EINVAL++
			}
		}
		c.WRsPerCallMax = max(c.WRsPerCallMax, uint64(p.Accepted))
		if p.Truncated > 0 {
			truncated[p.QPNum] = true
		}
		if p.WalkCapped {
			c.WalkCappedPosts++
		}
		for i, w := range p.WRs {
			if uint32(i) >= p.Accepted {
				break
			}
			if w.Flags&ibv.SendInline != 0 {
				c.Inline++
				c.InlineBytes += uint64(w.Bytes)
			} else {
				c.PayloadBytes += uint64(w.Bytes)
				c.PayloadSGEs += uint64(w.NumSGE)
			}
			if w.Flags&ibv.SendSignaled != 0 {
				c.Signaled++
			}
			if w.SGEsNotSummed > 0 {
				c.SGECutWRs++
				c.SGEsNotSummed += uint64(w.SGEsNotSummed)
			}
		}
		m[p.QPNum] = c
	}
	return m, truncated
}

// TestCountersModeMatchesEvents: the in-kernel per-QP totals equal the
// totals rebuilt from an events-mode trace of the same workload.
func TestCountersModeMatchesEvents(t *testing.T) {
	requireBPF(t)
	_, evs, _ := traceRun(t, Options{}, "run")
	want, truncated := qpTotals(evs)
	out, cevs, tr := traceRun(t, Options{Mode: ModeCounters}, "run")
	stats := parseStats(t, out)
	got := tallyEvents(cevs)
	if got.PostCalls+got.Polls+got.WRBatches != 0 {
		t.Errorf("counters mode emitted per-call events: %d posts, %d polls, %d batches", got.PostCalls, got.Polls, got.WRBatches)
	}
	if got.Lost != 0 || tr.Lost() != 0 {
		t.Errorf("lost %d", got.Lost)
	}
	var empty, cqes uint64
	for _, cc := range got.CQCounters {
		empty += cc.Empty
		cqes += cc.CQEs
	}
	if got.EmptyPolls != 0 || empty != stats.EmptyPolls {
		t.Errorf("empty polls %d (+%d as events), target did %d", empty, got.EmptyPolls, stats.EmptyPolls)
	}
	if cqes != stats.CQEs {
		t.Errorf("completions %d, target polled %d", cqes, stats.CQEs)
	}
	checkQPTotals(t, got, want, truncated)
}

// countersByNum is the latest counters-mode totals of each QP, by number,
// without the header and address.
func countersByNum(got tally) map[uint32]trace.QPCounters {
	byNum := map[uint32]trace.QPCounters{}
	for _, c := range got.Counters {
		v := *c
		v.Header = trace.Header{}
		v.QP = 0
		v.Gen = 0 // events know it from the QP's create; session/lifecycle_test.go checks it
		byNum[c.QPNum] = v
	}
	return byNum
}

// checkQPTotals requires the counters-mode totals of every QP to be those
// qpTotals rebuilt from an events-mode trace.
func checkQPTotals(t *testing.T, got tally, want map[uint32]trace.QPCounters, truncated map[uint32]bool) {
	t.Helper()
	byNum := countersByNum(got)
	if len(byNum) != len(want) {
		t.Errorf("counters for %d QPs, events show %d", len(byNum), len(want))
	}
	for num, w := range want {
		t.Run(fmt.Sprintf("qp%#x", num), func(t *testing.T) {
			g := byNum[num]
			// the send-queue model: session/occupancy_test.go holds it to
			// events mode's; here, that it counts what the totals do
			if m := g.SQ; !m.Kept {
				t.Errorf("no send-queue model kept")
			} else if !m.WRAPI && (m.Posted != g.WRs || m.Signaled != g.Signaled) {
				t.Errorf("model posted %d WRs (%d signaled), the totals %d (%d)", m.Posted, m.Signaled, g.WRs, g.Signaled)
			}
			g.SQ = trace.SQModel{}
			if truncated[num] {
				// events lack the WRs past the bound: compare what does not
				// depend on them
				g.Inline, g.Signaled, g.InlineBytes, g.PayloadBytes, g.PayloadSGEs = 0, 0, 0, 0, 0
				w.Inline, w.Signaled, w.InlineBytes, w.PayloadBytes, w.PayloadSGEs = 0, 0, 0, 0, 0
				g.SGECutWRs, g.SGEsNotSummed, w.SGECutWRs, w.SGEsNotSummed = 0, 0, 0, 0
			}
			if g != w {
				t.Errorf("counters\n got %+v\nwant %+v", g, w)
			}
		})
	}
}
