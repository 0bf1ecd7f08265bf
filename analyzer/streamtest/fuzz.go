package streamtest

import (
	"math"

	"github.com/sqscope/sqscope/trace"
)

// Huge is where a count handed out by FromBytes stops being one a tracer
// makes: a quarter of where the analyzer's invariants stop holding counts
// to account (a sum of four such counts wraps).
const Huge = 1 << 60

// byteSource hands out fuzz bytes as field values, biased toward the
// extremes a damaged or hostile recording could carry. huge is set once
// a value of Huge or more was handed out.
type byteSource struct {
	b    []byte
	huge bool
}

func (s *byteSource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	v := s.b[0]
	s.b = s.b[1:]
	return v
}

var extremes = [...]uint64{0, 1, 2, 3, 4, 64, 1 << 20, math.MaxUint32 - 1, math.MaxUint32, math.MaxInt64, math.MaxUint64}

func (s *byteSource) u64() uint64 {
	v := int(s.byte())
	if i := v - (256 - len(extremes)); i >= 0 {
		s.huge = s.huge || extremes[i] >= Huge
		return extremes[i]
	}
	return uint64(v % 32)
}

func (s *byteSource) u32() uint32 { return uint32(min(s.u64(), math.MaxUint32)) }

// Seeds are the inputs every fuzz test of FromBytes streams starts from:
// none, and two short streams, the second with extreme values.
var Seeds = [][]byte{
	{},
	{1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 2, 0, 1},
	{0, 0, 1, 1, 0, 0, 255, 255, 255, 1, 0, 1, 1, 0, 0, 250, 12, 250, 0, 3, 2, 0, 0, 0, 254, 255},
}

// FromBytes turns fuzz bytes into a stream of at most 256 events over a
// few QPs and CQs of two processes. huge says whether a value of Huge or
// more was handed out: such a stream is not one a tracer makes, and its
// snapshots are not held to the invariants.
func FromBytes(b []byte) (evs []trace.Event, huge bool) {
	s := &byteSource{b: b}
	now := uint64(1) // a time of 0 is no time (trace.MonotonicNS never gives it)
	for len(s.b) > 0 && len(evs) < 256 {
		now += s.u64()
		h := trace.Header{TimeNS: now, PID: uint32(s.byte() % 2)}
		qpn := uint32(s.byte() % 3)
		switch s.byte() % 6 {
		case 0:
			evs = append(evs, &trace.QPCreate{Header: h, QPNum: qpn, Type: trace.QPType(s.byte() % 5), SigAll: s.byte()%2 == 1,
				SendCQ: uint64(s.byte() % 3), Caps: trace.Caps{MaxSendWR: s.u32(), MaxSendSGE: s.u32(), MaxInlineData: s.u32()}})
		case 1:
			p := &trace.Post{Header: h, QPNum: qpn, API: trace.API(s.byte() % 2), Aborted: s.byte()%8 == 0,
				Truncated: s.u32(), Ret: int32(s.byte() % 24), Accepted: s.u32(), EntryNS: s.u64(), WalkCapped: s.byte()%4 == 0}
			for range s.byte() % 8 {
				p.WRs = append(p.WRs, trace.WR{ID: s.u64(), Opcode: s.byte() % 8, Flags: uint32(s.byte() % 16), NumSGE: s.u32(), Bytes: s.u32(),
					SGEsNotSummed: s.byte()})
			}
			evs = append(evs, p)
		case 2:
			p := &trace.Poll{Header: h, CQ: uint64(s.byte() % 3), Ret: int32(int8(s.byte())), EmptyBefore: s.u64()}
			for range s.byte() % 8 {
				p.WCs = append(p.WCs, trace.WC{ID: s.u64(), Status: s.byte() % 3, Opcode: s.byte(), QPNum: uint32(s.byte() % 3)})
			}
			evs = append(evs, p)
		case 3:
			evs = append(evs, &trace.EmptyPolls{Header: h, CQ: uint64(s.byte() % 3), Count: s.u64()})
		case 4:
			evs = append(evs, &trace.QPDestroy{Header: h, QPNum: qpn})
		case 5:
			evs = append(evs, &trace.Lost{Header: h, Count: s.u64()})
		}
	}
	return evs, s.huge
}
