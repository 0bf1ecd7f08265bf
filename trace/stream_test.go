package trace

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/sqscope/sqscope/ibv"
)

// StreamConfig describes a synthetic event stream like the built-in
// workload's traced on the simulated HCA with CQEs visible at the
// doorbell: threads posting to their QPs in turn, each post followed by a
// poll of the QP's CQ, which returns the completions of its signaled WRs
// and otherwise counts as an empty poll; events 100 to 300 ns apart. It is
// exported to the package's external tests only (this is a test file).
type StreamConfig struct {
	QPs      int    // QPs; even ones send Inline bytes inline, odd ones Bytes from memory
	Threads  int    // threads the QPs are spread over (0: one per QP)
	PostList int    // WRs per post call
	Signal   int    // a signaled WR every Signal WRs of a QP
	Posts    int    // post calls per QP
	Inline   uint32 // bytes of an inline WR (0: 64)
	Bytes    uint32 // bytes of a WR from memory (0: 4096)
	SharedCQ bool   // one CQ per thread, shared by its QPs
	// Varied: what applications vary and the workload does not: wr_ids
	// are the addresses of 256 contexts taken in turn, a WR's size one of
	// three, call entry times recorded, and the empty polls between two
	// completions in random number.
	Varied bool
	Seed   uint64
}

// StreamEvents builds the stream c describes, with the QPs' creates
// before and the trace's end after.
func StreamEvents(c StreamConfig) []Event {
	if c.Threads <= 0 || c.Threads > c.QPs {
		c.Threads = c.QPs
	}
	if c.Inline == 0 {
		c.Inline = 64
	}
	if c.Bytes == 0 {
		c.Bytes = 4096
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x5eed))
	const pid = 4242
	now := uint64(5_000_000_000)
	tick := func() Header {
		now += 100 + rng.Uint64N(201)
		return Header{TimeNS: now, PID: pid}
	}
	type qp struct {
		addr, cq uint64
		num      uint32
		tid      uint32
		nextID   uint64
		sinceSig int
		inline   bool
	}
	type cq struct{ empty uint64 }
	evs := []Event{&Proc{Header: tick(), How: ProcTarget, Comm: "sqscope"}}
	qps := make([]*qp, c.QPs)
	cqs := map[uint64]*cq{}
	for i := range qps {
		th := i % c.Threads
		q := &qp{addr: 0x7f12_3456_0000 + uint64(i)*0x400, num: 0x100 + uint32(i), tid: pid + 1 + uint32(th), inline: i%2 == 0}
		q.cq = 0x7f12_0000_0000 + uint64(i)*0x200
		if c.SharedCQ {
			q.cq = 0x7f12_0000_0000 + uint64(th)*0x200
		}
		h := tick()
		h.TID = q.tid
		if cqs[q.cq] == nil {
			cqs[q.cq] = &cq{}
			evs = append(evs, &CQCreate{Header: h, CQ: q.cq, Gen: uint64(2 * i), CQE: 1023})
		}
		evs = append(evs, &QPCreate{Header: h, QP: q.addr, QPNum: q.num, Type: QPTypeRC, SendCQ: q.cq, RecvCQ: q.cq,
			Caps: Caps{MaxSendWR: 204, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 124},
			Via:  "sqsim_create_qp", Gen: uint64(2*i + 1), Lib: "/usr/bin/sqscope"})
		qps[i] = q
	}
	for n := 0; n < c.Posts; n++ {
		for _, q := range qps { // each thread's QPs in turn, threads interleaved
			h := tick()
			h.TID = q.tid
			p := &Post{Header: h, QP: q.addr, QPNum: q.num, WRs: make([]WR, c.PostList), Accepted: uint32(c.PostList)}
			if c.Varied {
				p.EntryNS = h.TimeNS - 50 - rng.Uint64N(450)
			}
			var done []WC
			for j := range p.WRs {
				wr := WR{ID: q.nextID, Opcode: ibv.WRSend, NumSGE: 1, Bytes: c.Bytes}
				if c.Varied {
					wr.ID = 0x5600_0000_0000 + (q.nextID%256)*0x140 + uint64(q.num)<<24
					wr.Bytes = [...]uint32{c.Bytes, c.Bytes / 8, 2 * c.Bytes}[rng.IntN(3)]
				}
				if q.inline {
					wr.Flags, wr.Bytes = ibv.SendInline, c.Inline
				}
				if q.sinceSig++; q.sinceSig == c.Signal {
					wr.Flags |= ibv.SendSignaled
					q.sinceSig = 0
					done = append(done, WC{ID: wr.ID, Opcode: ibv.WCSend, ByteLen: wr.Bytes, QPNum: q.num})
				}
				p.WRs[j] = wr
				q.nextID++
			}
			evs = append(evs, p)
			k := cqs[q.cq]
			if c.Varied {
				k.empty += rng.Uint64N(40)
			}
			if len(done) == 0 {
				k.empty++
				continue
			}
			h = tick()
			h.TID = q.tid
			poll := &Poll{Header: h, CQ: q.cq, Max: 16, Ret: int32(len(done)), WCs: done, EmptyBefore: k.empty}
			if c.Varied {
				poll.EntryNS = h.TimeNS - 30 - rng.Uint64N(200)
			}
			evs = append(evs, poll)
			k.empty = 0
		}
	}
	for _, q := range qps {
		h := tick()
		h.TID = q.tid
		evs = append(evs, &QPDestroy{Header: h, QP: q.addr, QPNum: q.num, Gen: 1})
	}
	evs = append(evs, &Exit{Header: tick()}, &End{Header: tick(), Reason: "the target exited with status 0"})
	return evs
}

// Recorded is events written as a recording of the current version, with
// the tests' file header (exported to the package's external tests only).
func Recorded(t testing.TB, events []Event) []byte { return writeRecording(t, events, 0) }

// CPUNow is the CPU time this process has used, in ns (exported to the
// package's external tests only).
func CPUNow() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
