package analyzer

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
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
		Type: trace.QPTypeRC, SigAll: sigAll, SendCQ: 0x2000, Caps: caps, Via: "sqsim_create_qp"})
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

func runFeed(t *testing.T, f *feed) QP {
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
			f.evs = append(f.evs, &trace.Attach{Header: trace.Header{TimeNS: f.now(), PID: 7}, Func: "post_send", Path: "app", How: trace.HowSimSymbol})
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
			tc.check(t, runFeed(t, f))
		})
	}
}

// A wr batch fails as a whole at its first WR that does not fit, which
// need not be its first: the cause and the diagnosis name that WR.
func TestWRBatchCause(t *testing.T) {
	caps := trace.Caps{MaxSendWR: 4, MaxInlineData: 60, MaxSendSGE: 1}
	bind := trace.WR{ID: 1, Opcode: ibv.WRBindMW}
	send := trace.WR{ID: 2, Opcode: ibv.WRSend, NumSGE: 1, Bytes: 8}
	tests := []struct {
		name   string
		wrs    []trace.WR
		ret    int32
		kind   string
		counts func(q QP) uint64
		index  uint64
	}{
		{"too many SGEs after a bind", []trace.WR{bind, {ID: 3, Opcode: ibv.WRSendWithInv, NumSGE: 2, Bytes: 64}, send},
			ibv.ENOMEM, "too_many_sge", func(q QP) uint64 { return q.ENOMEMSGE }, 1},
		{"inline too big third", []trace.WR{bind, send, {ID: 3, Opcode: ibv.WRSend, Flags: ibv.SendInline, NumSGE: 1, Bytes: 61}},
			ibv.ENOMEM, "inline_too_big", func(q QP) uint64 { return q.ENOMEMInline }, 2},
		{"SQ full at the fifth WR", []trace.WR{send, send, send, send, send},
			ibv.ENOMEM, "", func(q QP) uint64 { return q.ENOMEMSQFull }, 4},
		{"bad opcode second", []trace.WR{send, {ID: 3, Opcode: 0xff, NumSGE: 1, Bytes: 8}},
			ibv.EINVAL, "einval", func(q QP) uint64 { return q.EINVAL }, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			s.Create(1, trace.QPTypeRC, caps, false)
			s.Add(&trace.Post{Header: s.Header(), QP: streamtest.QPAddr(1), QPNum: 1, API: trace.APIWR, WRs: tc.wrs, Ret: tc.ret})
			snap := run(t, s, Options{BF: DefaultBF})
			q := snap.QPs[0]
			if tc.counts(q) != 1 || q.ENOMEM+q.EINVAL != 1 || q.WRs != 0 {
				t.Errorf("counters %+v", q.Counters)
			}
			if tc.kind == "" {
				return
			}
			for _, d := range snap.Diagnoses {
				if d.Kind == tc.kind {
					if d.Evidence["wr_index"] != tc.index {
						t.Errorf("%s at WR %d, want %d", d.Kind, d.Evidence["wr_index"], tc.index)
					}
					return
				}
			}
			t.Errorf("no %s diagnosis: %+v", tc.kind, snap.Diagnoses)
		})
	}
}
