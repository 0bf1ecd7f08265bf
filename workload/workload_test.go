package workload

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/verbs"
)

func simConfig() Config {
	c := Defaults()
	c.Sim.Deterministic = true
	return c
}

func run(t *testing.T, c Config) *Result {
	t.Helper()
	if err := c.Validate(true); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mut    func(*Config)
		cqExpl bool
		ok     bool
	}{
		{"defaults", func(*Config) {}, false, true},
		{"depth 0", func(c *Config) { c.TxDepth = 0 }, false, false},
		{"size 0 with inline", func(c *Config) { c.Size = 0; c.InlineSize = 64 }, false, false},
		{"size 0 without inline", func(c *Config) { c.Size = 0 }, false, true},
		{"explicit -Q larger than depth", func(c *Config) { c.CQMod = 256 }, true, false},
		{"default -Q larger than depth is capped", func(c *Config) { c.TxDepth = 64 }, false, true},
		{"post list over depth", func(c *Config) { c.PostList = 256 }, false, false},
		// flow control that can never post again: 6 unsignaled + 11 > 16
		{"-Q 7 -l 11 -t 16 stalls", func(c *Config) { c.CQMod, c.PostList, c.TxDepth = 7, 11, 16 }, true, false},
		{"-Q 7 -l 11 -t 17", func(c *Config) { c.CQMod, c.PostList, c.TxDepth = 7, 11, 17 }, true, true},
		{"-l a multiple of -Q", func(c *Config) { c.CQMod, c.PostList, c.TxDepth = 4, 8, 8 }, true, true},
		{"default -Q with a post list not dividing the depth", func(c *Config) { c.PostList, c.TxDepth = 8, 100 }, false, true},
		{"UD write", func(c *Config) { c.Conn = verbs.UD; c.Opcodes = []int{verbs.OpRDMAWrite} }, false, false},
		{"bad api", func(c *Config) { c.API = "verbs" }, false, false},
		{"direct api on the simulated HCA", func(c *Config) { c.API = "direct" }, false, true},
		{"direct api on a device", func(c *Config) { c.API, c.Device = "direct", "rxe0" }, false, false},
		{"no iters no duration", func(c *Config) { c.Iters = 0 }, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.mut(&c)
			err := c.Validate(tc.cqExpl)
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			var ue *UsageError
			if err != nil && !errors.As(err, &ue) {
				t.Fatalf("not a UsageError: %T", err)
			}
			if tc.ok && c.CQMod > c.TxDepth {
				t.Fatalf("cq_mod %d not capped to depth %d", c.CQMod, c.TxDepth)
			}
			if tc.ok && c.CQMod-gcd(c.PostList, c.CQMod)+c.PostList > c.TxDepth {
				t.Fatalf("-Q %d -l %d -t %d accepted: the flow control stalls", c.CQMod, c.PostList, c.TxDepth)
			}
		})
	}
}

func TestParseFault(t *testing.T) {
	tests := []struct {
		in   string
		want Fault
		n    uint32
		ok   bool
	}{
		{"never-signal", FaultNeverSignal, 0, true},
		{"lazy-poll=8", FaultLazyPoll, 8, true},
		{"lazy-poll", 0, 0, false},
		{"lazy-poll=1", 0, 0, false},
		{"inline-too-big", FaultInlineTooBig, 0, true},
		{"too-many-sge", FaultTooManySGE, 0, true},
		{"bad-opcode", FaultBadOpcode, 0, true},
		{"none", 0, 0, false},
		{"explode", 0, 0, false},
		{"never-signal=3", 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			f, n, err := ParseFault(tc.in)
			if (err == nil) != tc.ok || f != tc.want || n != tc.n {
				t.Fatalf("ParseFault = %v %d %v", f, n, err)
			}
		})
	}
}

// The acceptance case: inline, signal every 16th, one WR per call.
func TestHealthyInline(t *testing.T) {
	for _, api := range []string{"post_send", "wr"} {
		t.Run(api, func(t *testing.T) {
			c := simConfig()
			c.Size, c.InlineSize, c.CQMod, c.TxDepth, c.Iters, c.API = 64, 64, 16, 128, 100000, api
			r := run(t, c)
			k := r.QPs[0].Counters
			if k.Inline != k.WRs || k.WRs != 100000 || k.Signaled != k.WRs/16 || k.CQEWrites != k.Signaled ||
				k.BFWrites != k.PostCalls || k.CQEsPolled != k.Signaled {
				t.Fatalf("counters %+v", k)
			}
			if k.ENOMEMSQFull+k.ENOMEMInline+k.ENOMEMSGE+k.EINVAL != 0 {
				t.Fatalf("errors %+v", k)
			}
			if k.PeakOutstanding > 128 {
				t.Fatalf("peak %d over tx-depth", k.PeakOutstanding)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name  string
		mut   func(*Config)
		check func(t *testing.T, q QPResult)
	}{
		{"never-signal", func(c *Config) { c.Fault = FaultNeverSignal; c.Iters = 10000 }, func(t *testing.T, q QPResult) {
			k := q.Counters
			if k.WRs != uint64(k.MaxSendWR) || k.ENOMEMSQFull != 10000-k.WRs || k.PeakOutstanding != k.WRs {
				t.Fatalf("%+v", k)
			}
		}},
		{"lazy-poll", func(c *Config) { c.Fault = FaultLazyPoll; c.LazyPoll = 400; c.CQMod = 16; c.Iters = 10000 }, func(t *testing.T, q QPResult) {
			if q.Counters.ENOMEMSQFull == 0 || q.Counters.WRs+q.Counters.ENOMEMSQFull != 10000 {
				t.Fatalf("%+v", q.Counters)
			}
		}},
		{"lazy-poll: the application's peak is within the SQ", func(c *Config) {
			c.Fault = FaultLazyPoll
			c.LazyPoll = 100
			c.TxDepth = 64
			c.CQMod = 8
			c.PostList = 4
			c.Iters = 2000
		}, func(t *testing.T, q QPResult) {
			// WRs a failed post dropped are never posted: they must not be
			// taken from the WRs outstanding (it wrapped to 2^64-225)
			if q.Counters.ENOMEMSQFull == 0 || q.App.PeakOutstanding == 0 || q.App.PeakOutstanding > uint64(q.Caps.MaxSendWR) {
				t.Fatalf("app peak %d, SQ depth %d, %+v", q.App.PeakOutstanding, q.Caps.MaxSendWR, q.Counters)
			}
		}},
		{"lazy-poll often enough", func(c *Config) { c.Fault = FaultLazyPoll; c.LazyPoll = 32; c.CQMod = 16; c.Iters = 10000 }, func(t *testing.T, q QPResult) {
			if q.Counters.ENOMEMSQFull != 0 || q.Counters.WRs != 10000 {
				t.Fatalf("%+v", q.Counters)
			}
		}},
		{"inline-too-big", func(c *Config) { c.Fault = FaultInlineTooBig; c.Iters = 50 }, func(t *testing.T, q QPResult) {
			if q.Counters.ENOMEMInline != 50 || q.Counters.WRs != 0 || q.WRSize != q.Caps.MaxInlineData+1 {
				t.Fatalf("%+v", q.Counters)
			}
		}},
		{"too-many-sge", func(c *Config) { c.Fault = FaultTooManySGE; c.Iters = 50 }, func(t *testing.T, q QPResult) {
			if q.Counters.ENOMEMSGE != 50 || q.Counters.WRs != 0 {
				t.Fatalf("%+v", q.Counters)
			}
		}},
		{"bad-opcode", func(c *Config) { c.Fault = FaultBadOpcode; c.Iters = 50 }, func(t *testing.T, q QPResult) {
			if q.Counters.EINVAL != 50 || q.App.EINVAL != 50 {
				t.Fatalf("%+v", q.Counters)
			}
		}},
		{"sig-all", func(c *Config) { c.SigAll = true; c.Iters = 1000 }, func(t *testing.T, q QPResult) {
			if q.Counters.Signaled != 1000 || q.Counters.CQEWrites != 1000 || q.App.CQEsPolled != 1000 {
				t.Fatalf("%+v", q.Counters)
			}
		}},
		{"post list 8 write", func(c *Config) { c.PostList = 8; c.Opcodes = []int{verbs.OpRDMAWrite}; c.Iters = 8000; c.CQMod = 64 }, func(t *testing.T, q QPResult) {
			k := q.Counters
			if k.Doorbells != 1000 || k.BFWrites != 0 || k.DMAReadsWQE != 1000 || k.Signaled != 125 {
				t.Fatalf("%+v", k)
			}
		}},
		{"a failed list drops its signaled WR: the flow control stalls, the run ends", func(c *Config) {
			c.Fault, c.TxDepth, c.CQMod, c.PostList, c.Iters = FaultTooManySGE, 4, 4, 2, 938
			// a bind takes no SGE: it is posted, the WR after it refused
			c.Opcodes = []int{verbs.OpRDMAWrite, ibv.WRRDMARead, ibv.WRBindMW}
		}, func(t *testing.T, q QPResult) {
			if !q.App.Stalled || q.App.StalledUnsignaled != 3 || q.Counters.WRs != 3 || q.App.Attempts != 16 || q.Counters.Signaled != 0 {
				t.Fatalf("stalled %v with %d outstanding after %d attempts, %+v", q.App.Stalled, q.App.StalledUnsignaled, q.App.Attempts, q.Counters)
			}
		}},
		{"UD", func(c *Config) { c.Conn = verbs.UD; c.Iters = 1000; c.InlineSize = 64 }, func(t *testing.T, q QPResult) {
			if q.Counters.WRs != 1000 || q.Counters.Inline != 1000 {
				t.Fatalf("%+v", q.Counters)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := simConfig()
			tc.mut(&c)
			r := run(t, c)
			for _, q := range r.QPs {
				tc.check(t, q)
			}
		})
	}
}

func TestQPsAndTimedRun(t *testing.T) {
	c := Defaults() // the real NIC model, not deterministic
	c.QPs = 3
	c.Iters = 20000
	c.CQMod = 16
	c.InlineSize = 64
	r := run(t, c)
	if len(r.QPs) != 3 {
		t.Fatalf("%d QPs", len(r.QPs))
	}
	for _, q := range r.QPs {
		k := q.Counters
		if k.WRs != 20000 || k.CQEsPolled != k.Signaled || k.Outstanding != 0 || q.App.AvgLatencyNS <= 0 {
			t.Fatalf("QP %#x %+v %+v", k.QPNum, k, q.App)
		}
	}
}

func TestUnknownDevice(t *testing.T) {
	c := Defaults()
	c.Device = "mlx5_9"
	_, err := Run(context.Background(), c)
	if err == nil {
		t.Fatal("want an error")
	}
}

func TestFaultAfterOnOneQP(t *testing.T) {
	c := simConfig()
	c.QPs = 2
	c.Iters = 0
	c.Duration = 300 * time.Millisecond
	c.Rate = 20000
	c.CQMod = 16
	c.Fault = FaultNeverSignal
	c.FaultAfter = 100 * time.Millisecond
	c.FaultQP = 1
	r := run(t, c)
	ok, bad := r.QPs[0], r.QPs[1]
	if ok.Counters.ENOMEMSQFull != 0 || ok.App.Fault != "" {
		t.Fatalf("healthy QP hit the fault: %+v", ok.Counters)
	}
	// healthy WRs before the fault (20,000 WR/s for 0.1 s where the thread
	// gets a whole CPU, far fewer on a busy host)
	if bad.Counters.ENOMEMSQFull == 0 || bad.App.FaultStartSeconds < 0.09 || bad.App.FaultStartWR < 16 {
		t.Fatalf("faulty QP: %+v %+v", bad.Counters, bad.App)
	}
	// before the fault it signaled every 16th WR
	if bad.Counters.Signaled < bad.App.FaultStartWR/16-1 {
		t.Fatalf("signaled %d before WR %d", bad.Counters.Signaled, bad.App.FaultStartWR)
	}
}

// QPs spread over threads: every QP posts all its WRs and gets every
// completion back, each thread's shared CQ counts exactly its QPs' polls
// and completions, and each SRQ's receives are refilled as SENDs take them.
func TestThreadsSharedCQAndSRQ(t *testing.T) {
	tests := []struct {
		name          string
		qps, threads  int
		sharedCQ, srq bool
		list          uint32
	}{
		{"threads", 6, 2, false, false, 1},
		{"shared CQ", 8, 2, true, false, 1},
		{"shared CQ lists", 8, 3, true, false, 8},
		{"SRQ", 6, 2, false, true, 1},
		{"shared CQ and SRQ", 12, 4, true, true, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.Sim.Deterministic = true
			c.QPs, c.Threads, c.SharedCQ, c.SRQ, c.PostList = tc.qps, tc.threads, tc.sharedCQ, tc.srq, tc.list
			c.Iters, c.CQMod = 2000, 16
			if err := c.Validate(true); err != nil {
				t.Fatal(err)
			}
			r := run(t, c)
			type cqSum struct{ polls, cqes uint64 }
			cqs := map[uint64]*cqSum{}
			srqRecvs := map[uint64]uint64{}
			for _, q := range r.QPs {
				k := q.Counters
				if k.WRs != 2000 || k.CQEsPolled != k.Signaled || k.Outstanding != 0 || q.App.CQEsPolled != k.CQEsPolled || q.CQ == nil {
					t.Fatalf("QP %#x %+v %+v", k.QPNum, k, q.App)
				}
				s := cqs[q.CQ.Addr]
				if s == nil {
					s = &cqSum{}
					cqs[q.CQ.Addr] = s
				}
				s.polls += q.App.Polls
				s.cqes += k.CQEsPolled
				if tc.srq != (q.SRQ != nil) || (q.Receiver != nil) != tc.srq {
					t.Fatalf("QP %#x SRQ %v receiver %v", k.QPNum, q.SRQ, q.Receiver)
				}
				if q.SRQ != nil {
					srqRecvs[q.SRQ.Addr] += q.Receiver.RecvCQEsPolled
				}
			}
			wantCQs := tc.qps
			if tc.sharedCQ {
				wantCQs = tc.threads
			}
			if len(cqs) != wantCQs {
				t.Fatalf("%d send CQs, want %d", len(cqs), wantCQs)
			}
			for _, q := range r.QPs {
				s := cqs[q.CQ.Addr]
				if q.CQ.Polls != s.polls || q.CQ.CQEs != s.cqes {
					t.Fatalf("CQ %#x polls %d CQEs %d; its QPs polled %d times and took %d", q.CQ.Addr, q.CQ.Polls, q.CQ.CQEs, s.polls, s.cqes)
				}
				// the SRQ was filled, then refilled once per receive
				// completion its peers polled
				if q.SRQ != nil && q.SRQ.Posted != q.SRQ.Outstanding+srqRecvs[q.SRQ.Addr] {
					t.Fatalf("SRQ %#x posted %d, outstanding %d, completions polled %d", q.SRQ.Addr, q.SRQ.Posted, q.SRQ.Outstanding, srqRecvs[q.SRQ.Addr])
				}
			}
			// what a device run reports from the application's counts
			// is the simulated HCA's truth
			for th := range tc.threads {
				first, end := threadQPs(th, tc.qps, tc.threads)
				qs := r.QPs[first:end]
				cqs := appCQCounts(qs, tc.sharedCQ)
				for i, q := range qs {
					got, want := cqs[i], q.CQ.CQCounters
					if got.Polls != want.Polls || got.EmptyPolls != want.EmptyPolls || got.CQEs != want.CQEs {
						t.Errorf("thread %d QP %#x: application's CQ counts %+v, the HCA's %+v", th, q.Counters.QPNum, got, want)
					}
				}
				if tc.srq {
					if got, want := appSRQCounts(qs, uint32(qs[0].SRQ.Filled)), qs[0].SRQ.SRQCounters; got != want {
						t.Errorf("thread %d: application's SRQ counts %+v, the HCA's %+v", th, got, want)
					}
				}
			}
		})
	}
}
