package analyzer

import (
	"maps"
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// postRecv reports n receives posted on qpn, all accepted.
func (s *stream) postRecv(qpn uint32, n int) {
	s.evs = append(s.evs, &trace.PostRecv{Header: s.hdr(), QP: qpAddr(qpn), QPNum: qpn, NumWRs: uint32(n), Accepted: uint32(n)})
}

// recvDone reports n receive completions of qpn polled on its CQ.
func (s *stream) recvDone(qpn uint32, n int) {
	h := s.hdr()
	p := &trace.Poll{Header: h, CQ: cqAddr(qpn), Max: 64, Ret: int32(n), EntryNS: h.TimeNS - 30}
	for i := range n {
		p.WCs = append(p.WCs, trace.WC{ID: uint64(i), Opcode: ibv.WCRecv, ByteLen: 32, QPNum: qpn})
	}
	s.evs = append(s.evs, p)
}

// pair creates sender 1 (SQ depth 8, signaled every 2nd WR) and receiver
// 2 (RQ depth rq), both in RTS, the receiver with rq receives posted.
func (s *stream) pair(rq uint32) {
	s.create(1, trace.QPTypeRC, rcCaps(8, 60, 1), false)
	s.toRTS(1)
	s.create(2, trace.QPTypeRC, trace.Caps{MaxSendWR: 1, MaxRecvWR: rq, MaxSendSGE: 1, MaxRecvSGE: 1}, false)
	s.toRTS(2)
	s.postRecv(2, int(rq))
}

func TestRecvDiagnoses(t *testing.T) {
	tests := []struct {
		name   string
		golden string
		build  func(s *stream)
		want   []string
	}{
		{"receiver stops reposting: the SQ fills", "rq_starved", func(s *stream) {
			s.pair(4)
			s.send(1, 4, 0, 2)
			s.recvDone(2, 4) // the 4 receives taken, none posted again
			s.poll(1, 1, 3)
			s.send(1, 8, 0, 2) // wait on RNR retries
			s.emptyPolls(1, 3)
			s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
		}, []string{"rq_starved"}},

		{"receiver reposts: quiet", "", func(s *stream) {
			s.pair(4)
			next := uint64(1)
			for range 10 {
				s.send(1, 4, 0, 2)
				s.recvDone(2, 4)
				s.postRecv(2, 4)
				s.poll(1, next, next+2)
				next += 4
				s.emptyPolls(1, 2)
			}
		}, nil},

		{"RNR retries run out", "rnr_retry_exceeded", func(s *stream) {
			s.pair(2)
			s.send(1, 4, ibv.SendSignaled, 0)
			s.recvDone(2, 2)
			s.poll(1, 0, 1)
			h := s.hdr()
			s.evs = append(s.evs, &trace.Poll{Header: h, CQ: cqAddr(1), Max: 16, Ret: 2, WCs: []trace.WC{
				{ID: 2, Status: ibv.WCRNRRetryExcErr, QPNum: 1}, {ID: 3, Status: ibv.WCWRFlushErr, QPNum: 1}}})
		}, []string{"rnr_retry_exceeded"}},

		{"receiver not traced: the SQ-full cause stands", "", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(8, 60, 1), false)
			s.toRTS(1)
			for range 4 {
				s.send(1, 2, 0, 2)
				s.emptyPolls(1, 3)
			}
			s.post(1, s.wrs(1, 2, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
		}, []string{"sq_overflow_completions_slow"}},

		{"WRITEs do not take receives", "", func(s *stream) {
			s.pair(2)
			s.recvDone(2, 2)
			for range 4 {
				s.post(1, s.wrs(1, 2, ibv.WRRDMAWrite, 0, 1, 32, 2), 0, 2)
				s.emptyPolls(1, 3)
			}
			s.post(1, s.wrs(1, 2, ibv.WRRDMAWrite, 0, 1, 32, 2), ibv.ENOMEM, 0)
		}, []string{"sq_overflow_completions_slow"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkDiagnoses(t, tc.build, tc.want, tc.golden)
		})
	}
}

func TestRecvEvidence(t *testing.T) {
	s := newStream()
	s.pair(4)
	s.send(1, 4, 0, 2)
	s.recvDone(2, 4)
	s.poll(1, 1, 3)
	s.send(1, 8, 0, 2)
	s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
	snap := s.run(t, Options{BF: DefaultBF})
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
