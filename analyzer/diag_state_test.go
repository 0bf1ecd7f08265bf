package analyzer

import (
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// modify reports an ibv_modify_qp of qpn to state that returned ret.
func (s *stream) modify(qpn uint32, state int32, ret int32) {
	s.evs = append(s.evs, &trace.QPModify{Header: s.hdr(), QP: qpAddr(qpn), QPNum: qpn, State: state, Ret: ret})
}

// toRTS moves qpn through INIT and RTR to RTS.
func (s *stream) toRTS(qpn uint32) {
	for _, st := range []int32{ibv.QPSInit, ibv.QPSRTR, ibv.QPSRTS} {
		s.modify(qpn, st, 0)
	}
}

// cqCreate reports the create of qpn's send CQ with cqe entries.
func (s *stream) cqCreate(qpn uint32, cqe int32) {
	s.evs = append(s.evs, &trace.CQChange{Header: s.hdr(), Op: trace.CQOpCreate, CQ: cqAddr(qpn), CQE: cqe, Via: "sqsim_create_cq"})
}

// signaled posts n signaled SENDs one per call and returns their wr_ids.
func (s *stream) signaled(qpn uint32, n int) []uint64 {
	var ids []uint64
	for range n {
		ids = append(ids, s.ids[qpn])
		s.send(qpn, 1, ibv.SendSignaled, 0)
	}
	return ids
}

func TestStateDiagnoses(t *testing.T) {
	tests := []struct {
		name   string
		golden string // testdata/diag_NAME.golden; empty for none
		build  func(s *stream)
		want   []string // kinds, newest first
	}{
		{"post_send before RTS", "not_rts_post_send", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 1), false)
			s.modify(1, ibv.QPSInit, 0)
			s.modify(1, ibv.QPSRTR, 0)
			for range 3 {
				s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
			}
		}, []string{"post_qp_not_rts"}},

		{"wr api before RTS", "not_rts_wr_api", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 1), false)
			s.modify(1, ibv.QPSInit, 0)
			p := &trace.Post{Header: s.hdr(), QP: qpAddr(1), QPNum: 1, API: trace.APIWR,
				WRs: s.wrs(1, 2, ibv.WRSend, 0, 1, 32, 2), Ret: ibv.EINVAL}
			s.ids[1] -= 2
			s.evs = append(s.evs, p)
		}, []string{"post_qp_not_rts"}},

		{"post after a reset", "not_rts_after_reset", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 1), false)
			s.toRTS(1)
			ids := s.signaled(1, 2)
			s.poll(1, ids...)
			s.modify(1, ibv.QPSReset, 0)
			s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
		}, []string{"post_qp_not_rts"}},

		{"too many SGEs in RTS stays too many SGEs", "", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 2), false)
			s.toRTS(1)
			s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 3, 96, 1), ibv.ENOMEM, 0)
		}, []string{"too_many_sge"}},

		{"a failed move to RTS leaves the SQ closed", "", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 1), false)
			s.modify(1, ibv.QPSInit, 0)
			s.modify(1, ibv.QPSRTR, 0)
			s.modify(1, ibv.QPSRTS, ibv.EINVAL)
			s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
		}, []string{"post_qp_not_rts"}},

		{"posts in ERR after RTS are taken (flushed)", "", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 1), false)
			s.toRTS(1)
			s.modify(1, ibv.QPSErr, 0)
			s.send(1, 2, ibv.SendSignaled, 0)
		}, nil},

		{"no modify seen: no claim", "", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 1), false)
			s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
		}, nil},

		{"more pending than the CQ holds", "cq_overrun_risk", func(s *stream) {
			s.cqCreate(1, 15)
			s.create(1, trace.QPTypeRC, rcCaps(64, 60, 1), false)
			s.toRTS(1)
			s.poll(1, s.signaled(1, 16)...)
		}, []string{"cq_overrun_risk"}},

		{"a CQ run exactly full by flow control: quiet", "", func(s *stream) {
			s.cqCreate(1, 15)
			s.create(1, trace.QPTypeRC, rcCaps(64, 60, 1), false)
			s.toRTS(1)
			for range 5 {
				s.poll(1, s.signaled(1, 15)...)
			}
		}, nil},

		{"CQ overrun", "cq_overrun", func(s *stream) {
			s.cqCreate(1, 15)
			s.create(1, trace.QPTypeRC, rcCaps(64, 60, 1), false)
			s.toRTS(1)
			ids := s.signaled(1, 20)
			s.poll(1, ids[:15]...)
			s.emptyPolls(1, 5)
		}, []string{"cq_overrun", "cq_overrun_risk"}},

		{"over the depth but polled in time: a risk, no overrun", "", func(s *stream) {
			s.cqCreate(1, 15)
			s.create(1, trace.QPTypeRC, rcCaps(64, 60, 1), false)
			s.toRTS(1)
			ids := s.signaled(1, 20)
			s.poll(1, ids[:16]...)
			s.poll(1, ids[16:]...)
			s.emptyPolls(1, 5)
		}, []string{"cq_overrun_risk"}},

		{"CQ polled as it fills: quiet", "", func(s *stream) {
			s.cqCreate(1, 15)
			s.create(1, trace.QPTypeRC, rcCaps(64, 60, 1), false)
			s.toRTS(1)
			for range 10 {
				s.poll(1, s.signaled(1, 8)...)
				s.emptyPolls(1, 2)
			}
		}, nil},

		{"CQ depth unknown: no claim", "", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(64, 60, 1), false)
			s.toRTS(1)
			s.signaled(1, 40)
			s.emptyPolls(1, 5)
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkDiagnoses(t, tc.build, tc.want, tc.golden)
		})
	}
}

func TestStateEvidence(t *testing.T) {
	tests := []struct {
		name  string
		build func(s *stream)
		kind  string
		count uint64
		want  map[string]uint64
		qp    Counters // NotRTS, ENOMEMSGE, EINVAL of QP 1
	}{
		{"post_send in RTR", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 1), false)
			s.modify(1, ibv.QPSInit, 0)
			s.modify(1, ibv.QPSRTR, 0)
			s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
			s.post(1, s.wrs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
		}, "post_qp_not_rts", 2, map[string]uint64{"qp_state": ibv.QPSRTR, "errno": ibv.ENOMEM, "api": 0,
			"wr_index": 0, "num_sge": 1, "max_send_sge": 1, "posts_refused": 2}, Counters{NotRTS: 2}},
		{"wr api in INIT", func(s *stream) {
			s.create(1, trace.QPTypeRC, rcCaps(16, 60, 1), false)
			s.modify(1, ibv.QPSInit, 0)
			s.evs = append(s.evs, &trace.Post{Header: s.hdr(), QP: qpAddr(1), QPNum: 1, API: trace.APIWR,
				WRs: []trace.WR{{ID: 0, Opcode: ibv.WRSend, NumSGE: 1, Bytes: 8}}, Ret: ibv.EINVAL})
		}, "post_qp_not_rts", 1, map[string]uint64{"qp_state": ibv.QPSInit, "errno": ibv.EINVAL, "api": 1,
			"wr_index": 0, "num_sge": 1, "max_send_sge": 1, "posts_refused": 1}, Counters{NotRTS: 1, EINVAL: 1}},
		{"overrun of a 15-entry CQ", func(s *stream) {
			s.cqCreate(1, 15)
			s.create(1, trace.QPTypeRC, rcCaps(64, 60, 1), false)
			s.toRTS(1)
			ids := s.signaled(1, 20)
			s.poll(1, ids[:15]...)
			s.emptyPolls(1, 5)
		}, "cq_overrun", 1, map[string]uint64{"completions_pending": 16, "cq_depth": 15, "cq": 0x2001,
			"cqes_returned_since": 15, "over_since_ns": 3100, "cq_qps": 1, "still_pending": 5}, Counters{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStream()
			tc.build(s)
			snap := s.run(t, Options{BF: DefaultBF})
			checkEvidence(t, snap, tc.kind, tc.count, tc.want)
			q := snap.QPs[0].Counters
			if got := (Counters{NotRTS: q.NotRTS, ENOMEMSGE: q.ENOMEMSGE, EINVAL: q.EINVAL}); got != tc.qp {
				t.Errorf("QP counters not_rts %d, enomem_sge %d, einval %d; want %d, %d, %d",
					q.NotRTS, q.ENOMEMSGE, q.EINVAL, tc.qp.NotRTS, tc.qp.ENOMEMSGE, tc.qp.EINVAL)
			}
		})
	}
}
