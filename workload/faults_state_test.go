package workload

import (
	"errors"
	"testing"
	"time"

	"github.com/sqscope/sqscope/verbs"
)

func TestNewFaultsValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*Config)
		ok   bool
	}{
		{"post-before-rts", func(c *Config) { c.Fault = FaultPostBeforeRTS }, true},
		{"post-before-rts with --fault-after", func(c *Config) { c.Fault = FaultPostBeforeRTS; c.FaultAfter = time.Second }, false},
		{"cq-overrun without --cq-depth", func(c *Config) { c.Fault = FaultCQOverrun; c.CQMod = 1 }, false},
		{"cq-overrun, CQ deep enough", func(c *Config) { c.Fault = FaultCQOverrun; c.CQMod = 1; c.CQDepth = 128 }, false},
		{"cq-overrun", func(c *Config) { c.Fault = FaultCQOverrun; c.CQMod = 1; c.CQDepth = 32 }, true},
		{"cq-depth over the limit", func(c *Config) { c.CQDepth = 1 << 23 }, false},
		{"rq-starve", func(c *Config) { c.Fault = FaultRQStarve }, true},
		{"rq-starve with WRITEs", func(c *Config) { c.Fault = FaultRQStarve; c.Opcodes = []int{verbs.OpRDMAWrite} }, false},
		{"rq-starve on UD", func(c *Config) { c.Fault = FaultRQStarve; c.Conn = verbs.UD }, false},
		{"receiver on UD", func(c *Config) { c.Receiver = true; c.Conn = verbs.UD }, false},
		{"rnr-retry 8", func(c *Config) { c.Receiver = true; c.RNRRetry = 8 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.mut(&c)
			err := c.Validate(true)
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			var ue *UsageError
			if err != nil && !errors.As(err, &ue) {
				t.Fatalf("not a UsageError: %T", err)
			}
			if tc.ok && c.Fault == FaultRQStarve && !c.Receiver {
				t.Fatal("rq-starve without a receiver")
			}
		})
	}
	for _, in := range []string{"post-before-rts", "cq-overrun", "rq-starve"} {
		if f, _, err := ParseFault(in); err != nil || f.String() != in {
			t.Errorf("ParseFault(%q) = %v, %v", in, f, err)
		}
	}
}

// The new faults on the deterministic simulator, by their ground truth.
func TestNewFaults(t *testing.T) {
	tests := []struct {
		name  string
		mut   func(*Config)
		check func(t *testing.T, q QPResult)
	}{
		{"post-before-rts", func(c *Config) { c.Fault = FaultPostBeforeRTS; c.Iters = 50 }, func(t *testing.T, q QPResult) {
			k := q.Counters
			if k.NotRTS != 50 || k.WRs != 0 || k.ENOMEMSGE != 0 || q.App.ENOMEM != 50 {
				t.Fatalf("%+v %+v", k, q.App)
			}
		}},
		{"post-before-rts wr api", func(c *Config) { c.Fault = FaultPostBeforeRTS; c.API = "wr"; c.Iters = 50 }, func(t *testing.T, q QPResult) {
			k := q.Counters
			if k.NotRTS != 50 || k.EINVAL != 50 || k.WRs != 0 || q.App.EINVAL != 50 {
				t.Fatalf("%+v %+v", k, q.App)
			}
		}},
		{"cq-overrun", func(c *Config) {
			c.Fault, c.CQMod, c.TxDepth, c.CQDepth, c.Iters = FaultCQOverrun, 1, 128, 32, 2000
			c.DrainTimeout = 100 * time.Millisecond
		}, func(t *testing.T, q QPResult) {
			// a 63-entry CQ (32 rounded as mlx5 does) under 128 signaled WRs
			k := q.Counters
			if k.CQOverrunErrs != 1 || k.CQEWrites != 63 || k.CQEsPolled != 63 || k.Outstanding != 128 || !q.App.Stalled {
				t.Fatalf("%+v %+v", k, q.App)
			}
		}},
		{"receiver, healthy", func(c *Config) { c.Receiver = true; c.CQMod = 16; c.Iters = 5000 }, func(t *testing.T, q QPResult) {
			k, r := q.Counters, q.Receiver
			if r == nil || k.WRs != 5000 || k.RNRWaits != 0 || r.RecvsConsumed != 5000 || r.RecvCQEsPolled != 5000 ||
				r.PostRecvs != 5000+uint64(q.Caps.MaxRecvWR) {
				t.Fatalf("%+v receiver %+v", k, r)
			}
		}},
		{"rq-starve", func(c *Config) {
			c.Fault, c.TxDepth, c.CQMod, c.Iters = FaultRQStarve, 64, 8, 500
			c.DrainTimeout = 100 * time.Millisecond
		}, func(t *testing.T, q QPResult) {
			k, r := q.Counters, q.Receiver
			if r == nil || r.PostRecvs != 64 || r.RecvsConsumed != 64 || k.RNRWaits != 1 || k.WRs != 128 ||
				k.ENOMEMSQFull != 372 || k.Outstanding != 64 {
				t.Fatalf("%+v receiver %+v", k, r)
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
