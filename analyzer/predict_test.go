package analyzer

import (
	"slices"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// flowControlled posts like perftest: signal every sigEvery WRs, lists of
// list WRs, never more than txDepth outstanding, polling after every post
// and retiring through each CQE everything up to its WR.
func flowControlled(s *streamtest.Stream, qpn uint32, txDepth, sigEvery uint64, list, wrs int) {
	var posted, retired uint64
	var pending []uint64 // signaled wr_ids posted, not yet polled
	for int(posted) < wrs {
		if posted-retired+uint64(list) > txDepth {
			id := pending[0]
			pending = pending[1:]
			s.Poll(qpn, id)
			retired = id + 1
			continue
		}
		s.Send(qpn, list, 0, sigEvery)
		for i := range uint64(list) {
			if (posted+i+1)%sigEvery == 0 {
				pending = append(pending, posted+i)
			}
		}
		posted += uint64(list)
	}
	for _, id := range pending {
		s.Poll(qpn, id)
	}
}

// Predictions rest on what the queue does: an application that keeps its
// own flow control and signal pattern stays quiet whatever its signal
// interval, and one that breaks its pattern or outgrows its queue is
// warned, with the numbers that show it.
func TestPredictions(t *testing.T) {
	tests := []struct {
		name  string
		build func(s *streamtest.Stream)
		want  []string
		ev    map[string]uint64 // evidence of the first wanted kind
	}{
		{"perftest -Q 100 -t 128", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 60, 1), false)
			flowControlled(s, 1, 128, 100, 1, 5000)
		}, nil, nil},
		{"perftest -Q 100 -t 128 -l 4", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 60, 1), false)
			flowControlled(s, 1, 128, 100, 4, 5000)
		}, nil, nil},
		{"-Q half the depth", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(256, 60, 1), false)
			flowControlled(s, 1, 256, 128, 8, 5000)
		}, nil, nil},
		{"-Q 112 -t 128", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 60, 1), false)
			flowControlled(s, 1, 128, 112, 1, 3000)
		}, nil, nil},
		// before any WR is signaled nothing tells a first run of 7/8 of
		// the depth from a run that never ends: warned once, then the
		// pattern it keeps is quiet
		{"-Q 120 -t 128: its first run only", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 60, 1), false)
			flowControlled(s, 1, 128, 120, 1, 3000)
		}, []string{"unsignaled_run_near_depth"}, map[string]uint64{"unsignaled_run": 112, "max_send_wr": 128,
			"pct_of_depth": 87, "outstanding": 112, "count": 1}},
		{"never signaled: 7/8 of the depth", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 60, 1), false)
			for range 120 {
				s.Send(1, 1, 0, 0)
			}
		}, []string{"unsignaled_run_near_depth"}, map[string]uint64{"unsignaled_run": 112, "max_send_wr": 128,
			"pct_of_depth": 87, "outstanding": 112, "count": 1}},
		{"never signaled: 7/8 not reached", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 60, 1), false)
			for range 111 {
				s.Send(1, 1, 0, 0)
			}
		}, nil, nil},
		{"pattern of 15 broken", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(128, 60, 1), false)
			flowControlled(s, 1, 128, 16, 1, 1600)
			for range 100 {
				s.Send(1, 1, 0, 0)
			}
		}, []string{"unsignaled_run_near_depth"}, map[string]uint64{"unsignaled_run": 96, "max_send_wr": 128,
			"pct_of_depth": 75, "outstanding": 96, "count": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.build(s)
			snap := run(t, s, Options{BF: DefaultBF})
			got := diagKinds(snap)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("diagnoses %q, want %q", got, tc.want)
			}
			if len(tc.want) == 0 {
				return
			}
			d := snap.Diagnoses[len(snap.Diagnoses)-1]
			for k, v := range tc.ev {
				if k == "count" {
					if d.Count != v {
						t.Errorf("%s made %d times, want %d", d.Kind, d.Count, v)
					}
					continue
				}
				if d.Evidence[k] != v {
					t.Errorf("%s evidence %s = %d, want %d (all: %v)", d.Kind, k, d.Evidence[k], v, d.Evidence)
				}
			}
		})
	}
}

// occupancyWindows posts and polls so that the occupancy at the end of
// each 10 ms window is ends[i]: one post of the growth or one poll of the
// shrink at the window's start, then the rest of the window waited out (a
// window's peak is then the larger of its end and the end before); a poll
// of one WR closes the last window.
func occupancyWindows(s *streamtest.Stream, qpn uint32, ends []int, flags uint32) {
	var posted, retired uint64
	for _, e := range ends {
		out := int(posted - retired)
		switch {
		case e > out:
			s.Send(qpn, e-out, flags, 0)
			posted += uint64(e - out)
		case e < out:
			var ids []uint64
			for range out - e {
				ids = append(ids, retired)
				retired++
			}
			s.Poll(qpn, ids...)
		}
		s.Wait(DefaultHistoryStepNS)
	}
	s.Poll(qpn, retired)
}

func TestTrendPrediction(t *testing.T) {
	grow := []int{34, 36, 38, 40, 42, 44, 46, 48, 50, 52}
	signaled, unsignaled := uint32(ibv.SendSignaled), uint32(0)
	tests := []struct {
		name  string
		depth uint32
		ends  []int
		flags uint32 // of the WRs posted
		want  []string
		ev    map[string]uint64
	}{
		{"growing into new highs", 64, grow, signaled, []string{"occupancy_trending_full"},
			map[string]uint64{"occupancy_from": 34, "occupancy": 48, "max_send_wr": 64, "over_ms": 70,
				"growth_wrs_per_s": 200, "full_in_ms": 80}},
		// unsignaled WRs between two signaled ones: no completion is due
		// yet, one CQE will retire them all
		{"growing with no completion due", 64, grow, unsignaled, nil, nil},
		{"back up to a level held before, never below half", 64,
			[]int{34, 60, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58}, signaled, nil, nil},
		{"flow control at the depth, sampled at random", 128,
			[]int{128, 110, 112, 115, 118, 120, 124, 126, 127, 127, 128}, signaled, nil, nil},
		{"one step: an application that resumes", 64,
			[]int{34, 34, 34, 34, 34, 34, 34, 34, 60, 60, 60}, signaled, nil, nil},
		// a slow flow-controlled application swings up to its plateau
		// again in every signal interval
		{"up to the level held before a short drain", 64,
			[]int{60, 62, 63, 20, 10, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52}, signaled, nil, nil},
		{"growing again after a long drain", 64,
			[]int{60, 62, 63, 20, 10, 10, 10, 10, 10, 10, 10, 10, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52}, signaled,
			[]string{"occupancy_trending_full"},
			map[string]uint64{"occupancy_from": 10, "occupancy": 38, "max_send_wr": 64, "over_ms": 70,
				"growth_wrs_per_s": 400, "full_in_ms": 65}},
		{"growth too slow to fill within a second", 1024,
			[]int{600, 601, 602, 603, 604, 605, 606, 607, 608, 609, 610}, signaled, nil, nil},
		// rxe frees a slot when a WR executes: more WRs can be outstanding
		// than the depth says, and a queue still growing past it is
		// predicted without a time to full
		{"past the depth and growing", 8, []int{20, 40, 60, 80, 100, 120, 140, 160, 180, 200, 220}, signaled,
			[]string{"calls_not_traced"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(tc.depth, 60, 1), false)
			occupancyWindows(s, 1, tc.ends, tc.flags)
			snap := run(t, s, Options{BF: DefaultBF})
			got := diagKinds(snap)
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("diagnoses %q, want %q", got, want)
			}
			for _, d := range snap.Diagnoses {
				if d.Kind != "occupancy_trending_full" {
					continue
				}
				if len(d.Evidence) != len(tc.ev) {
					t.Errorf("evidence %v, want %v", d.Evidence, tc.ev)
				}
				for k, v := range tc.ev {
					if d.Evidence[k] != v {
						t.Errorf("evidence %s = %d, want %d (all: %v)", k, d.Evidence[k], v, d.Evidence)
					}
				}
			}
		})
	}
}
