package verbs

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/sqscope/sqscope/ibv"
)

// A post to a QP not in RTS fails as on mlx5 since rdma-core v40: the SGE
// check against qp_state_max_gs (-1 outside RTS) gives ENOMEM through
// ibv_post_send, and ibv_wr_complete returns EINVAL; neither is an SGE
// fault. A QP moved from RTS to ERR keeps taking posts (flushed).
func TestPostNotRTS(t *testing.T) {
	tests := []struct {
		name    string
		wrAPI   bool
		wantErr syscall.Errno
		want    Counters // only the fields compared below
	}{
		{"post_send", false, syscall.ENOMEM, Counters{NotRTS: 1, PostCalls: 1}},
		{"wr api", true, syscall.EINVAL, Counters{NotRTS: 1, EINVAL: 1, PostCalls: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, detModel())
			ep := newEP(t, s, QPConfig{MaxSendWR: 16, WRAPI: tc.wrAPI, StopAtRTR: true})
			wr := sendWR(1, SendSignaledFlag, 8)
			var err error
			if tc.wrAPI {
				err = PostWR(ep, []SendWR{wr}, false)
			} else {
				_, err = PostSend(ep, []SendWR{wr})
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			c := counters(t, s, ep)
			got := Counters{NotRTS: c.NotRTS, EINVAL: c.EINVAL, PostCalls: c.PostCalls, ENOMEMSGE: c.ENOMEMSGE, WRs: c.WRs}
			if got != tc.want {
				t.Fatalf("counters %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A CQE due on a full CQ overruns it: the CQ takes no more CQEs, its QP
// goes to ERR, the CQEs queued before stay to be polled, and the WRs
// after them never complete.
func TestCQOverrun(t *testing.T) {
	s := newSim(t, detModel())
	// 8 entries asked: 15 after mlx5's rounding (2^k - 1 >= 8 + 1)
	ep := newEP(t, s, QPConfig{MaxSendWR: 64, CQDepth: 8})
	for i := range 20 {
		if _, err := PostSend(ep, []SendWR{sendWR(uint64(i), SendSignaledFlag, 8)}); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	wc, err := PollCQ(ep, 64)
	if err != nil || len(wc) != 15 {
		t.Fatalf("polled %d CQEs (%v), want the 15 written before the overrun", len(wc), err)
	}
	cq, _ := s.CQCounters(ep)
	if cq.Overruns != 1 || cq.Depth != 15 {
		t.Fatalf("CQ counters %+v, want one overrun at depth 15", cq)
	}
	// posts still go in (mlx5 checks no state after RTS); nothing completes
	if _, err := PostSend(ep, []SendWR{sendWR(20, SendSignaledFlag, 8)}); err != nil {
		t.Fatalf("post after the overrun: %v", err)
	}
	if wc, _ := PollCQ(ep, 64); len(wc) != 0 {
		t.Fatalf("CQEs after the overrun: %+v", wc)
	}
	c := counters(t, s, ep)
	if c.CQOverrunErrs != 1 || c.CQEWrites != 15 || c.CQEsPolled != 15 || c.Outstanding != 6 || c.WRs != 21 {
		t.Fatalf("counters %+v", c)
	}
}

// SENDs to a connected receiver take its receives; with its RQ empty the
// responder answers RNR NAK: the SEND waits (rnr_retry 7: forever), or
// after rnr_retry retries of min_rnr_timer (0.64 ms) completes with
// IBV_WC_RNR_RETRY_EXC_ERR and the QP's later WRs are flushed.
func TestReceiverRNR(t *testing.T) {
	tests := []struct {
		name     string
		retry    uint8
		advance  uint64 // ns after the posts
		wantWCs  []uint32
		wantWait uint64
		wantExc  uint64
	}{
		{"retry forever", 7, 10_000_000, []uint32{0, 0, 0, 0}, 1, 0},
		{"still retrying", 2, 1_000_000, []uint32{0, 0, 0, 0}, 1, 0},
		{"retries run out", 2, 2_000_000, []uint32{0, 0, 0, 0, ibv.WCRNRRetryExcErr, WCStatusFlushErr}, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := detModel()
			m.Deterministic = false
			m.RTTNS, m.DMAReadNS, m.WQENS = 0, 0, 0
			s := newSim(t, m)
			t0 := uint64(1_000_000_000)
			s.SetClock(t0)
			ep := newEP(t, s, QPConfig{MaxSendWR: 16, MaxRecvWR: 4, Receiver: true, RNRRetry: tc.retry})
			for i := range 6 {
				if _, err := PostSend(ep, []SendWR{sendWR(uint64(i), SendSignaledFlag, 8)}); err != nil {
					t.Fatalf("post %d: %v", i, err)
				}
			}
			s.SetClock(t0 + 1000)
			wc, err := PollCQ(ep, 16)
			if err != nil || len(wc) != 4 {
				t.Fatalf("polled %d CQEs (%v), want the 4 SENDs that had a receive", len(wc), err)
			}
			s.SetClock(t0 + tc.advance)
			more, _ := PollCQ(ep, 16)
			var status []uint32
			for _, w := range append(wc, more...) {
				status = append(status, uint32(w.Status))
			}
			if !slices.Equal(status, tc.wantWCs) {
				t.Fatalf("completion statuses %v, want %v", status, tc.wantWCs)
			}
			c := counters(t, s, ep)
			p, ok := s.PeerCounters(ep)
			if !ok || p.PostRecvs != 4 || p.RecvsConsumed != 4 || c.RNRWaits != tc.wantWait || c.RNRRetryExc != tc.wantExc {
				t.Fatalf("sender rnr waits %d exc %d; receiver %+v (ok %v)", c.RNRWaits, c.RNRRetryExc, p, ok)
			}
		})
	}
}
