package analyzer

import (
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// feed builds events for one RC QP: create with caps, then posts/polls.
type feed struct {
	t   uint64
	evs []trace.Event
	id  uint64
}

func (f *feed) now() uint64 { f.t += 100; return f.t }

func (f *feed) create(caps trace.Caps, sigAll bool) {
	f.evs = append(f.evs, &trace.QPCreate{Header: trace.Header{TimeNS: f.now(), PID: 7}, QP: 0x1000, QPNum: 0x1c0,
		Type: trace.QPTypeRC, SigAll: sigAll, SendCQ: 0x2000, Caps: caps})
}

func (f *feed) post(n int, flags uint32, bytes uint32, ret int32, accepted int) {
	p := &trace.Post{Header: trace.Header{TimeNS: f.now(), PID: 7}, QP: 0x1000, QPNum: 0x1c0, Ret: ret, Accepted: uint32(accepted)}
	for i := 0; i < n; i++ {
		p.WRs = append(p.WRs, trace.WR{ID: f.id, Opcode: ibv.WRSend, Flags: flags, NumSGE: 1, Bytes: bytes})
		f.id++
	}
	f.evs = append(f.evs, p)
}

func (f *feed) poll(ids ...uint64) {
	p := &trace.Poll{Header: trace.Header{TimeNS: f.now(), PID: 7}, CQ: 0x2000, Max: 16, Ret: int32(len(ids))}
	for _, id := range ids {
		p.WCs = append(p.WCs, trace.WC{ID: id, QPNum: 0x1c0})
	}
	f.evs = append(f.evs, p)
}

func run(t *testing.T, f *feed) QP {
	a := New(Options{BF: DefaultBF})
	a.IngestAll(f.evs)
	s := checked(t, a)
	return s.QPs[0]
}

func TestModel(t *testing.T) {
	caps := trace.Caps{MaxSendWR: 4, MaxInlineData: 60, MaxSendSGE: 1}
	tests := []struct {
		name  string
		build func(f *feed)
		check func(t *testing.T, q QP)
	}{
		{"never signaled fills the SQ", func(f *feed) {
			f.create(caps, false)
			for i := 0; i < 4; i++ {
				f.post(1, ibv.SendInline, 32, 0, 1)
			}
			f.post(1, ibv.SendInline, 32, ibv.ENOMEM, 0)
			f.poll()
		}, func(t *testing.T, q QP) {
			if q.WRs != 4 || q.ENOMEMSQFull != 1 || q.Outstanding != 4 || q.PeakOutstanding != 4 || q.Inline != 4 || q.BFWrites != 4 {
				t.Fatalf("%+v", q)
			}
		}},
		{"signaled CQE retires earlier unsignaled WRs", func(f *feed) {
			f.create(caps, false)
			f.post(1, 0, 32, 0, 1)
			f.post(1, 0, 32, 0, 1)
			f.post(1, ibv.SendSignaled, 32, 0, 1)
			f.poll(2)
		}, func(t *testing.T, q QP) {
			if q.Outstanding != 0 || q.CQEsPolled != 1 || q.Signaled != 1 || q.CQEWrites != 1 || q.LongestUnsignaledRun != 2 {
				t.Fatalf("%+v", q)
			}
		}},
		{"inline too big", func(f *feed) {
			f.create(caps, false)
			f.post(1, ibv.SendInline, 61, ibv.ENOMEM, 0)
		}, func(t *testing.T, q QP) {
			if q.ENOMEMInline != 1 || q.ENOMEMSQFull != 0 || q.WRs != 0 || q.Doorbells != 0 {
				t.Fatalf("%+v", q)
			}
		}},
		{"partial list: SQ full at the third WR", func(f *feed) {
			f.create(caps, false)
			f.post(2, 0, 32, 0, 2)
			f.post(3, 0, 32, ibv.ENOMEM, 2)
		}, func(t *testing.T, q QP) {
			if q.WRs != 4 || q.ENOMEMSQFull != 1 || q.Doorbells != 2 || q.DMAReadsWQE != 2 || q.BFWrites != 0 {
				t.Fatalf("%+v", q)
			}
		}},
		{"sq_sig_all signals everything", func(f *feed) {
			f.create(caps, true)
			f.post(2, 0, 32, 0, 2)
			f.poll(0, 1)
		}, func(t *testing.T, q QP) {
			if q.Signaled != 2 || q.Outstanding != 0 || q.CQEsPolled != 2 {
				t.Fatalf("%+v", q)
			}
		}},
		{"late attach infers the depth", func(f *feed) {
			for i := 0; i < 3; i++ {
				f.post(1, 0, 32, 0, 1)
			}
			f.post(1, 0, 32, ibv.ENOMEM, 0)
		}, func(t *testing.T, q QP) {
			if q.CapsKnown || !q.CapsInferred || q.MaxSendWR != 3 || q.ENOMEMSQFull != 1 {
				t.Fatalf("%+v", q)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &feed{}
			tc.build(f)
			tc.check(t, run(t, f))
		})
	}
}
