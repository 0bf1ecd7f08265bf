package analyzer

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

func TestStateDiagnoses(t *testing.T) { checkDiagnoses(t, streamtest.StateDiagnoses) }

func TestStateEvidence(t *testing.T) {
	tests := []struct {
		name  string
		build func(s *streamtest.Stream)
		kind  string
		count uint64
		want  map[string]uint64
		qp    Counters // NotRTS, ENOMEMSGE, EINVAL of QP 1
	}{
		{"post_send in RTR", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
			s.Modify(1, ibv.QPSInit, 0)
			s.Modify(1, ibv.QPSRTR, 0)
			s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
			s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
		}, "post_qp_not_rts", 2, map[string]uint64{"qp_state": ibv.QPSRTR, "errno": ibv.ENOMEM, "api": 0,
			"wr_index": 0, "num_sge": 1, "max_send_sge": 1, "posts_refused": 2}, Counters{NotRTS: 2}},
		{"wr api in INIT", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
			s.Modify(1, ibv.QPSInit, 0)
			s.Add(&trace.Post{Header: s.Header(), QP: streamtest.QPAddr(1), QPNum: 1, API: trace.APIWR,
				WRs: []trace.WR{{ID: 0, Opcode: ibv.WRSend, NumSGE: 1, Bytes: 8}}, Ret: ibv.EINVAL})
		}, "post_qp_not_rts", 1, map[string]uint64{"qp_state": ibv.QPSInit, "errno": ibv.EINVAL, "api": 1,
			"wr_index": 0, "num_sge": 1, "max_send_sge": 1, "posts_refused": 1}, Counters{NotRTS: 1, EINVAL: 1}},
		{"overrun of a 15-entry CQ", func(s *streamtest.Stream) {
			s.SmallCQ()
			ids := s.Signaled(1, 20)
			s.Poll(1, ids[:15]...)
			s.EmptyPolls(1, 5)
			s.Wait(300e6)
			s.EmptyPolls(1, 5)
		}, "cq_overrun", 1, map[string]uint64{"completions_pending": 16, "cq_depth": 15, "cq": 0x2001,
			"cqes_returned_since": 15, "over_since_ns": 3100, "cq_qps": 1, "still_pending": 5}, Counters{}},
		{"completions dropped by a 15-entry CQ", func(s *streamtest.Stream) {
			s.SmallCQ()
			ids := s.Signaled(1, 20)
			s.Poll(1, ids[:15]...)
			s.Poll(1, ids[19])
		}, "cq_overrun", 1, map[string]uint64{"completions_pending": 16, "cq_depth": 15, "cq": 0x2001,
			"cqes_returned_since": 16, "over_since_ns": 3100, "cq_qps": 1, "completions_skipped": 4}, Counters{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.build(s)
			snap := run(t, s, Options{BF: DefaultBF})
			checkEvidence(t, snap, tc.kind, tc.count, tc.want)
			q := snap.QPs[0].Counters
			if got := (Counters{NotRTS: q.NotRTS, ENOMEMSGE: q.ENOMEMSGE, EINVAL: q.EINVAL}); got != tc.qp {
				t.Errorf("QP counters not_rts %d, enomem_sge %d, einval %d; want %d, %d, %d",
					q.NotRTS, q.ENOMEMSGE, q.EINVAL, tc.qp.NotRTS, tc.qp.ENOMEMSGE, tc.qp.EINVAL)
			}
		})
	}
}
