package streamtest

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Diag is a stream and the diagnoses the analyzer gives of it. The
// analyzer's tests hold it to Kinds; the report's write its diagnoses,
// text and JSON, to the golden file testdata/diag_GOLDEN.golden.
type Diag struct {
	Name   string
	Golden string // "" for none: a stream the report's tests leave out
	Build  func(s *Stream)
	Kinds  []string // newest first
}

// Diagnoses are a stream for each diagnosis of the send queue: SQ
// overflow by cause, predictions, bad WRs.
var Diagnoses = []Diag{
	{"never_signaled", "never_signaled", func(s *Stream) {
		// with no WR signaled yet, a run of 7/8 of the depth predicts
		s.Create(1, trace.QPTypeRC, RCCaps(8, 60, 1), false)
		for range 8 {
			s.Send(1, 1, ibv.SendInline, 0)
		}
		s.Post(1, s.WRs(1, 1, ibv.WRSend, ibv.SendInline, 1, 32, 0), ibv.ENOMEM, 0)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, ibv.SendInline, 1, 32, 0), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_never_signaled", "unsignaled_run_near_depth"}},

	{"late_attach_never_signaled", "late_attach_never_signaled", func(s *Stream) {
		// no QPCreate: the depth is inferred from the first SQ-full ENOMEM
		// (by the simulated HCA's rules: its post_send was found by symbol)
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: "app", How: trace.HowSimSymbol})
		for range 3 {
			s.Send(3, 1, 0, 0)
		}
		s.Post(3, s.WRs(3, 1, ibv.WRSend, 0, 1, 32, 0), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_never_signaled"}},

	{"unsignaled_run", "unsignaled_run", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(8, 60, 1), false)
		for i := range uint64(3) {
			s.Send(1, 2, 0, 2)
			s.Poll(1, 2*i+1)
		}
		for range 8 {
			s.Send(1, 1, 0, 0)
		}
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 0), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_unsignaled_run", "unsignaled_run_near_depth"}},

	{"cq_not_polled", "cq_not_polled", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(8, 60, 1), false)
		s.Send(1, 4, 0, 4)
		s.Poll(1, 3)
		s.Send(1, 4, 0, 4)
		s.Send(1, 4, 0, 4)
		s.Post(1, s.WRs(1, 2, ibv.WRSend, 0, 1, 32, 4), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_cq_not_polled"}},

	{"cq_never_polled", "cq_never_polled", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(8, 60, 1), false)
		s.Send(1, 4, 0, 4)
		s.Send(1, 4, 0, 4)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 4), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_cq_not_polled"}},

	{"polls_too_rare", "polls_too_rare", func(s *Stream) {
		// 4 WRs posted per poll, and each poll takes one CQE (2 WRs)
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		next := uint64(1)
		for range 7 {
			s.Send(1, 2, 0, 2)
			s.Send(1, 2, 0, 2)
			s.Poll(1, next)
			next += 2
		}
		s.Send(1, 2, 0, 2)
		s.Post(1, s.WRs(1, 2, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_polls_too_rare"}},

	{"completions_slow", "completions_slow", func(s *Stream) {
		// the CQ is polled after every post, but the CQEs are not there yet
		s.Create(1, trace.QPTypeRC, RCCaps(8, 60, 1), false)
		for range 4 {
			s.Send(1, 2, 0, 2)
			s.EmptyPolls(1, 3)
		}
		s.Post(1, s.WRs(1, 2, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_completions_slow"}},

	{"inline_too_big", "inline_too_big", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, ibv.SendInline, 1, 61, 1), ibv.ENOMEM, 0)
		s.Post(1, []trace.WR{{ID: 0, Opcode: ibv.WRSend, Flags: ibv.SendInline | ibv.SendSignaled, NumSGE: 1, Bytes: 60},
			{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendInline | ibv.SendSignaled, NumSGE: 1, Bytes: 200}}, ibv.ENOMEM, 1)
	}, []string{"inline_too_big"}},

	{"inline_unsupported", "inline_unsupported", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 0, 1), false)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, ibv.SendInline, 1, 32, 1), ibv.ENOMEM, 0)
	}, []string{"inline_unsupported"}},

	{"too_many_sge", "too_many_sge", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 2), false)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 3, 96, 1), ibv.ENOMEM, 0)
	}, []string{"too_many_sge"}},

	{"einval", "einval", func(s *Stream) {
		s.Create(1, trace.QPTypeUD, RCCaps(16, 60, 1), false)
		s.Post(1, s.WRs(1, 1, ibv.WRRDMAWrite, 0, 1, 32, 1), ibv.EINVAL, 0)
	}, []string{"einval"}},

	{"sig_all_flag", "sig_all_flag", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), true)
		s.Send(1, 4, 0, 4)
		s.Poll(1, 0, 1, 2, 3)
		s.Send(1, 4, 0, 4)
		s.Poll(1, 4, 5, 6, 7)
	}, []string{"sig_all_ignores_signaled_flag"}},

	{"run_near_depth", "run_near_depth", func(s *Stream) {
		// runs of 3, then one of 12 (75% of the depth): the pattern broke
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.Send(1, 8, 0, 4)
		s.Poll(1, 3, 7)
		s.Send(1, 12, 0, 0)
		s.Send(1, 1, ibv.SendSignaled, 0)
		s.Poll(1, 20)
	}, []string{"unsignaled_run_near_depth"}},

	{"trending_full", "trending_full", func(s *Stream) {
		// 5 WRs posted and 3 completed per 10 ms window: +2 per window
		s.Create(1, trace.QPTypeRC, RCCaps(64, 60, 1), true)
		s.DT = 1_000_000
		next := uint64(0)
		for range 20 {
			for range 5 {
				s.Send(1, 1, 0, 0)
			}
			s.Poll(1, next, next+1, next+2)
			next += 3
			s.Wait(4_000_000)
		}
	}, []string{"occupancy_trending_full"}},

	{"dedup_newest_first", "dedup_newest_first", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.Create(2, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		for range 3 {
			s.Post(1, s.WRs(1, 1, 12, 0, 1, 32, 1), ibv.EINVAL, 0)
		}
		s.Post(2, s.WRs(2, 1, ibv.WRSend, ibv.SendInline, 1, 100, 1), ibv.ENOMEM, 0)
		s.Post(1, s.WRs(1, 1, 12, 0, 1, 32, 1), ibv.EINVAL, 0)
	}, []string{"einval", "inline_too_big"}},
}

// StateDiagnoses are streams where the QP's state or its CQ's depth
// decides: posts before RTS, a CQ overrun and its risk, and where no
// claim can be made.
var StateDiagnoses = []Diag{
	{"post_send before RTS", "not_rts_post_send", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.Modify(1, ibv.QPSInit, 0)
		s.Modify(1, ibv.QPSRTR, 0)
		for range 3 {
			s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
		}
	}, []string{"post_qp_not_rts"}},

	{"wr api before RTS", "not_rts_wr_api", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.Modify(1, ibv.QPSInit, 0)
		p := &trace.Post{Header: s.Header(), QP: QPAddr(1), QPNum: 1, API: trace.APIWR,
			WRs: s.WRs(1, 2, ibv.WRSend, 0, 1, 32, 2), Ret: ibv.EINVAL}
		s.IDs[1] -= 2
		s.Add(p)
	}, []string{"post_qp_not_rts"}},

	{"post after a reset", "not_rts_after_reset", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.ToRTS(1)
		ids := s.Signaled(1, 2)
		s.Poll(1, ids...)
		s.Modify(1, ibv.QPSReset, 0)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
	}, []string{"post_qp_not_rts"}},

	{"too many SGEs in RTS stays too many SGEs", "", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 2), false)
		s.ToRTS(1)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 3, 96, 1), ibv.ENOMEM, 0)
	}, []string{"too_many_sge"}},

	{"a failed move to RTS leaves the SQ closed", "", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.Modify(1, ibv.QPSInit, 0)
		s.Modify(1, ibv.QPSRTR, 0)
		s.Modify(1, ibv.QPSRTS, ibv.EINVAL)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
	}, []string{"post_qp_not_rts"}},

	{"posts in ERR after RTS are taken (flushed)", "", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.ToRTS(1)
		s.Modify(1, ibv.QPSErr, 0)
		s.Send(1, 2, ibv.SendSignaled, 0)
	}, nil},

	{"no modify seen: no claim", "", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(16, 60, 1), false)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
	}, nil},

	{"more pending than the CQ holds", "cq_overrun_risk", func(s *Stream) {
		s.SmallCQ()
		s.Poll(1, s.Signaled(1, 16)...)
	}, []string{"cq_overrun_risk"}},

	{"a CQ run exactly full by flow control: quiet", "", func(s *Stream) {
		s.SmallCQ()
		for range 5 {
			s.Poll(1, s.Signaled(1, 15)...)
		}
	}, nil},

	{"CQ overrun", "cq_overrun", func(s *Stream) {
		s.SmallCQ()
		ids := s.Signaled(1, 20)
		s.Poll(1, ids[:15]...)
		s.EmptyPolls(1, 5)
		s.Wait(300e6) // dry for good
		s.EmptyPolls(1, 5)
	}, []string{"cq_overrun", "cq_overrun_risk"}},

	{"CQ overrun that drops completions and goes on (rxe)", "cq_overrun_dropped", func(s *Stream) {
		s.SmallCQ()
		ids := s.Signaled(1, 20)
		s.Poll(1, ids[:15]...)
		s.Poll(1, ids[19]) // 15..18 dropped on the full CQ
	}, []string{"cq_overrun", "cq_overrun_risk"}},

	{"a late QP synced past completions polled before the attach: no overrun", "", func(s *Stream) {
		s.CQCreate(1, 15)
		s.MemQP(1, ibv.QPSRTS)
		ids := s.Signaled(1, 20)
		s.Poll(1, ids[19]) // the first completion seen: the others' polled unseen
	}, []string{"cq_overrun_risk"}},

	{"completions out of sight, pending within the CQ: no overrun", "", func(s *Stream) {
		s.SmallCQ()
		ids := s.Signaled(1, 10)
		s.Poll(1, ids[9])
	}, nil},

	{"over the depth, dry a while, then a completion: a slow HCA, no overrun", "", func(s *Stream) {
		s.SmallCQ()
		ids := s.Signaled(1, 20)
		s.Poll(1, ids[:15]...)
		s.EmptyPolls(1, 5)
		s.Wait(100e6)
		s.EmptyPolls(1, 5)
		s.Poll(1, ids[15])
		s.EmptyPolls(1, 5)
		s.Wait(300e6)
		s.EmptyPolls(1, 5)
		s.Poll(1, ids[16:]...)
	}, []string{"cq_overrun_risk"}},

	{"over the depth, dry for long with fewer than the depth returned: waiting on the HCA", "", func(s *Stream) {
		s.SmallCQ()
		ids := s.Signaled(1, 20)
		s.Poll(1, ids[:10]...)
		s.EmptyPolls(1, 5)
		s.Wait(2e9)
		s.EmptyPolls(1, 5)
	}, []string{"cq_overrun_risk"}},

	{"over the depth but polled in time: a risk, no overrun", "", func(s *Stream) {
		s.SmallCQ()
		ids := s.Signaled(1, 20)
		s.Poll(1, ids[:16]...)
		s.Poll(1, ids[16:]...)
		s.EmptyPolls(1, 5)
	}, []string{"cq_overrun_risk"}},

	{"CQ polled as it fills: quiet", "", func(s *Stream) {
		s.SmallCQ()
		for range 10 {
			s.Poll(1, s.Signaled(1, 8)...)
			s.EmptyPolls(1, 2)
		}
	}, nil},

	{"CQ depth unknown: no claim", "", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(64, 60, 1), false)
		s.ToRTS(1)
		s.Signaled(1, 40)
		s.EmptyPolls(1, 5)
	}, nil},
}

// RecvDiagnoses are streams of a sender and its receiver: the receive
// side's causes of a full SQ, and where it is no cause.
var RecvDiagnoses = []Diag{
	{"receiver stops reposting: the SQ fills", "rq_starved", func(s *Stream) {
		s.Pair(4)
		s.Send(1, 4, 0, 2)
		s.RecvDone(2, 4) // the 4 receives taken, none posted again
		s.Poll(1, 1, 3)
		s.Send(1, 8, 0, 2) // wait on RNR retries
		s.EmptyPolls(1, 3)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
	}, []string{"rq_starved"}},

	{"receiver reposts: quiet", "", func(s *Stream) {
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

	{"RNR retries run out", "rnr_retry_exceeded", func(s *Stream) {
		s.Pair(2)
		s.Send(1, 4, ibv.SendSignaled, 0)
		s.RecvDone(2, 2)
		s.Poll(1, 0, 1)
		h := s.Header()
		s.Add(&trace.Poll{Header: h, CQ: CQAddr(1), Max: 16, Ret: 2, WCs: []trace.WC{
			{ID: 2, Status: ibv.WCRNRRetryExcErr, QPNum: 1}, {ID: 3, Status: ibv.WCWRFlushErr, QPNum: 1}}})
	}, []string{"rnr_retry_exceeded"}},

	{"receiver not traced: the SQ-full cause stands", "", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, RCCaps(8, 60, 1), false)
		s.ToRTS(1)
		for range 4 {
			s.Send(1, 2, 0, 2)
			s.EmptyPolls(1, 3)
		}
		s.Post(1, s.WRs(1, 2, ibv.WRSend, 0, 1, 32, 2), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_completions_slow"}},

	{"WRITEs do not take receives", "", func(s *Stream) {
		s.Pair(2)
		s.RecvDone(2, 2)
		for range 4 {
			s.Post(1, s.WRs(1, 2, ibv.WRRDMAWrite, 0, 1, 32, 2), 0, 2)
			s.EmptyPolls(1, 3)
		}
		s.Post(1, s.WRs(1, 2, ibv.WRRDMAWrite, 0, 1, 32, 2), ibv.ENOMEM, 0)
	}, []string{"sq_overflow_completions_slow"}},
}

// CallsNotTraced is a QP whose wr batches rang doorbells for WRs the
// trace never saw built, and whose completion matches no WR posted.
var CallsNotTraced = Diag{"builders not traced", "calls_not_traced", func(s *Stream) {
	s.Create(1, trace.QPTypeRC, RCCaps(4, 60, 1), false)
	for range 3 {
		s.Add(&trace.Post{Header: s.Header(), QP: QPAddr(1), QPNum: 1, API: trace.APIWR})
	}
	s.Poll(1, 0)
}, []string{"calls_not_traced"}}
