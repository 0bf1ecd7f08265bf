package analyzer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// kernStream is a counters-mode QP 0x1c0 of depth 64 (inline 60, one
// SGE), created in the trace and in RTS, its send CQ created with 255
// entries.
func kernStream() *streamtest.Stream {
	s := streamtest.New()
	s.CQCreate(0x1c0, 255)
	s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
	s.ToRTS(0x1c0)
	return s
}

// kernFail is a failed post of the counters mode on QP 0x1c0: errno, WRs
// accepted, the WR refused and the queue after the call.
func kernFail(s *streamtest.Stream, errno int32, accepted uint32, wr trace.WR, m trace.SQModel) {
	m.Kept = true
	s.Add(&trace.PostFail{Header: s.Header(), QP: streamtest.QPAddr(0x1c0), QPNum: 0x1c0, Func: "post_send",
		Errno: errno, State: ibv.QPSRTS, HasWR: true, WR: wr, Counted: true, Accepted: accepted, SQ: m})
}

// kernCounters flushes QP 0x1c0's totals with its kernel model.
func kernCounters(s *streamtest.Stream, c trace.QPCounters, m trace.SQModel) {
	m.Kept = true
	c.SQ = m
	c.RecvsCounted = true
	s.Counters(0x1c0, c)
}

func diagsByKind(snap Snapshot) map[string]Diagnosis {
	m := map[string]Diagnosis{}
	for _, d := range snap.Diagnoses {
		m[d.Kind] = d
	}
	return m
}

// The kernel's send-queue model makes a counters-mode QP's occupancy,
// peak, runs and ENOMEM causes measured, and its failures diagnosed as
// events mode diagnoses them; where the model cannot be used, the QP says
// why and leaves them out.
func TestCountersKernelSQ(t *testing.T) {
	send := trace.WR{ID: 7, Opcode: ibv.WRSend, NumSGE: 1, Bytes: 64}
	full := trace.SQModel{Posted: 64, Peak: 64, LongestRun: 64, CurRun: 64, FirstRun: 64, SendCQ: streamtest.CQAddr(0x1c0), Synced: true}
	cases := []struct {
		name  string
		build func(s *streamtest.Stream)
		// what the snapshot must say
		kernel      bool
		outstanding uint64
		peak        uint64
		lowerBound  bool
		sqFull      uint64
		inline      uint64
		diags       map[string]uint64 // kind: count
		why         string            // OccupancyNotMeasured holds it
	}{
		{name: "never signaled: the queue fills, 10 refusals of which 9 repeats",
			build: func(s *streamtest.Stream) {
				kernFail(s, ibv.ENOMEM, 0, send, full)
				m := full
				m.FailRepeats = 9
				kernCounters(s, trace.QPCounters{PostCalls: 74, WRs: 64, Doorbells: 64, Errors: 10, ENOMEM: 10}, m)
			},
			kernel: true, outstanding: 64, peak: 64, sqFull: 10,
			diags: map[string]uint64{"sq_overflow_never_signaled": 10, "unsignaled_run_near_depth": 1}},
		{name: "signaled WRs outstanding, the send CQ not polled since before the oldest",
			build: func(s *streamtest.Stream) {
				s.CQCounters(0x1c0, 50, 10, 40)
				s.Wait(1_000_000)
				oldest := s.T
				s.Wait(1_000_000)
				s.CQCounters(0x1c0, 50, 10, 40) // no poll since
				m := trace.SQModel{Posted: 128, Retired: 64, Peak: 64, LongestRun: 15, CurRun: 3, Signaled: 8,
					SigOutstanding: 4, OldestSigNS: oldest, SendCQEs: 4, SendCQ: streamtest.CQAddr(0x1c0), Synced: true}
				kernFail(s, ibv.ENOMEM, 0, send, m)
			},
			kernel: true, outstanding: 64, peak: 64, sqFull: 1,
			diags: map[string]uint64{"sq_overflow_cq_not_polled": 1}},
		{name: "inline data over the cap",
			build: func(s *streamtest.Stream) {
				m := trace.SQModel{Posted: 10, Retired: 8, Peak: 3, LongestRun: 2, Signaled: 5, SigOutstanding: 1,
					SendCQEs: 4, SendCQ: streamtest.CQAddr(0x1c0), Synced: true}
				kernFail(s, ibv.ENOMEM, 1, trace.WR{ID: 11, Opcode: ibv.WRSend, Flags: ibv.SendInline, NumSGE: 1, Bytes: 100}, m)
			},
			kernel: true, outstanding: 2, peak: 3, inline: 1,
			diags: map[string]uint64{"inline_too_big": 1}},
		{name: "attached late: not synchronised, a lower bound",
			build: func(s *streamtest.Stream) {
				kernCounters(s, trace.QPCounters{PostCalls: 20, WRs: 20, Doorbells: 20, Signaled: 2},
					trace.SQModel{Posted: 20, Retired: 3, Peak: 17, LongestRun: 9, Signaled: 2, SendCQEs: 3,
						SendCQ: streamtest.CQAddr(0x1c0)})
			},
			kernel: true, outstanding: 17, peak: 17, lowerBound: true},
		{name: "posted through the wr API: not measured, said",
			build: func(s *streamtest.Stream) {
				kernCounters(s, trace.QPCounters{PostCalls: 20, WRs: 20, Doorbells: 20},
					trace.SQModel{WRAPI: true, SendCQEs: 20, Unmatched: 20, SendCQ: streamtest.CQAddr(0x1c0), Synced: true})
			},
			why: "ibv_wr_* API"},
		{name: "send CQ polled by extended polls: not measured, said",
			build: func(s *streamtest.Stream) {
				s.Add(&trace.CQCounters{Header: s.Header(), CQ: streamtest.CQAddr(0x1c0), Polls: 30, CQEs: 20, ExCQEs: 20})
				kernCounters(s, trace.QPCounters{PostCalls: 20, WRs: 20, Doorbells: 20, Signaled: 20},
					trace.SQModel{Posted: 20, Peak: 20, Signaled: 20, SigOutstanding: 20, SendCQ: streamtest.CQAddr(0x1c0), Synced: true})
			},
			why: "extended CQ"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := kernStream()
			c.build(s)
			snap := run(t, s, Options{Mode: ModeCounters})
			if len(snap.QPs) != 1 {
				t.Fatalf("%d QPs, want 1", len(snap.QPs))
			}
			q := snap.QPs[0]
			if q.KernelSQ != c.kernel || !strings.Contains(q.OccupancyNotMeasured, c.why) || (c.why == "") != (q.OccupancyNotMeasured == "") {
				t.Fatalf("kernel model %v (not measured: %q), want %v (%q)", q.KernelSQ, q.OccupancyNotMeasured, c.kernel, c.why)
			}
			var doc map[string]any
			if err := json.Unmarshal(jsonOf(t, q), &doc); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"outstanding", "peak_outstanding", "longest_unsignaled_run", "enomem_sq_full"} {
				if _, ok := doc[k]; ok != c.kernel {
					t.Errorf("JSON has %s: %v, want %v", k, ok, c.kernel)
				}
			}
			if _, ok := doc["occupancy"]; ok {
				t.Errorf("JSON has the occupancy histogram, which needs each call")
			}
			if !strings.Contains(q.CountersNote(), "counters mode") {
				t.Errorf("note %q", q.CountersNote())
			}
			if !c.kernel {
				return
			}
			if q.Outstanding != c.outstanding || q.PeakOutstanding != c.peak || q.OutstandingLowerBound != c.lowerBound {
				t.Errorf("outstanding %d (lower bound %v), peak %d; want %d (%v), %d",
					q.Outstanding, q.OutstandingLowerBound, q.PeakOutstanding, c.outstanding, c.lowerBound, c.peak)
			}
			if q.ENOMEMSQFull != c.sqFull || q.ENOMEMInline != c.inline {
				t.Errorf("ENOMEM SQ full %d, inline %d; want %d, %d", q.ENOMEMSQFull, q.ENOMEMInline, c.sqFull, c.inline)
			}
			got := diagsByKind(snap)
			if len(got) != len(c.diags) {
				t.Errorf("diagnoses %v, want %v", snap.Diagnoses, c.diags)
			}
			for k, n := range c.diags {
				if d, ok := got[k]; !ok || d.Count != n {
					t.Errorf("diagnosis %s: %+v, want %d times", k, d, n)
				}
			}
			for _, err := range snap.Check() {
				t.Errorf("invariant: %v", err)
			}
		})
	}
}
