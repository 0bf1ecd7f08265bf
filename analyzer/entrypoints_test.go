package analyzer

import (
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Every opcode a builder or ibv_post_send can post is a WR: it takes a
// slot, is signaled or not, and has the WQE the mlx5 rules (and the
// simulated HCA) give it.
func TestEveryOpcodeIsAWR(t *testing.T) {
	tests := []struct {
		op     uint8
		sges   uint32
		bytes  uint32
		wqebbs uint64
	}{
		{ibv.WRSend, 1, 64, 1},
		{ibv.WRSendWithImm, 1, 64, 1},
		{ibv.WRSendWithInv, 1, 64, 1},
		{ibv.WRRDMAWrite, 1, 64, 1},
		{ibv.WRRDMAWriteWithImm, 1, 64, 1},
		{ibv.WRRDMARead, 1, 64, 1},
		{ibv.WRAtomicCmpAndSwp, 1, 8, 1},
		{ibv.WRAtomicFetchAndAdd, 1, 8, 1},
		{ibv.WRAtomicWrite, 0, 0, 1},
		{ibv.WRLocalInv, 0, 0, 2},
		{ibv.WRBindMW, 0, 0, 3},
	}
	for _, tc := range tests {
		t.Run(ibv.OpName(tc.op), func(t *testing.T) {
			s := streamtest.New()
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(4, 60, 1), false)
			for range 3 {
				s.Post(1, s.WRs(1, 1, tc.op, 0, tc.sges, tc.bytes, 2), 0, 1)
			}
			s.Poll(1, 1)
			snap := run(t, s, Options{BF: DefaultBF})
			q := snap.QPs[0]
			if q.WRs != 3 || q.Signaled != 1 || q.WQEBBs != 3*tc.wqebbs || q.Outstanding != 1 || q.EINVAL != 0 {
				t.Errorf("WRs %d signaled %d WQEBBs %d outstanding %d EINVAL %d; want 3, 1, %d, 1, 0",
					q.WRs, q.Signaled, q.WQEBBs, q.Outstanding, q.EINVAL, 3*tc.wqebbs)
			}
			if len(snap.Diagnoses) != 0 {
				t.Errorf("diagnoses %v", diagKinds(snap))
			}
		})
	}
}

// opcodeValid follows the QP type: UD sends, raw packet QPs send, TSO on
// both, every other opcode on the connected types.
func TestOpcodeValid(t *testing.T) {
	for _, tc := range []struct {
		typ  trace.QPType
		op   uint8
		want bool
	}{
		{trace.QPTypeUD, ibv.WRSendWithImm, true},
		{trace.QPTypeUD, ibv.WRTSO, true},
		{trace.QPTypeUD, ibv.WRAtomicCmpAndSwp, false},
		{trace.QPTypeRC, ibv.WRTSO, false},
		{trace.QPTypeRC, ibv.WRBindMW, true},
		{trace.QPTypeRC, ibv.WRAtomicWrite, true},
		{trace.QPTypeRawPkt, ibv.WRSend, true},
		{trace.QPTypeRawPkt, ibv.WRSendWithImm, false},
		{trace.QPTypeRC, ibv.WRDriver1, false},
	} {
		if got := opcodeValid(tc.typ, tc.op); got != tc.want {
			t.Errorf("opcodeValid(%s, %s) = %v, want %v", tc.typ, ibv.OpName(tc.op), got, tc.want)
		}
	}
}

// An extended poll's completions have no QP number: each is matched by
// its wr_id to the QP of the CQ that has it outstanding; one that matches
// none is counted on the CQ, never on a QP.
func TestExtendedPollFindsTheQP(t *testing.T) {
	s := streamtest.New()
	shared := uint64(0x5000)
	for _, qpn := range []uint32{1, 2} {
		s.Add(&trace.QPCreate{Header: s.Header(), QP: streamtest.QPAddr(qpn), QPNum: qpn, Type: trace.QPTypeRC,
			SendCQ: shared, RecvCQ: shared, Caps: streamtest.RCCaps(8, 60, 1), Via: "sqsim_create_qp"})
	}
	s.Add(&trace.CQChange{Header: s.Header(), Op: trace.CQOpCreateEx, CQ: shared, CQE: 63, Via: "sqsim_create_cq_ex"})
	s.IDs[2] = 100     // QP 2's wr_ids start at 100
	s.Send(1, 4, 0, 2) // ids 0..3, 1 and 3 signaled
	s.Send(2, 4, 0, 4) // ids 100..103, 103 signaled
	s.ExPoll(shared, 1, 103, 3)
	s.ExPoll(shared, 77) // a receive completion, say
	s.Add(&trace.CQChange{Header: s.Header(), Op: trace.CQOpResize, CQ: shared, CQE: 127, Via: "sqsim_resize_cq"})
	snap := run(t, s, Options{BF: DefaultBF})
	for _, q := range snap.QPs {
		if q.Outstanding != 0 || q.UnmatchedCQEs != 0 {
			t.Errorf("QP %d: outstanding %d, unmatched %d; want both 0", q.QPNum, q.Outstanding, q.UnmatchedCQEs)
		}
	}
	if snap.QPs[0].CQEsPolled != 2 || snap.QPs[1].CQEsPolled != 1 {
		t.Errorf("CQEs polled %d and %d, want 2 and 1", snap.QPs[0].CQEsPolled, snap.QPs[1].CQEsPolled)
	}
	if len(snap.CQs) != 1 {
		t.Fatalf("CQs %+v", snap.CQs)
	}
	c := snap.CQs[0]
	if !c.Extended || c.CQE != 127 || c.Resizes != 1 || c.UnmatchedExCQEs != 1 || c.Polls != 2 || c.CQEs != 4 {
		t.Errorf("CQ %+v: want extended, depth 127 after 1 resize, 1 unmatched, 2 polls, 4 CQEs", c)
	}
}

// Posts on a shared receive queue belong to no QP.
func TestSRQPostsAreNotAQP(t *testing.T) {
	s := streamtest.New()
	s.Add(&trace.PostRecv{Header: s.Header(), QP: 0x9000, NumWRs: 5, Accepted: 5, SRQ: true})
	snap := run(t, s, Options{})
	if len(snap.QPs) != 0 || snap.SRQRecvs == nil || *snap.SRQRecvs != 5 {
		t.Errorf("QPs %d, SRQ receives %v; want 0 and 5", len(snap.QPs), snap.SRQRecvs)
	}
	if len(snap.SRQs) != 1 || snap.SRQs[0].Recv == nil || *snap.SRQs[0].Recv != (SRQRecv{PostCalls: 1, Posted: 5}) {
		t.Errorf("SRQs %+v: want one, created before tracing, with 5 receives in 1 call", snap.SRQs)
	}
}

// Calls the trace did not see show in the QP's own numbers, and say so.
func TestCallsNotTraced(t *testing.T) {
	t.Run("builders not traced", func(t *testing.T) {
		d := streamtest.CallsNotTraced
		checkDiagnoses(t, []streamtest.Diag{d})
		s := streamtest.New()
		d.Build(s)
		q := run(t, s, Options{BF: DefaultBF}).QPs[0]
		if q.EmptyWRBatches != 3 || q.UnmatchedCQEs != 1 || q.WRs != 0 {
			t.Errorf("empty batches %d, unmatched %d, WRs %d; want 3, 1, 0", q.EmptyWRBatches, q.UnmatchedCQEs, q.WRs)
		}
	})
	t.Run("completions not traced", func(t *testing.T) {
		s := streamtest.New()
		s.Create(1, trace.QPTypeRC, streamtest.RCCaps(1, 60, 1), false)
		for range 5 {
			s.Send(1, 1, 0, 1)
		}
		snap := run(t, s, Options{BF: DefaultBF})
		if got := diagKinds(snap); len(got) != 1 || got[0] != "calls_not_traced" {
			t.Fatalf("diagnoses %v, want calls_not_traced", got)
		}
		if d := snap.Diagnoses[0]; d.Count != 1 || d.Evidence["outstanding"] != 2 || !strings.Contains(d.Message, "more than max_send_wr 1") {
			t.Errorf("diagnosis %+v", d)
		}
	})
}

// What CQ calls say, and the extended polls of a CQ, belong to one CQ
// lifetime: the one its create started. A CQ created again at the address,
// with generations or in a recording without them, has figures of its own,
// and its extended polls match only its own QPs.
func TestCQCallsPerLifetime(t *testing.T) {
	const c = uint64(0x5000)
	for _, gens := range []bool{true, false} {
		t.Run(map[bool]string{true: "generations", false: "no generations"}[gens], func(t *testing.T) {
			s := streamtest.New()
			create := func(gen uint64, cqe int32) {
				if gens {
					s.Add(&trace.CQCreate{Header: s.Header(), CQ: c, Gen: gen, CQE: uint32(cqe)})
				}
				s.Add(&trace.CQChange{Header: s.Header(), Op: trace.CQOpCreateEx, CQ: c, CQE: cqe, Via: "sqsim_create_cq_ex"})
			}
			qp := func(qpn uint32) {
				s.Add(&trace.QPCreate{Header: s.Header(), QP: streamtest.QPAddr(qpn), QPNum: qpn, Type: trace.QPTypeRC,
					SendCQ: c, RecvCQ: c, Caps: streamtest.RCCaps(8, 60, 1), Via: "sqsim_create_qp"})
			}
			create(1, 63)
			qp(1)
			s.Send(1, 2, 0, 2) // ids 0 and 1, 1 signaled
			s.ExPoll(c, 1)
			s.Add(&trace.CQChange{Header: s.Header(), Op: trace.CQOpModify, CQ: c, ModCount: 8, ModPeriodUS: 16},
				&trace.QPDestroy{Header: s.Header(), QP: streamtest.QPAddr(1), QPNum: 1},
				&trace.CQChange{Header: s.Header(), Op: trace.CQOpDestroy, CQ: c})
			create(3, 127)
			qp(2)
			s.Send(2, 2, 0, 2) // the same wr_ids as QP 1's
			s.ExPoll(c, 1, 99)
			snap := run(t, s, Options{BF: DefaultBF})
			if len(snap.CQs) != 2 {
				t.Fatalf("CQs %+v, want 2", snap.CQs)
			}
			gen := func(g uint64) uint64 {
				if gens {
					return g
				}
				return 0
			}
			old, cur := snap.CQs[0], snap.CQs[1]
			if old.Gen != gen(1) || !old.Extended || old.CQE != 63 || old.ModCount != 8 || old.ModPeriodUS != 16 ||
				!old.Destroyed || !old.Replaced || old.Polls != 1 || old.CQEs != 1 || old.UnmatchedExCQEs != 0 {
				t.Errorf("first CQ %+v", old)
			}
			if cur.Gen != gen(3) || !cur.Extended || cur.CQE != 127 || cur.ModCount != 0 || cur.Destroyed || cur.Replaced ||
				cur.Polls != 1 || cur.CQEs != 2 || cur.UnmatchedExCQEs != 1 {
				t.Errorf("second CQ %+v", cur)
			}
			for _, q := range snap.QPs {
				if q.CQEsPolled != 1 || q.Outstanding != 0 || q.UnmatchedCQEs != 0 {
					t.Errorf("QP %d: CQEs polled %d, outstanding %d, unmatched %d; want 1, 0, 0", q.QPNum, q.CQEsPolled, q.Outstanding, q.UnmatchedCQEs)
				}
			}
			if q := snap.QPs[1]; q.SendCQGen != gen(3) {
				t.Errorf("QP 2's send CQ generation %d, want %d", q.SendCQGen, gen(3))
			}
		})
	}
}
