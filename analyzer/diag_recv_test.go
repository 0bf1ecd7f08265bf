package analyzer

import (
	"maps"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

func TestRecvDiagnoses(t *testing.T) {
	tests := []struct {
		name   string
		golden string
		build  func(s *streamtest.Stream)
		want   []string
	}{
		{"receiver stops reposting: the SQ fills", "rq_starved", func(s *streamtest.Stream) {
			s.Pair(4)
			s.Send(1, 4, 0, 2)
			s.RecvDone(2, 4) // the 4 receives taken, none posted again
			s.Poll(1, 1, 3)
			s.Send(1, 8, 0, 2) // wait on RNR retries
			s.EmptyPolls(1, 3)
			s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
		}, []string{"rq_starved"}},

		{"receiver reposts: quiet", "", func(s *streamtest.Stream) {
			s.Pair(4)
			next := uint64(1)
			for range 10 {
				s.Send(1, 4, 0, 2)
				s.RecvDone(2, 4)
				s.PostRecv(2, 4)
				s.Poll(1, next, next+2)
				next += 4
				s.EmptyPolls(1, 2)
			}
		}, nil},

		{"RNR retries run out", "rnr_retry_exceeded", func(s *streamtest.Stream) {
			s.Pair(2)
			s.Send(1, 4, ibv.SendSignaled, 0)
			s.RecvDone(2, 2)
			s.Poll(1, 0, 1)
			h := s.Header()
			s.Add(&trace.Poll{Header: h, CQ: streamtest.CQAddr(1), Max: 16, Ret: 2, WCs: []trace.WC{
				{ID: 2, Status: ibv.WCRNRRetryExcErr, QPNum: 1}, {ID: 3, Status: ibv.WCWRFlushErr, QPNum: 1}}})
		}, []string{"rnr_retry_exceeded"}},

		{"receiver not traced: the SQ-full cause stands", "", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(8, 60, 1), false)
			s.ToRTS(1)
			for range 4 {
				s.Send(1, 2, 0, 2)
				s.EmptyPolls(1, 3)
			}
			s.Post(1, s.WRs(1, 2, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
		}, []string{"sq_overflow_completions_slow"}},

		{"WRITEs do not take receives", "", func(s *streamtest.Stream) {
			s.Pair(2)
			s.RecvDone(2, 2)
			for range 4 {
				s.Post(1, s.WRs(1, 2, ibv.WRRDMAWrite, 0, 1, 32, 2), 0, 2)
				s.EmptyPolls(1, 3)
			}
			s.Post(1, s.WRs(1, 2, ibv.WRRDMAWrite, 0, 1, 32, 2), ibv.ENOMEM, 0)
		}, []string{"sq_overflow_completions_slow"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkDiagnoses(t, tc.build, tc.want, tc.golden)
		})
	}
}

func TestRecvEvidence(t *testing.T) {
	s := streamtest.New()
	s.Pair(4)
	s.Send(1, 4, 0, 2)
	s.RecvDone(2, 4)
	s.Poll(1, 1, 3)
	s.Send(1, 8, 0, 2)
	s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
	snap := run(t, s, Options{BF: DefaultBF})
	if len(snap.Diagnoses) != 1 || snap.Diagnoses[0].Kind != "rq_starved" {
		t.Fatalf("diagnoses %q", diagKinds(snap))
	}
	want := map[string]uint64{"outstanding": 8, "max_send_wr": 8, "receiver_qp": 2, "recvs_posted": 4,
		"recvs_completed": 4, "max_recv_wr": 4, "receivers_empty": 1, "receivers_traced": 1}
	if got := snap.Diagnoses[0].Evidence; !maps.Equal(got, want) {
		t.Fatalf("evidence %v, want %v", got, want)
	}
	var recv QP
	for _, q := range snap.QPs {
		if q.QPNum == 2 {
			recv = q
		}
	}
	if recv.PostRecvs != 4 || recv.RecvCQEs != 4 {
		t.Fatalf("receiver post_recvs %d, recv_cqes_polled %d; want 4, 4", recv.PostRecvs, recv.RecvCQEs)
	}
}
