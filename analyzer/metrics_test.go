package analyzer

import (
	"slices"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

func TestSignalInterval(t *testing.T) {
	tests := []struct {
		name             string
		build            func(s *streamtest.Stream)
		typical, longest uint64
		longestRun       uint64
	}{
		{"every 4th signaled", func(s *streamtest.Stream) {
			s.Send(1, 16, 0, 4)
		}, 4, 4, 3},
		{"mostly every 4th, once every 8th", func(s *streamtest.Stream) {
			s.Send(1, 12, 0, 4)
			s.Send(1, 7, 0, 0)
			s.Send(1, 1, ibv.SendSignaled, 0)
		}, 4, 8, 7},
		{"tie goes to the shorter interval", func(s *streamtest.Stream) {
			s.Send(1, 2, 0, 2)
			s.Send(1, 2, 0, 0)
			s.Send(1, 1, ibv.SendSignaled, 0)
		}, 2, 3, 2},
		{"long runs counted past the array", func(s *streamtest.Stream) {
			for range 3 {
				s.Send(1, 99, 0, 0)
				s.Send(1, 1, ibv.SendSignaled, 0)
			}
		}, 100, 100, 99},
		{"never signaled", func(s *streamtest.Stream) {
			s.Send(1, 5, 0, 0)
		}, 0, 0, 5},
		{"sq_sig_all", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 0, 1), true)
			s.Send(1, 5, 0, 0)
		}, 1, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.build(s)
			q := run(t, s, Options{}).QPs[0]
			if q.SignalInterval != tc.typical || q.SignalIntervalLongest != tc.longest || q.LongestUnsignaledRun != tc.longestRun {
				t.Fatalf("interval typical %d longest %d, longest run %d; want %d %d %d",
					q.SignalInterval, q.SignalIntervalLongest, q.LongestUnsignaledRun, tc.typical, tc.longest, tc.longestRun)
			}
		})
	}
}

func TestOccupancy(t *testing.T) {
	s := streamtest.New()
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
	for range 5 {
		s.Send(1, 1, 0, 0)
	}
	s.Send(1, 1, ibv.SendSignaled, 0) // 6 outstanding
	s.Poll(1, 5)                      // 0 outstanding
	s.Send(1, 1, 0, 0)
	o := run(t, s, Options{}).QPs[0].Occupancy
	// after each post: 1 2 3 4 5 6 1; the last bucket ends at the peak
	want := []HistBucket{{1, 1, 2}, {2, 3, 2}, {4, 6, 3}}
	if !slices.Equal(o.Histogram, want) {
		t.Errorf("histogram %v, want %v", o.Histogram, want)
	}
	if o.Now != 1 || o.Peak != 6 || o.Depth != 16 || o.Mean != 22.0/7 || o.P50 != 3 || o.P99 != 6 || o.PercentilesBound {
		t.Errorf("got %+v; want now 1, peak 6, depth 16, mean 22/7, p50 3, p99 6", o)
	}
}

// Percentiles are exact (nearest rank) up to occExact and never above the
// peak; past occExact they are upper bounds, said so.
func TestPercentiles(t *testing.T) {
	tests := []struct {
		name       string
		values     map[uint64]uint64 // occupancy -> post calls
		peak       uint64
		p50, p99   uint64
		bound      bool
		lastBucket HistBucket
	}{
		{"a full queue of 128", map[uint64]uint64{128: 1000, 127: 10}, 128, 128, 128, false, HistBucket{128, 128, 1000}},
		{"mostly empty", map[uint64]uint64{0: 989, 1: 10, 100: 1}, 100, 0, 1, false, HistBucket{64, 100, 1}},
		{"the 99th at the top", map[uint64]uint64{3: 98, 200: 2}, 200, 3, 200, false, HistBucket{128, 200, 2}},
		{"the deepest exact value", map[uint64]uint64{occExact - 1: 5}, occExact - 1, occExact - 1, occExact - 1, false,
			HistBucket{occExact / 2, occExact - 1, 5}},
		{"past the exact counts", map[uint64]uint64{5: 10, occExact + 3: 90}, occExact + 3, occExact + 3, occExact + 3, true,
			HistBucket{occExact, occExact + 3, 90}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := &sq{}
			for v, n := range tc.values {
				for range n {
					q.occ.note(v)
				}
			}
			q.c.PeakOutstanding = tc.peak
			o := q.occupancy(true)
			if o.P50 != tc.p50 || o.P99 != tc.p99 || o.PercentilesBound != tc.bound {
				t.Errorf("p50 %d, p99 %d, bound %v; want %d, %d, %v", o.P50, o.P99, o.PercentilesBound, tc.p50, tc.p99, tc.bound)
			}
			if last := o.Histogram[len(o.Histogram)-1]; last != tc.lastBucket {
				t.Errorf("last bucket %+v, want %+v", last, tc.lastBucket)
			}
			if n := len(q.occ.exact); uint64(n) > min(2*tc.peak+1, occExact) && n > 64 {
				t.Errorf("%d exact counts kept for a peak of %d", n, tc.peak)
			}
		})
	}
}

func TestRates(t *testing.T) {
	s := streamtest.New()
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
	for range 5 {
		s.Send(1, 4, 0, 4) // 5 calls of 4 WRs, every 100 ns
		s.EmptyPolls(1, 1)
		s.Poll(1, s.IDs[1]-1)
	}
	snap := run(t, s, Options{})
	r := snap.QPs[0].Rates
	// posts from 1200 to the last poll at 2600 ns: 1400 ns
	want := Rates{SpanNS: 1400, WRsPerSec: 20 * 1e9 / 1400, PostsPerSec: 5 * 1e9 / 1400, CQEsPerSec: 5 * 1e9 / 1400,
		PollsPerSec: 10 * 1e9 / 1300, PollsPerCQE: 2, WRsPerDoorbell: 4}
	if r != want {
		t.Errorf("rates %+v\nwant  %+v", r, want)
	}
	if snap.QPs[0].Polls != 10 || snap.QPs[0].EmptyPolls != 5 || snap.Total.Polls != 10 {
		t.Errorf("polls %d empty %d total %d, want 10 5 10", snap.QPs[0].Polls, snap.QPs[0].EmptyPolls, snap.Total.Polls)
	}
}

func TestHistory(t *testing.T) {
	tests := []struct {
		name  string
		build func(s *streamtest.Stream)
		start uint64
		want  []OccSample
	}{
		{"one window", func(s *streamtest.Stream) {
			s.Send(1, 3, 0, 0)
			s.Send(1, 1, ibv.SendSignaled, 0)
			s.Poll(1, 3)
		}, 1000, []OccSample{{Max: 4, End: 0, WRs: 4, CQEs: 1, Min: 0}}},
		{"gap carries the level over", func(s *streamtest.Stream) {
			s.Send(1, 2, 0, 0) // t=1100, window 1
			s.Wait(2000)
			s.Send(1, 1, ibv.SendSignaled, 0) // t=3200, window 3
			s.Poll(1, 2)                      // t=3300
		}, 1000, []OccSample{{2, 2, 2, 0, 2}, {2, 2, 0, 0, 2}, {3, 0, 1, 1, 0}}},
		{"only the last windows are kept", func(s *streamtest.Stream) {
			for range 6 {
				s.Send(1, 1, 0, 0)
				s.Wait(900)
			}
		}, 3000, []OccSample{{3, 3, 1, 0, 2}, {4, 4, 1, 0, 3}, {5, 5, 1, 0, 4}, {6, 6, 1, 0, 5}}},
		{"a long gap keeps only the carried level", func(s *streamtest.Stream) {
			s.Send(1, 1, 0, 0)
			s.Wait(100_000)
			s.Send(1, 1, 0, 0)
		}, 98000, []OccSample{{1, 1, 0, 0, 1}, {1, 1, 0, 0, 1}, {1, 1, 0, 0, 1}, {2, 2, 1, 0, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.build(s)
			snap := run(t, s, Options{HistoryStepNS: 1000, HistoryLen: 4})
			q := snap.QPs[0]
			if snap.HistoryStepNS != 1000 || q.HistoryStartNS != tc.start || !slices.Equal(q.History, tc.want) {
				t.Fatalf("history from %d (step %d): %v\nwant from %d: %v", q.HistoryStartNS, snap.HistoryStepNS, q.History, tc.start, tc.want)
			}
		})
	}
}

func TestHistoryOff(t *testing.T) {
	s := streamtest.New()
	s.Send(1, 4, 0, 0)
	if h := run(t, s, Options{HistoryLen: -1}).QPs[0].History; h != nil {
		t.Fatalf("history %v with HistoryLen -1", h)
	}
}
