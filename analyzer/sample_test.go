package analyzer

import (
	"math"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// sampleWindow is a sample window of the sentinel mode on the stream's
// process: its opening, what build posts and polls in it, its closing
// record, the removal's and the window's end with its cost.
func sampleWindow(s *streamtest.Stream, build func()) {
	attach := func(err string) {
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", How: trace.HowSample, Err: err})
	}
	s.Add(&trace.Attach{Header: s.Header(), Func: "poll_cq", How: trace.HowSample})
	attach("")
	from := s.T
	build()
	attach(trace.WindowClosing)
	to := s.T
	attach(trace.SampleEnded)
	s.Add(&trace.Window{Header: trace.Header{TimeNS: to}, FromNS: from, PIDs: 1, PeriodNS: 10_000_000,
		Runs: 100, Traps: 100, TrapNS: 1000, RunNS: 50_000, TargetCPUNS: 10_150_000, BudgetPPM: 10_000, NextNS: 5_000_000_000})
}

// Between sample windows a QP's occupancy is what the last window
// measured when it began to close (posts seen while its probes were
// being removed are its edge, not counted in it); a window that never
// synchronised the model leaves the lower bound; rates are over the
// traced seconds; the windows' cost is summed against the processes'
// own CPU.
func TestSampleWindows(t *testing.T) {
	const qpn = 0x1c0
	s := streamtest.New()
	s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", How: trace.HowErrorSite})
	s.MemQP(qpn, ibv.QPSRTS)
	s.IDs[qpn] = 1000
	sampleWindow(s, func() {
		s.Send(qpn, 4, 0, 4) // 1000..1003, 1003 signaled
		s.Send(qpn, 4, 0, 4) // 1004..1007
		s.Poll(qpn, 1003)    // synced: 4 outstanding
		s.Send(qpn, 2, 0, 0) // 6
	})
	s.Wait(1_000_000_000)
	snap := run(t, s, Options{BF: DefaultBF})
	q := snap.QPs[0]
	if q.Outstanding != 6 || q.OutstandingSampledNS == 0 || !q.OutstandingLowerBound {
		t.Errorf("between windows: outstanding %d sampled at %d, lower bound %v; want the window's 6, sampled, the model a lower bound",
			q.Outstanding, q.OutstandingSampledNS, q.OutstandingLowerBound)
	}
	if !q.Rates.WhileTraced || q.Rates.SpanNS == 0 || q.Rates.SpanNS > 2_000 {
		t.Errorf("rates over %d ns (while traced %v): want the window's span, not the second after it", q.Rates.SpanNS, q.Rates.WhileTraced)
	}
	m := snap.Sentinel.Sampling
	if m == nil || m.Windows != 1 || m.Cost == nil || m.Cost.Traps != 100 || m.BudgetPct != 1 || m.NextInSeconds != 5 {
		t.Fatalf("sampling %+v: want one window, its cost and budget", m)
	}
	// 100 traps at 1 µs and 50 µs of BPF: 150 µs over 10 ms of the
	// processes' own CPU
	if math.Abs(m.Cost.SharePct-1.5) > 1e-9 || math.Abs(m.Cost.TargetCPUSeconds-0.01) > 1e-12 {
		t.Errorf("cost %+v: want 1.5%% of 10 ms", m.Cost)
	}

	// a second window that posts after the first and polls nothing: the
	// model stays a lower bound below what was measured, and the sample
	// stands
	sampleWindow(s, func() { s.Send(qpn, 2, 0, 0) })
	snap = run(t, s, Options{BF: DefaultBF})
	if q := snap.QPs[0]; q.Outstanding != 6 || q.OutstandingSampledNS == 0 {
		t.Errorf("after an unsynced window: outstanding %d sampled at %d, want the first window's 6", q.Outstanding, q.OutstandingSampledNS)
	}
	if m := snap.Sentinel.Sampling; m.Windows != 2 || snap.Sentinel.Escalations != 0 {
		t.Errorf("sampling %+v, sentinel %+v: want two windows, no escalation", m, snap.Sentinel)
	}

	// the trace's end: the cost is over the CPU to it, no window more
	s.Add(&trace.Window{Header: trace.Header{TimeNS: s.T + 100}, FromNS: s.T + 100, PeriodNS: 20_000_000, TargetCPUNS: 20_000_000, Tail: true})
	snap = run(t, s, Options{BF: DefaultBF})
	if m := snap.Sentinel.Sampling; m.Windows != 2 || !m.Ended || math.Abs(m.Cost.TargetCPUSeconds-0.04) > 1e-9 || math.Abs(m.Cost.SharePct-0.75) > 1e-9 {
		t.Errorf("sampling %+v, cost %+v: want two windows, their 300 µs over the 40 ms of the processes' own CPU to the end", m, m.Cost)
	}

	// a failure in a window escalates it without re-synchronising
	s2 := streamtest.New()
	s2.MemQP(qpn, ibv.QPSRTS)
	s2.Add(&trace.Attach{Header: s2.Header(), Func: "post_send", How: trace.HowSample})
	s2.Add(&trace.Attach{Header: s2.Header(), Func: "post_send", How: trace.HowEscalation, Err: trace.EscalationInSample})
	snap = run(t, s2, Options{BF: DefaultBF})
	if snap.Sentinel.Escalations != 1 {
		t.Errorf("%d escalations, want the sample window's", snap.Sentinel.Escalations)
	}
}

// A window's end removes its probes in no set order: posts traced after
// the poll probes went have completions the trace no longer sees. Those
// posts are counted as calls, never as occupancy: a healthy QP gets no
// calls_not_traced and keeps the peak and the histogram the window
// measured, however many WRs it posts while the probes go.
func TestSampleWindowEdge(t *testing.T) {
	const qpn = 0x1c0
	s := streamtest.New()
	s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", How: trace.HowErrorSite})
	s.Create(qpn, trace.QPTypeRC, trace.Caps{MaxSendWR: 16, MaxInlineData: 60, MaxSendSGE: 1}, false)
	s.ToRTS(qpn)
	edge := func() {
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", How: trace.HowSample, Err: trace.WindowClosing})
		for range 10 { // 40 WRs on a queue of 16, their completions unseen
			s.Send(qpn, 4, 0, 4)
		}
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", How: trace.HowSample, Err: trace.SampleEnded})
		s.Send(qpn, 4, 0, 4) // read after the end's record: still the edge
	}
	s.Add(&trace.Attach{Header: s.Header(), Func: "poll_cq", How: trace.HowSample})
	s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", How: trace.HowSample})
	ids := s.Signaled(qpn, 2)
	s.Poll(qpn, ids[0]) // synced: 1 outstanding
	s.Send(qpn, 4, 0, 4)
	edge()
	snap := run(t, s, Options{BF: DefaultBF})
	q := snap.QPs[0]
	if got := diagKinds(snap); len(got) != 0 {
		t.Errorf("diagnoses %v at a window's edge: a healthy QP gets none", got)
	}
	if q.WRs != 50 || q.PeakOutstanding != 5 || q.Outstanding != 5 || q.OutstandingSampledNS == 0 {
		t.Errorf("WRs %d, peak %d, outstanding %d (sampled at %d): want the 50 posted, the window's peak 5 and its 5 at the end",
			q.WRs, q.PeakOutstanding, q.Outstanding, q.OutstandingSampledNS)
	}
	// a QP first seen between the windows is at the edge too
	s.Create(qpn+1, trace.QPTypeRC, trace.Caps{MaxSendWR: 16, MaxInlineData: 60, MaxSendSGE: 1}, false)
	s.ToRTS(qpn + 1)
	for range 10 {
		s.Send(qpn+1, 4, 0, 4)
	}
	snap = run(t, s, Options{BF: DefaultBF})
	if got := diagKinds(snap); len(got) != 0 {
		t.Errorf("diagnoses %v for posts between windows: want none", got)
	}
	for _, q := range snap.QPs {
		if q.PeakOutstanding > 16 {
			t.Errorf("QP %#x: peak %d of a queue of 16", q.QPNum, q.PeakOutstanding)
		}
	}
	// the next window measures again
	s.Add(&trace.Attach{Header: s.Header(), Func: "poll_cq", How: trace.HowSample})
	s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", How: trace.HowSample})
	ids = s.Signaled(qpn, 8)
	s.Poll(qpn, ids[0]) // synced: 7 outstanding, after 8
	snap = run(t, s, Options{BF: DefaultBF})
	for _, q := range snap.QPs {
		if q.QPNum == qpn && (q.PeakOutstanding != 8 || q.Outstanding != 7) {
			t.Errorf("next window: peak %d, outstanding %d, want 8 and 7", q.PeakOutstanding, q.Outstanding)
		}
	}
}
