package streamtest

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Case is a named stream. Each test that runs it holds what it expects of
// it, the analyzer's snapshot or the report's text, under its name.
type Case struct {
	Name  string
	Build func(s *Stream)
}

// endCaps are the caps of the QPs of Endings.
var endCaps = trace.Caps{MaxSendWR: 128, MaxInlineData: 60, MaxSendSGE: 1}

// Endings are traces that end: cut while the target ran on (with WRs
// outstanding, without, in counters mode) or not, with completions that
// matched no post seen.
var Endings = []Case{
	{"cut with WRs posted after the last poll", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, endCaps, false)
		s.Create(2, trace.QPTypeRC, endCaps, false)
		s.Send(1, 16, 0, 16)
		s.Poll(1, 15)
		s.Send(1, 16, 0, 16) // its CQE came after the cut
		s.Send(2, 3, 0, 16)
		s.End("interrupt signal received", s.T+50, 1)
	}},
	{"cut, nothing outstanding", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, endCaps, false)
		s.Send(1, 16, 0, 16)
		s.Poll(1, 15)
		s.End("the time limit was reached", s.T+50, 0)
	}},
	{"no cut, completions of posts not seen", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, endCaps, false)
		s.Create(2, trace.QPTypeRC, endCaps, false)
		s.Poll(1, 7)
		s.Send(2, 4, 0, 4)
		s.Poll(2, 3)
		s.Poll(2, 9, 10)
		s.End("the target exited with status 0", 0, 0)
	}},
	{"counters mode cut: no occupancy to give", func(s *Stream) {
		s.Create(1, trace.QPTypeRC, endCaps, false)
		s.Counters(1, trace.QPCounters{PostCalls: 4, WRs: 8, Doorbells: 4, Signaled: 2})
		s.CQCounters(1, 10, 2, 8)
		s.End("stopped", s.T+50, 0)
	}},
}

// The totals of the one QP of each CountersMode stream.
const (
	CountersWRs      = 200000
	CountersPosts    = 200000
	CountersSignaled = 12500
)

// CountersMode are counters-mode traces of one QP whose totals are
// flushed over 0.5 s.
var CountersMode = []Case{
	{"QP created in the trace, one flush at its destroy", func(s *Stream) {
		s.Create(0x1c0, trace.QPTypeRC, RCCaps(204, 124, 1), false)
		s.Wait(500_000_000 - s.DT)
		s.Counters(0x1c0, trace.QPCounters{PostCalls: CountersPosts, WRs: CountersWRs, Inline: CountersWRs, Signaled: CountersSignaled,
			Doorbells: CountersPosts, InlineBytes: 64 * CountersWRs})
		s.CQCounters(0x1c0, 200001, CountersSignaled, 187501)
	}},
	{"attached after the QP's create, flushed twice", func(s *Stream) {
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: "app", How: trace.HowSimSymbol})
		s.Wait(250_000_000 - s.DT)
		s.Counters(0x1c0, trace.QPCounters{PostCalls: CountersPosts / 4, WRs: CountersWRs / 2, Signaled: CountersSignaled / 2,
			Doorbells: CountersPosts / 4, PayloadBytes: 4096 * CountersWRs / 2, PayloadSGEs: CountersWRs / 2})
		s.Wait(250_000_000 - s.DT)
		s.Counters(0x1c0, trace.QPCounters{PostCalls: CountersPosts / 2, WRs: CountersWRs, Signaled: CountersSignaled,
			Doorbells: CountersPosts / 2, PayloadBytes: 4096 * CountersWRs, PayloadSGEs: CountersWRs})
		s.CQCounters(0x1c0, 50000, CountersSignaled, 37500)
	}},
}

// PCIeByOpcode are streams of one QP, 0x1c0, posting each opcode by its
// own rule: the payload a send or a write gathers by DMA reads, the
// response a READ or an atomic has written into its local SGEs.
var PCIeByOpcode = []Case{
	// ib_read_bw -s 64 -n 2000: one WR per call, every 100th signaled
	{"read 64 B", func(s *Stream) {
		s.Create(0x1c0, trace.QPTypeRC, RCCaps(4096, 64, 2), false)
		for range 2000 {
			s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRRDMARead, 0, 1, 64, 100), 0, 1)
		}
	}},
	// the same as ib_write_bw: the payload is read
	{"write 64 B", func(s *Stream) {
		s.Create(0x1c0, trace.QPTypeRC, RCCaps(4096, 64, 2), false)
		for range 2000 {
			s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRRDMAWrite, 0, 1, 64, 100), 0, 1)
		}
	}},
	// a READ scattered over 2 SGEs: a write into each
	{"read of 2 SGEs in lists of 4", func(s *Stream) {
		s.Create(0x1c0, trace.QPTypeRC, RCCaps(4096, 64, 2), false)
		for range 25 {
			s.Post(0x1c0, s.WRs(0x1c0, 4, ibv.WRRDMARead, 0, 2, 4096, 10), 0, 4)
		}
	}},
	// an atomic's response is 8 bytes, one write
	{"compare-and-swap and fetch-and-add", func(s *Stream) {
		s.Create(0x1c0, trace.QPTypeRC, RCCaps(4096, 64, 2), false)
		for range 50 {
			s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRAtomicCmpAndSwp, 0, 1, 8, 10), 0, 1)
			s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRAtomicFetchAndAdd, 0, 1, 8, 10), 0, 1)
		}
	}},
	// a mix: each opcode by its own rule; the inline SENDs save their
	// reads, the READs save nothing
	{"inline sends, writes and reads", func(s *Stream) {
		s.Create(0x1c0, trace.QPTypeRC, RCCaps(4096, 64, 2), false)
		for range 100 {
			s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRSend, ibv.SendInline, 1, 32, 10), 0, 1)
			s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRRDMAWrite, 0, 1, 1024, 10), 0, 1)
			s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRRDMARead, 0, 1, 1024, 10), 0, 1)
		}
	}},
}

// Library files that identify providers.
const (
	RxeLib   = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
	Mlx5Lib  = "/usr/lib/x86_64-linux-gnu/libmlx5.so.1"
	OtherLib = "/usr/lib/x86_64-linux-gnu/libibverbs/libefa-rdmav34.so" // a provider sqscope has no model of
)

// Providers are one QP on each provider, lazily polled: mlx5, rxe (whose
// slots free as its WRs complete), one sqscope has no model of, and an
// rxe QP and one of the provider without a model created before the
// trace began.
var Providers = []Case{
	{"rxe_send_lazy_poll", func(s *Stream) {
		// the peer's 64 receives run out: the 65th SEND waits on RNR
		// retries and the ring (127 slots) fills behind it
		s.CreateOn(1, RCCaps(64, 64, 1), RxeLib)
		s.LazyPoll(1, 191, ibv.WRSend)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 64, 1), ibv.ENOMEM, 0)
	}},
	{"rxe_write_lazy_poll", func(s *Stream) {
		// WRITEs complete without the peer: lazy polling fills nothing
		s.CreateOn(1, RCCaps(64, 64, 1), RxeLib)
		s.LazyPoll(1, 500, ibv.WRRDMAWrite)
	}},
	{"rxe_write_not_completing", func(s *Stream) {
		s.CreateOn(1, RCCaps(64, 64, 1), RxeLib)
		s.LazyPoll(1, 127, ibv.WRRDMAWrite)
		s.Post(1, s.WRs(1, 1, ibv.WRRDMAWrite, 0, 1, 64, 1), ibv.ENOMEM, 0)
	}},
	{"mlx5_send_lazy_poll", func(s *Stream) {
		s.CreateOn(1, RCCaps(64, 64, 1), Mlx5Lib)
		s.LazyPoll(1, 64, ibv.WRSend)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 64, 1), ibv.ENOMEM, 0)
	}},
	{"unknown_provider", func(s *Stream) {
		s.CreateOn(1, RCCaps(64, 64, 1), OtherLib)
		s.LazyPoll(1, 70, ibv.WRSend)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 64, 1), ibv.ENOMEM, 0)
	}},
	{"late_attach_rxe", func(s *Stream) {
		// the QP was created before the trace: the provider is the
		// library its process's post_send was attached in
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: RxeLib, How: "ops-table"})
		s.LazyPoll(1, 10, ibv.WRSend)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 64, 1), ibv.ENOMEM, 0)
	}},
	{"late_attach_unknown_provider", func(s *Stream) {
		// created before the trace, on a provider without a model: its
		// caps are unknown, so no ENOMEM cause can be inferred
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: OtherLib, How: "ops-table"})
		s.LazyPoll(1, 10, ibv.WRSend)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 64, 1), ibv.ENOMEM, 0)
	}},
}
