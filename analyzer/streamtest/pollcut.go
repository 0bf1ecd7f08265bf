package streamtest

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// RecordWCs is the most completions a poll record holds (bpf.MaxWCs,
// SQ_MAX_WCS): a poll that returns more is recorded with its return value
// and the first RecordWCs.
const RecordWCs = 32

// PollCut is one ibv_poll_cq of cq that returned ret completions, of which
// the record holds the first, wcs (the rest are past the tracer's bound).
func (s *Stream) PollCut(cq uint64, ret int, wcs ...trace.WC) {
	h := s.Header()
	s.Add(&trace.Poll{Header: h, CQ: cq, Max: int32(ret), Ret: int32(ret), WCs: wcs,
		Truncated: uint32(ret - len(wcs)), EntryNS: h.TimeNS - 30})
}

// SendWCs are the send completions of qpn's wr_ids ids.
func SendWCs(qpn uint32, ids ...uint64) []trace.WC {
	out := make([]trace.WC, len(ids))
	for i, id := range ids {
		out[i] = trace.WC{ID: id, Opcode: ibv.WCSend, ByteLen: 64, QPNum: qpn}
	}
	return out
}

// The QPs of LazyPolls, and what its polls returned past the bound.
const (
	LazySender   = 0x1a0 // 96 signaled SENDs, then 32 more
	LazyReceiver = 0x1b0 // 447 receives posted, 383 consumed
	LazyIdle     = 0x1c0 // its polls within the bound
	// LazySendCut and LazyRecvCut are the completions the sender's and
	// the receiver's CQ returned past the bound.
	LazySendCut = 64
	LazyRecvCut = 383 - 6*RecordWCs
)

// LazyPolls is the lazy-poll run of issue 29 on one host: a sender whose
// CQ returned 96 completions in one poll (32 recorded), then 32 more in
// one; a receiver whose 383 receive completions came in six polls of up
// to 64 (32 recorded each); a QP whose polls stayed within the bound.
func LazyPolls() []trace.Event {
	s := New()
	caps := RCCaps(128, 60, 1)
	s.Create(LazySender, trace.QPTypeRC, caps, false)
	s.Create(LazyReceiver, trace.QPTypeRC, trace.Caps{MaxSendWR: 16, MaxRecvWR: 512, MaxSendSGE: 1, MaxRecvSGE: 1}, false)
	s.Create(LazyIdle, trace.QPTypeRC, caps, false)

	for range 447 / 64 {
		s.PostRecvCall(QPAddr(LazyReceiver), LazyReceiver, 64, 0, 64, false)
	}
	s.PostRecvCall(QPAddr(LazyReceiver), LazyReceiver, 447%64, 0, 447%64, false)

	s.Post(LazySender, s.WRs(LazySender, 96, ibv.WRSend, 0, 1, 64, 1), 0, 96)
	ids := make([]uint64, RecordWCs)
	for i := range ids {
		ids[i] = uint64(i)
	}
	s.PollCut(CQAddr(LazySender), 96, SendWCs(LazySender, ids...)...)

	left := 383
	for range 6 {
		n := min(64, left)
		left -= n
		s.PollCut(CQAddr(LazyReceiver), n, RecvWCs(LazyReceiver, RecordWCs, 0)...)
	}

	s.Post(LazySender, s.WRs(LazySender, 32, ibv.WRSend, 0, 1, 64, 1), 0, 32)
	for i := range ids {
		ids[i] = uint64(96 + i)
	}
	s.PollCut(CQAddr(LazySender), 32, SendWCs(LazySender, ids...)...)

	s.Send(LazyIdle, 8, 0, 4)
	s.Poll(LazyIdle, 3, 7)
	return s.Events
}
