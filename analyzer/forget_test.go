package analyzer

import (
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

func TestForget(t *testing.T) {
	destroy := func(s *streamtest.Stream, qpn uint32) {
		s.Add(&trace.QPDestroy{Header: s.Header(), QP: streamtest.QPAddr(qpn), QPNum: qpn})
	}
	overflow := func(s *streamtest.Stream, qpn uint32) { // never signaled: SQ full
		for range 8 {
			s.Send(qpn, 1, 0, 0)
		}
		s.Post(qpn, s.WRs(qpn, 1, ibv.WRSend, 0, 1, 32, 0), ibv.ENOMEM, 0)
	}
	tests := []struct {
		name      string
		build     func(s *streamtest.Stream)
		drop      func(pid, qpn uint32, gen uint64) bool
		proc      func(pid uint32) bool
		dropped   int
		wantQPs   []uint32
		wantDiags []uint32 // the QPs of the diagnoses kept, of kind sq_overflow_never_signaled
		wantCQs   int
	}{
		{"a destroyed QP goes with its diagnoses; the kept QP's still count",
			func(s *streamtest.Stream) {
				s.Create(1, trace.QPTypeRC, streamtest.RCCaps(8, 60, 1), false)
				s.Create(2, trace.QPTypeRC, streamtest.RCCaps(8, 60, 1), false)
				overflow(s, 1)
				overflow(s, 2)
				destroy(s, 1)
			},
			func(_, qpn uint32, _ uint64) bool { return qpn == 1 }, nil,
			1, []uint32{2}, []uint32{2}, 2},
		{"a process that is gone takes its CQs", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(8, 60, 1), false)
			s.Send(1, 4, 0, 2)
			s.Poll(1, 1, 3)
		}, func(pid, _ uint32, _ uint64) bool { return pid == streamtest.PID }, func(pid uint32) bool { return pid == streamtest.PID },
			1, nil, nil, 0},
		{"nothing selected, nothing dropped", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(8, 60, 1), false)
			overflow(s, 1)
		}, func(uint32, uint32, uint64) bool { return false }, nil, 0, []uint32{1}, []uint32{1}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.build(s)
			a := New(Options{})
			a.IngestAll(s.Events)
			if n := a.Forget(tc.drop, tc.proc); n != tc.dropped {
				t.Errorf("dropped %d, want %d", n, tc.dropped)
			}
			// what is kept goes on: one more failed post on each kept QP
			for _, qpn := range tc.wantQPs {
				s.Events = s.Events[:0]
				s.Post(qpn, s.WRs(qpn, 1, ibv.WRSend, 0, 1, 32, 0), ibv.ENOMEM, 0)
				a.IngestAll(s.Events)
			}
			snap := a.Snapshot()
			var qps []uint32
			for _, q := range snap.QPs {
				qps = append(qps, q.QPNum)
			}
			if !equalU32(qps, tc.wantQPs) {
				t.Errorf("QPs %v, want %v", qps, tc.wantQPs)
			}
			var diags []uint32
			for _, d := range snap.Diagnoses {
				if d.Kind == "sq_overflow_never_signaled" {
					diags = append(diags, d.QPNum)
					if d.Count != 2 {
						t.Errorf("QP %d: diagnosis count %d, want 2 (the one before Forget and the one after)", d.QPNum, d.Count)
					}
				}
			}
			if !equalU32(diags, tc.wantDiags) {
				t.Errorf("diagnoses of QPs %v, want %v", diags, tc.wantDiags)
			}
			if len(snap.CQs) != tc.wantCQs {
				t.Errorf("%d CQs, want %d", len(snap.CQs), tc.wantCQs)
			}
		})
	}
}

// TestForgetBoundsChurn creates and destroys QPs all day: with the
// destroyed ones forgotten, the analyzer holds only the live ones.
func TestForgetBoundsChurn(t *testing.T) {
	s := streamtest.New()
	a := New(Options{})
	destroyed := func(pid, qpn uint32, gen uint64) bool { return true }
	for round := range 200 {
		s.Events = s.Events[:0]
		for i := range uint32(50) {
			qpn := uint32(round)*50 + i
			s.Create(qpn, trace.QPTypeRC, streamtest.RCCaps(8, 60, 1), false)
			s.Send(qpn, 4, 0, 2)
			s.Poll(qpn, 1, 3)
			s.Add(&trace.QPDestroy{Header: s.Header(), QP: streamtest.QPAddr(qpn), QPNum: qpn},
				&trace.CQChange{Header: s.Header(), Op: trace.CQOpDestroy, CQ: streamtest.CQAddr(qpn)})
		}
		a.IngestAll(s.Events)
		a.Forget(destroyed, nil)
		if n := len(a.all) + len(a.qps) + len(a.qpGens); n != 0 {
			t.Fatalf("round %d: %d QP entries kept after forgetting every destroyed one", round, n)
		}
	}
	if snap := a.Snapshot(); len(snap.QPs) != 0 || len(snap.CQs) != 0 {
		t.Errorf("%d QPs and %d CQs left, want none", len(snap.QPs), len(snap.CQs))
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestForgetProcesses: host-wide, processes come and go; the exited ones
// a front end forgets leave the snapshot, the running ones and the target
// stay.
func TestForgetProcesses(t *testing.T) {
	a := New(Options{})
	h := func(pid uint32) trace.Header { return trace.Header{TimeNS: 100, PID: pid, TID: pid} }
	a.IngestAll([]trace.Event{
		&trace.Proc{Header: h(1), How: trace.ProcTarget, Comm: "target"},
		&trace.Proc{Header: h(2), How: trace.ProcFound, Comm: "gone"},
		&trace.Proc{Header: h(3), How: trace.ProcFound, Comm: "runs"},
		&trace.Exit{Header: h(2)},
		&trace.Exit{Header: h(1)},
	})
	a.Forget(func(uint32, uint32, uint64) bool { return false }, func(uint32) bool { return true })
	var got []string
	for _, p := range a.Snapshot().Processes {
		got = append(got, p.Comm)
	}
	if strings.Join(got, " ") != "target runs" {
		t.Errorf("processes %v after forgetting the exited ones, want the target and the running one", got)
	}
}
