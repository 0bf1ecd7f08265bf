package analyzer

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Each diagnosis of the send queue, from a stream that gives it.
func TestDiagnoses(t *testing.T) { checkDiagnoses(t, streamtest.Diagnoses) }

func TestDiagnosisEvidence(t *testing.T) {
	tests := []struct {
		name  string
		build func(s *streamtest.Stream)
		kind  string
		count uint64
		want  map[string]uint64
	}{
		{"never signaled counts each refused post", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(4, 60, 1), false)
			s.Send(1, 4, 0, 0)
			for range 3 {
				s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 0), ibv.ENOMEM, 0)
			}
		}, "sq_overflow_never_signaled", 3, map[string]uint64{"outstanding": 4, "max_send_wr": 4, "wrs_posted": 4}},
		{"not polled since the early poll", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(8, 60, 1), false)
			s.Send(1, 4, 0, 4) // t=1200
			s.Poll(1, 3)       // t=1300
			s.Send(1, 4, 0, 4) // t=1400
			s.Send(1, 4, 0, 4)
			s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 4), ibv.ENOMEM, 0)
		}, "sq_overflow_cq_not_polled", 1, map[string]uint64{"outstanding": 8, "max_send_wr": 8, "signaled_outstanding": 2,
			"oldest_signaled_ns": 1400, "cq": 0x2001, "cq_last_poll_ns": 1300, "cq_polls": 1}},
		{"partial list fills the SQ", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(4, 60, 1), false)
			s.Send(1, 2, 0, 0)
			s.Post(1, s.WRs(1, 3, ibv.WRSend, 0, 1, 32, 0), ibv.ENOMEM, 2)
		}, "sq_overflow_never_signaled", 1, map[string]uint64{"outstanding": 4, "max_send_wr": 4, "wrs_posted": 4}},
		{"too many SGEs at list index 1", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
			s.Post(1, []trace.WR{{ID: 0, Opcode: ibv.WRSend, NumSGE: 1, Bytes: 8}, {ID: 1, Opcode: ibv.WRSend, NumSGE: 4, Bytes: 8}}, ibv.ENOMEM, 1)
		}, "too_many_sge", 1, map[string]uint64{"wr_index": 1, "num_sge": 4, "max_send_sge": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.build(s)
			snap := run(t, s, Options{BF: DefaultBF})
			checkEvidence(t, snap, tc.kind, tc.count, tc.want)
		})
	}
}

func TestDiagnosesBounded(t *testing.T) {
	s := streamtest.New()
	n := MaxDiagnoses + 10
	for i := range uint32(n) {
		s.Create(i+1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
		s.Post(i+1, s.WRs(i+1, 1, 9, 0, 1, 32, 1), ibv.EINVAL, 0)
	}
	var calls int
	a := New(Options{OnDiagnosis: func(Diagnosis) { calls++ }})
	a.IngestAll(s.Events)
	snap := checked(t, a)
	if len(snap.Diagnoses) != MaxDiagnoses || snap.DiagnosesDropped != 10 || calls != MaxDiagnoses {
		t.Fatalf("kept %d, dropped %d, callbacks %d; want %d, 10, %d", len(snap.Diagnoses), snap.DiagnosesDropped, calls, MaxDiagnoses, MaxDiagnoses)
	}
}

// A diagnosis says when it was first and last seen and how often: as
// seconds into the trace (its words never give the raw monotonic clock),
// in JSON also on the wall clock when the trace has an anchor for it.
func TestDiagnosisTimes(t *testing.T) {
	wall := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	build := func() *streamtest.Stream {
		s := streamtest.New()
		s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
		s.Wait(1_500_000_000)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 3, 96, 1), ibv.ENOMEM, 0) // too many SGEs
		s.Wait(250_000_000)
		s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 3, 96, 1), ibv.ENOMEM, 0)
		return s
	}
	// the stream's first event is at 1100 ns (+100 ns a record): the posts
	// at 1,500,001,200 and 1,750,001,300 ns
	tests := []struct {
		name                string
		clock               trace.WallAnchor
		firstWall, lastWall string
	}{
		{"anchored", trace.WallAnchor{Wall: wall, MonoNS: 1_000_001_200},
			"2026-12-01T04:00:00.5Z", "2026-12-01T04:00:00.7500001Z"},
		{"no anchor", trace.WallAnchor{}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := run(t, build(), Options{BF: DefaultBF, Clock: tc.clock})
			if len(snap.Diagnoses) != 1 {
				t.Fatalf("diagnoses %q, want one", diagKinds(snap))
			}
			d := snap.Diagnoses[0]
			start := snap.FirstNS
			if d.Count != 2 || d.FirstNS-start != 1_500_000_100 || d.LastNS-start != 1_750_000_200 {
				t.Errorf("count %d, first %d, last %d ns into the trace; want 2, 1500000100, 1750000200",
					d.Count, d.FirstNS-start, d.LastNS-start)
			}
			if d.FirstS != 1.5000001 || d.LastS != 1.7500002 {
				t.Errorf("first_s %v, last_s %v; want 1.5000001, 1.7500002", d.FirstS, d.LastS)
			}
			if d.FirstWall != tc.firstWall || d.LastWall != tc.lastWall {
				t.Errorf("wall times %q, %q; want %q, %q", d.FirstWall, d.LastWall, tc.firstWall, tc.lastWall)
			}
			words := d.Message + "\n" + d.Fix
			if m := regexp.MustCompile(`\d{4,} ns`).FindString(words); m != "" {
				t.Errorf("the diagnosis gives a raw clock reading %q:\n%s", m, words)
			}
			js, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if has := strings.Contains(string(js), `"first_wall"`); has != (tc.firstWall != "") {
				t.Errorf("JSON has first_wall %v, want %v: %s", has, tc.firstWall != "", js)
			}
		})
	}
}

func TestRelTime(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{
		{0, "+0.000000000 s"}, {0.0000005, "+0.000000500 s"}, {0.0123456, "+0.012346 s"},
		{1.2344, "+1.234 s"}, {818.920370454, "+818.920 s"},
	} {
		if got := RelTime(tc.s); got != tc.want {
			t.Errorf("RelTime(%v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
