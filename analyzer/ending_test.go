package analyzer

import (
	"encoding/json"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
)

// A trace cut while the target ran says where, how many WRs it left
// without their completions and how many posts in flight it did not see;
// completions that matched no post are counted per QP and in total, in
// the snapshot and its JSON, cut or not.
func TestEndingCutAndUnmatched(t *testing.T) {
	type want struct {
		wantCut       bool
		wantOut       *uint64 // WRs outstanding at the cut
		wantUnseen    uint64
		wantUnmatched uint64 // in total
	}
	wants := map[string]want{
		"cut with WRs posted after the last poll": {true, ptr(uint64(19)), 1, 0},
		"cut, nothing outstanding":                {true, ptr(uint64(0)), 0, 0},
		"no cut, completions of posts not seen":   {false, nil, 0, 3},
		"counters mode cut: no occupancy to give": {true, nil, 0, 0},
	}
	for _, c := range streamtest.Endings {
		t.Run(c.Name, func(t *testing.T) {
			tc := streamtest.Want(t, wants, c.Name)
			s := streamtest.New()
			c.Build(s)
			snap := run(t, s, Options{})
			if got := snap.Cut != nil; got != tc.wantCut {
				t.Fatalf("cut %+v, want one: %v", snap.Cut, tc.wantCut)
			}
			if snap.Total.UnmatchedCQEs != tc.wantUnmatched {
				t.Errorf("total unmatched CQEs %d, want %d", snap.Total.UnmatchedCQEs, tc.wantUnmatched)
			}
			var js struct {
				Cut *struct {
					AtNS    uint64  `json:"at_ns"`
					Unseen  uint64  `json:"posts_in_flight_unseen"`
					Outstdg *uint64 `json:"wrs_outstanding_at_cut"`
				} `json:"cut"`
				Total struct {
					Unmatched *uint64 `json:"unmatched_cqes"`
				} `json:"total"`
			}
			if err := json.Unmarshal(jsonOf(t, snap), &js); err != nil {
				t.Fatal(err)
			}
			if (js.Cut != nil) != tc.wantCut {
				t.Fatalf("JSON cut %+v, want one: %v", js.Cut, tc.wantCut)
			}
			if tc.wantCut {
				if js.Cut.AtNS != snap.Cut.AtNS || js.Cut.AtNS == 0 || js.Cut.Unseen != tc.wantUnseen {
					t.Errorf("JSON cut at %d (snapshot %d), %d unseen; want %d unseen", js.Cut.AtNS, snap.Cut.AtNS, js.Cut.Unseen, tc.wantUnseen)
				}
				switch {
				case (js.Cut.Outstdg == nil) != (tc.wantOut == nil):
					t.Errorf("JSON WRs outstanding at the cut %v, want %v", js.Cut.Outstdg, tc.wantOut)
				case tc.wantOut != nil && *js.Cut.Outstdg != *tc.wantOut:
					t.Errorf("JSON WRs outstanding at the cut %d, want %d", *js.Cut.Outstdg, *tc.wantOut)
				}
			}
			if !snap.Total.CountersOnly && (js.Total.Unmatched == nil || *js.Total.Unmatched != tc.wantUnmatched) {
				t.Errorf("JSON total unmatched_cqes %v, want %d", js.Total.Unmatched, tc.wantUnmatched)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
