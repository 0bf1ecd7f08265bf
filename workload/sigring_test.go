package workload

import (
	"testing"
)

// The application's own count of WRs outstanding (the workload's truth on
// a device, checked against the simulated HCA's here) never wraps: the
// ring of signaled WRs outstanding grows when a provider holds more than
// it was sized for (rxe holds more than the max_send_wr it reports). Here
// the ring starts at 2 slots, far fewer than the simulated HCA holds, and
// the truth must still equal the HCA's, and, where the simulated NIC is
// deterministic, a run's with the ring sized to the depth.
func TestSignaledRingNeverWraps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mut     func(*Config)
		minPeak uint64
	}{
		// how many are outstanding at once depends on how fast this host
		// posts against the simulated link's clock: on a busy one, few,
		// but more than the ring's 2 slots
		{"a slow link, every WR signaled", func(c *Config) {
			c.Sim.Deterministic, c.Sim.LinkGbps, c.Sim.RTTNS = false, 1, 20000
			c.CQMod, c.TxDepth, c.Iters = 1, 128, 3000
		}, 3},
		{"lazy polling fills the SQ", func(c *Config) { c.Fault, c.LazyPoll, c.CQMod, c.Iters = FaultLazyPoll, 300, 4, 5000 }, 128},
		{"lazy polling, lists of 8 on 4 QPs sharing a CQ", func(c *Config) {
			c.QPs, c.SharedCQ, c.PostList, c.CQMod, c.TxDepth, c.Iters = 4, true, 8, 2, 128, 4000
			c.Fault, c.LazyPoll = FaultLazyPoll, 40
		}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := simConfig()
			tc.mut(&c)
			sized := run(t, c)
			small := sigSlots
			sigSlots = func(uint32, uint32) uint64 { return 2 }
			t.Cleanup(func() { sigSlots = small })
			grown := run(t, c)
			for i, q := range grown.QPs {
				a, k := q.App, q.Counters
				if a.PeakOutstanding != k.PeakOutstanding || a.PeakOutstanding > uint64(q.Caps.MaxSendWR) || a.PeakOutstanding < tc.minPeak {
					t.Errorf("QP %d: the application's peak %d, the HCA's %d, the depth %d; want them equal, within the depth and at least %d",
						i, a.PeakOutstanding, k.PeakOutstanding, q.Caps.MaxSendWR, tc.minPeak)
				}
				if a.CQEsPolled != k.CQEsPolled || a.Undrained != 0 || a.Stalled {
					t.Errorf("QP %d: %d CQEs polled (the HCA's %d), %d undrained, stalled %v", i, a.CQEsPolled, k.CQEsPolled, a.Undrained, a.Stalled)
				}
				if a.MaxLatencyNS == 0 || a.AvgLatencyNS <= 0 || a.AvgLatencyNS > float64(a.MaxLatencyNS) {
					t.Errorf("QP %d: latency mean %.0f ns, max %d ns", i, a.AvgLatencyNS, a.MaxLatencyNS)
				}
				if s := sized.QPs[i].App; c.Sim.Deterministic && (s.PeakOutstanding != a.PeakOutstanding || s.WRs != a.WRs || s.CQEsPolled != a.CQEsPolled) {
					t.Errorf("QP %d: ring of 2 slots: peak %d, %d WRs, %d CQEs; sized to the depth: %d, %d, %d",
						i, a.PeakOutstanding, a.WRs, a.CQEsPolled, s.PeakOutstanding, s.WRs, s.CQEsPolled)
				}
			}
		})
	}
}
