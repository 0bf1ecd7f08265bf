package streamtest

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The CQs and the SRQ of RecvRecording.
const (
	SharedSendCQ = 0x3000 // send CQ of QPs 0x1c0..0x1c3
	SharedRecvCQ = 0x3100 // their receive CQ, and 0x1e1's
	ReceiverCQ   = 0x3200 // both CQs of the receiver 0x1d0
	LateCQ       = 0x3300 // receive CQ of 0x1e0, created before tracing
	TestSRQ      = 0x5000
)

// RecvRecording is a process whose four senders share one send CQ and one
// receive CQ, a receiver that only posts receives and polls, an SRQ, a
// QP attached after its create, and a QP whose receives come from the SRQ.
func RecvRecording() []trace.Event {
	s := New()
	for i, cq := range []struct {
		addr uint64
		cqe  uint32
	}{{SharedSendCQ, 256}, {SharedRecvCQ, 256}, {ReceiverCQ, 128}} {
		s.Add(&trace.CQCreate{Header: s.Header(), CQ: cq.addr, Gen: uint64(i + 1), CQE: cq.cqe})
	}
	qpCreate := func(qpn uint32, send, recv uint64, caps trace.Caps, gen uint64) {
		s.Add(&trace.QPCreate{Header: s.Header(), QP: QPAddr(qpn), QPNum: qpn, Type: trace.QPTypeRC,
			SendCQ: send, RecvCQ: recv, Caps: caps, Via: "ibv_create_qp", Gen: gen,
			Lib: "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so"})
	}
	for i := range uint32(4) {
		qpCreate(0x1c0+i, SharedSendCQ, SharedRecvCQ, RCCaps(16, 60, 1), uint64(4+i))
	}
	qpCreate(0x1d0, ReceiverCQ, ReceiverCQ, trace.Caps{MaxSendWR: 16, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}, 8)
	s.Add(&trace.SRQCreate{Header: s.Header(), SRQ: TestSRQ, Gen: 9, MaxWR: 512})
	qpCreate(0x1e1, SharedSendCQ, SharedRecvCQ, trace.Caps{MaxSendWR: 16, MaxSendSGE: 1}, 10)

	// each sender: 4*(i+1) receives in calls of 4, then 4 SENDs, the last signaled
	for i := range uint32(4) {
		qpn := 0x1c0 + i
		for range i + 1 {
			s.PostRecvCall(QPAddr(qpn), qpn, 4, 0, 4, false)
		}
		s.Post(qpn, s.WRs(qpn, 4, ibv.WRSend, 0, 1, 64, 4), 0, 4)
	}
	// the shared send CQ: 20 polls in all, 4 CQEs
	var sends []trace.WC
	for i := range uint32(4) {
		sends = append(sends, trace.WC{ID: 3, Opcode: ibv.WCSend, ByteLen: 64, QPNum: 0x1c0 + i})
	}
	s.PollCQ(SharedSendCQ, 3, sends...)
	s.Add(&trace.EmptyPolls{Header: s.Header(), CQ: SharedSendCQ, Count: 16, Gen: 1})
	// the shared receive CQ: 3, 2 and 1 (flushed) receives of three
	// senders, 2 of the QP of the SRQ; 6 polls
	var recvs []trace.WC
	recvs = append(recvs, RecvWCs(0x1c0, 3, 0)...)
	recvs = append(recvs, RecvWCs(0x1c1, 2, 0)...)
	recvs = append(recvs, RecvWCs(0x1c2, 1, ibv.WCWRFlushErr)...)
	recvs = append(recvs, RecvWCs(0x1e1, 2, 0)...)
	s.PollCQ(SharedRecvCQ, 0, recvs...)
	s.Add(&trace.EmptyPolls{Header: s.Header(), CQ: SharedRecvCQ, Count: 5, Gen: 2})

	// the receiver: 64 receives in 16 calls, one more call refused; 10 consumed
	for range 16 {
		s.PostRecvCall(QPAddr(0x1d0), 0x1d0, 4, 0, 4, false)
	}
	s.PostRecvCall(QPAddr(0x1d0), 0x1d0, 4, ibv.ENOMEM, 0, false)
	s.PollCQ(ReceiverCQ, 30, RecvWCs(0x1d0, 10, 0)...)

	// the SRQ: 24 receives in 3 calls
	for range 3 {
		s.PostRecvCall(TestSRQ, 0, 8, 0, 8, true)
	}
	// a QP created before tracing: 5 receive CQEs
	s.PollCQ(LateCQ, 0, RecvWCs(0x1e0, 5, 0)...)
	return s.Events
}

// CountedReceives is a counters-mode trace of a sender, 0x1c0, a QP
// created before tracing, 0x1c5, a receiver that only receives, 0x1d0,
// and an SRQ, in totals that count receives (counted) or in totals
// recorded before receives were counted (then the receiver shows nothing).
func CountedReceives(s *Stream, counted bool) {
	s.Create(0x1c0, trace.QPTypeRC, RCCaps(64, 60, 1), false)
	s.Add(&trace.QPCreate{Header: s.Header(), QP: QPAddr(0x1d0), QPNum: 0x1d0, Type: trace.QPTypeRC,
		SendCQ: CQAddr(0x1d0), RecvCQ: CQAddr(0x1d0), Caps: trace.Caps{MaxSendWR: 16, MaxRecvWR: 8192, MaxSendSGE: 1}})
	s.Add(&trace.SRQCreate{Header: s.Header(), SRQ: TestSRQ, Gen: 3, MaxWR: 512})
	s.Counters(0x1c0, trace.QPCounters{PostCalls: 100, WRs: 100, Doorbells: 100, Signaled: 10, RecvsCounted: counted})
	// 0x1c5 was created before tracing
	s.Counters(0x1c5, trace.QPCounters{PostCalls: 40, WRs: 80, Doorbells: 40, Signaled: 8, RecvsCounted: counted})
	if counted {
		// the receiver: only receives, no send
		s.Counters(0x1d0, trace.QPCounters{RecvsCounted: true, RecvCalls: 1601, Recvs: 6400, RecvFailed: 1})
	}
	s.CQCounters(0x1d0, 38110, 6400, 31710)
}
