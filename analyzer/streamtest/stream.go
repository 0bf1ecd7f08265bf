// Package streamtest builds synthetic event streams for tests: the
// analyzer's own, which hold the model to them, and the report's, which
// write what the analyzer makes of the same streams. It imports only trace
// and ibv, so that the analyzer's internal tests can use it.
package streamtest

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// PID is the process of every event a Stream makes.
const PID = 7

// QPAddr is the address of QP qpn: 0x1000+qpn.
func QPAddr(qpn uint32) uint64 { return 0x1000 + uint64(qpn) }

// CQAddr is the address of QP qpn's CQ, its send and receive CQ both:
// 0x2000+qpn.
func CQAddr(qpn uint32) uint64 { return 0x2000 + uint64(qpn) }

// RCCaps are the caps of an RC QP: depth WRs on either queue, inline data
// and send SGEs as given, one receive SGE.
func RCCaps(depth, inline, sge uint32) trace.Caps {
	return trace.Caps{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: sge, MaxRecvSGE: 1, MaxInlineData: inline}
}

// Stream is a synthetic event stream for several QPs of process PID. QP n
// lives at QPAddr(n) and completes on its own CQ, CQAddr(n). Every event
// advances the clock T by DT (100 ns unless set).
type Stream struct {
	T, DT  uint64
	Events []trace.Event
	// IDs are the next wr_id of each QP.
	IDs map[uint32]uint64
}

// New returns an empty stream whose clock is at 1000 ns.
func New() *Stream { return &Stream{T: 1000, DT: 100, IDs: map[uint32]uint64{}} }

// Header is the header of the next event: the clock advanced by DT.
func (s *Stream) Header() trace.Header {
	s.T += s.DT
	return trace.Header{TimeNS: s.T, PID: PID, TID: PID}
}

// Add appends events made by hand.
func (s *Stream) Add(evs ...trace.Event) { s.Events = append(s.Events, evs...) }

// Wait advances the clock without an event.
func (s *Stream) Wait(ns uint64) { s.T += ns }

// Create is the create of QP qpn, seen by the tracer.
func (s *Stream) Create(qpn uint32, typ trace.QPType, caps trace.Caps, sigAll bool) {
	s.Add(&trace.QPCreate{Header: s.Header(), QP: QPAddr(qpn), QPNum: qpn, Type: typ,
		SigAll: sigAll, SendCQ: CQAddr(qpn), RecvCQ: CQAddr(qpn), Caps: caps, Via: "sqsim_create_qp"})
}

// CreateOn creates an RC QP on the provider whose post_send is in lib.
func (s *Stream) CreateOn(qpn uint32, caps trace.Caps, lib string) {
	s.Add(&trace.QPCreate{Header: s.Header(), QP: QPAddr(qpn), QPNum: qpn, Type: trace.QPTypeRC,
		SendCQ: CQAddr(qpn), RecvCQ: CQAddr(qpn), Caps: caps, Via: "ibv_create_qp", Lib: lib})
}

// MemQP lists an RC QP as the memory scan finds it: caps unknown.
func (s *Stream) MemQP(qpn uint32, state int32) {
	s.Add(&trace.QPCreate{Header: s.Header(), QP: QPAddr(qpn), QPNum: qpn, Type: trace.QPTypeRC,
		SendCQ: CQAddr(qpn), RecvCQ: CQAddr(qpn), Via: trace.ViaMemory, State: state})
}

// Modify is an ibv_modify_qp of qpn to state that returned ret.
func (s *Stream) Modify(qpn uint32, state int32, ret int32) {
	s.Add(&trace.QPModify{Header: s.Header(), QP: QPAddr(qpn), QPNum: qpn, State: state, Ret: ret})
}

// ToRTS moves qpn through INIT and RTR to RTS.
func (s *Stream) ToRTS(qpn uint32) {
	for _, st := range []int32{ibv.QPSInit, ibv.QPSRTR, ibv.QPSRTS} {
		s.Modify(qpn, st, 0)
	}
}

// CQCreate is the create of qpn's CQ with cqe entries.
func (s *Stream) CQCreate(qpn uint32, cqe int32) {
	s.Add(&trace.CQChange{Header: s.Header(), Op: trace.CQOpCreate, CQ: CQAddr(qpn), CQE: cqe, Via: "sqsim_create_cq"})
}

// SmallCQ creates RC QP 1, of depth 64, on a CQ of 15 entries, and moves
// it to RTS: more signaled WRs can be outstanding than its CQ holds.
func (s *Stream) SmallCQ() {
	s.CQCreate(1, 15)
	s.Create(1, trace.QPTypeRC, RCCaps(64, 60, 1), false)
	s.ToRTS(1)
}

// WRs returns n WRs of one shape with the QP's next wr_ids; every
// sigEvery-th WR of the QP (counting from 1) is signaled when sigEvery > 0.
func (s *Stream) WRs(qpn uint32, n int, op uint8, flags uint32, sges, bytes uint32, sigEvery uint64) []trace.WR {
	out := make([]trace.WR, n)
	for i := range out {
		id := s.IDs[qpn]
		s.IDs[qpn]++
		f := flags
		if sigEvery > 0 && (id+1)%sigEvery == 0 {
			f |= ibv.SendSignaled
		}
		out[i] = trace.WR{ID: id, Opcode: op, Flags: f, NumSGE: sges, Bytes: bytes}
	}
	return out
}

// SGECut gives WRs i (of wrs) more SGEs than the tracer sums: n past the
// bound, their bytes those of the first 16.
func SGECut(wrs []trace.WR, n uint8, idx ...int) []trace.WR {
	for _, i := range idx {
		wrs[i].NumSGE, wrs[i].Bytes, wrs[i].SGEsNotSummed = 16+uint32(n), 16*64, n
	}
	return wrs
}

// Post posts wrs; ret and accepted as the provider returned them.
func (s *Stream) Post(qpn uint32, wrs []trace.WR, ret int32, accepted int) {
	h := s.Header()
	p := &trace.Post{Header: h, QP: QPAddr(qpn), QPNum: qpn, WRs: wrs, Ret: ret,
		Accepted: uint32(accepted), EntryNS: h.TimeNS - 40}
	if ret != 0 {
		// a refused WR keeps its wr_id unused: give it back
		s.IDs[qpn] -= uint64(len(wrs) - accepted)
	}
	s.Add(p)
}

// Capped posts a list the tracer's walk stopped in: rec WRs recorded,
// walked in all, the provider's ret and the accepted WRs as the tracer saw
// them.
func (s *Stream) Capped(qpn uint32, rec []trace.WR, walked uint32, ret int32, accepted uint32) {
	s.Add(&trace.Post{Header: s.Header(), QP: QPAddr(qpn), QPNum: qpn, WRs: rec,
		Truncated: walked - uint32(len(rec)), Ret: ret, Accepted: accepted, WalkCapped: true})
}

// Send posts n SEND WRs of 32 bytes, one SGE, all accepted.
func (s *Stream) Send(qpn uint32, n int, flags uint32, sigEvery uint64) {
	s.Post(qpn, s.WRs(qpn, n, ibv.WRSend, flags, 1, 32, sigEvery), 0, n)
}

// Signaled posts n signaled SENDs one per call and returns their wr_ids.
func (s *Stream) Signaled(qpn uint32, n int) []uint64 {
	var ids []uint64
	for range n {
		ids = append(ids, s.IDs[qpn])
		s.Send(qpn, 1, ibv.SendSignaled, 0)
	}
	return ids
}

// LazyPoll posts n WRs of op one per call, every one signaled, and never
// polls: the sqscope workload's --fault lazy-poll before its first poll.
func (s *Stream) LazyPoll(qpn uint32, n int, op uint8) {
	for range n {
		s.Post(qpn, s.WRs(qpn, 1, op, 0, 1, 64, 1), 0, 1)
	}
}

// Climb is QP qpn posting one unsignaled WR per 1,000 ns window for
// windows windows, from the stream's time: its occupancy at the end of
// window k is k+1.
func (s *Stream) Climb(qpn uint32, windows int) {
	for range windows {
		s.Send(qpn, 1, 0, 0)
		s.Wait(900)
	}
}

// Poll returns send completions of the given wr_ids of qpn.
func (s *Stream) Poll(qpn uint32, ids ...uint64) {
	h := s.Header()
	p := &trace.Poll{Header: h, CQ: CQAddr(qpn), Max: 16, Ret: int32(len(ids)), EntryNS: h.TimeNS - 30}
	for _, id := range ids {
		p.WCs = append(p.WCs, trace.WC{ID: id, Opcode: 0, ByteLen: 32, QPNum: qpn})
	}
	s.Add(p)
}

// PollCQ is one ibv_poll_cq of cq that returned wcs after empty polls.
func (s *Stream) PollCQ(cq uint64, empty uint64, wcs ...trace.WC) {
	h := s.Header()
	s.Add(&trace.Poll{Header: h, CQ: cq, Max: 16, Ret: int32(len(wcs)), WCs: wcs,
		EmptyBefore: empty, EntryNS: h.TimeNS - 30})
}

// ExPoll is an extended poll session of cq whose completions carry only
// their wr_ids.
func (s *Stream) ExPoll(cq uint64, ids ...uint64) {
	p := &trace.Poll{Header: s.Header(), CQ: cq, Ret: int32(len(ids)), Ex: true}
	for _, id := range ids {
		p.WCs = append(p.WCs, trace.WC{ID: id})
	}
	s.Add(p)
}

// EmptyPolls reports n polls of qpn's CQ that returned nothing.
func (s *Stream) EmptyPolls(qpn uint32, n uint64) {
	s.Add(&trace.EmptyPolls{Header: s.Header(), CQ: CQAddr(qpn), Count: n})
}

// PostRecv reports n receives posted on qpn, all accepted.
func (s *Stream) PostRecv(qpn uint32, n int) {
	s.Add(&trace.PostRecv{Header: s.Header(), QP: QPAddr(qpn), QPNum: qpn, NumWRs: uint32(n), Accepted: uint32(n)})
}

// PostRecvCall is one ibv_post_recv (or, on an SRQ, ibv_post_srq_recv)
// call on the QP or SRQ at qp.
func (s *Stream) PostRecvCall(qp uint64, qpn uint32, n uint32, ret int32, accepted uint32, srq bool) {
	s.Add(&trace.PostRecv{Header: s.Header(), QP: qp, QPNum: qpn, NumWRs: n, Ret: ret, Accepted: accepted, SRQ: srq})
}

// RecvDone reports n receive completions of qpn polled on its CQ.
func (s *Stream) RecvDone(qpn uint32, n int) {
	h := s.Header()
	p := &trace.Poll{Header: h, CQ: CQAddr(qpn), Max: 64, Ret: int32(n), EntryNS: h.TimeNS - 30}
	for i := range n {
		p.WCs = append(p.WCs, trace.WC{ID: uint64(i), Opcode: ibv.WCRecv, ByteLen: 32, QPNum: qpn})
	}
	s.Add(p)
}

// RecvWCs are n receive completions of qpn, of status st.
func RecvWCs(qpn uint32, n int, st uint8) []trace.WC {
	out := make([]trace.WC, n)
	for i := range out {
		out[i] = trace.WC{ID: uint64(i), Status: st, Opcode: ibv.WCRecv, ByteLen: 64, QPNum: qpn}
	}
	return out
}

// Pair creates sender 1 (SQ depth 8) and receiver 2 (RQ depth rq), both
// in RTS, the receiver with rq receives posted.
func (s *Stream) Pair(rq uint32) {
	s.Create(1, trace.QPTypeRC, RCCaps(8, 60, 1), false)
	s.ToRTS(1)
	s.Create(2, trace.QPTypeRC, trace.Caps{MaxSendWR: 1, MaxRecvWR: rq, MaxSendSGE: 1, MaxRecvSGE: 1}, false)
	s.ToRTS(2)
	s.PostRecv(2, int(rq))
}

// Counters flushes a QP's counters-mode totals since attach.
func (s *Stream) Counters(qpn uint32, c trace.QPCounters) {
	c.Header, c.QP, c.QPNum = s.Header(), QPAddr(qpn), qpn
	s.Add(&c)
}

// CQCounters flushes the kernel's totals of qpn's CQ (counters mode).
func (s *Stream) CQCounters(qpn uint32, polls, cqes, empty uint64) {
	s.Add(&trace.CQCounters{Header: s.Header(), CQ: CQAddr(qpn), Polls: polls, CQEs: cqes, Empty: empty})
}

// End ends the stream; cutNS 0 is an end that was not a cut.
func (s *Stream) End(reason string, cutNS, unseen uint64) {
	s.Add(&trace.End{Header: s.Header(), Reason: reason, CutNS: cutNS, InFlightUnseen: unseen})
}
