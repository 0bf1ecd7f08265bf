package analyzer

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

func TestNearFull(t *testing.T) {
	for _, c := range []struct {
		name string
		q    QP
		want bool
	}{
		{"depth unknown", QP{Outstanding: 100}, false},
		{"empty", QP{Model: Mlx5Model, MaxSendWR: 128}, false},
		{"one below 75%", QP{Model: Mlx5Model, MaxSendWR: 128, Outstanding: 95}, false},
		{"at 75%", QP{Model: Mlx5Model, MaxSendWR: 128, Outstanding: 96}, true},
		{"75% rounded up, below", QP{Model: Mlx5Model, MaxSendWR: 204, Outstanding: 152}, false},
		{"75% rounded up", QP{Model: Mlx5Model, MaxSendWR: 204, Outstanding: 153}, true},
		{"full", QP{Model: Mlx5Model, MaxSendWR: 204, Outstanding: 204}, true},
		{"smallest queue, full", QP{Model: Mlx5Model, MaxSendWR: 2, Outstanding: 2}, true},
		{"smallest queue, one WR", QP{Model: Mlx5Model, MaxSendWR: 2, Outstanding: 1}, false},
		{"never signaled, run at 75%", QP{Model: Mlx5Model, MaxSendWR: 128, Outstanding: 10,
			Counters: Counters{WRs: 96, LongestUnsignaledRun: 96}}, true},
		{"never signaled, run below", QP{Model: Mlx5Model, MaxSendWR: 128, Outstanding: 10,
			Counters: Counters{WRs: 95, LongestUnsignaledRun: 95}}, false},
		{"signaled, long run", QP{Model: Mlx5Model, MaxSendWR: 128, Outstanding: 10,
			Counters: Counters{WRs: 200, Signaled: 1, LongestUnsignaledRun: 120}}, false},
		{"rxe, over its depth", QP{Provider: "rxe", MaxSendWR: 128, Outstanding: 500}, false},
		{"sq_sig_all, long run", QP{Model: Mlx5Model, MaxSendWR: 128, SigAll: true, Outstanding: 10,
			Counters: Counters{WRs: 200, LongestUnsignaledRun: 120}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.q.NearFull(); got != c.want {
				t.Errorf("NearFull() = %v, want %v", got, c.want)
			}
		})
	}
}

// The view turns a QP near full no later than the unsignaled-run
// prediction: posting unsignaled WRs one at a time, NearFull holds from 75%
// of the depth, and the prediction, which needs 7/8 of it before any WR was
// signaled, comes only with it or after it.
func TestNearFullWithPrediction(t *testing.T) {
	for _, depth := range []uint32{4, 16, 128, 204} {
		s := streamtest.New()
		s.Create(1, trace.QPTypeRC, streamtest.RCCaps(depth, 60, 1), false)
		a := New(Options{})
		a.IngestAll(s.Events)
		predictedAt := 0
		for n := 1; n < int(depth); n++ {
			s.Events = s.Events[:0]
			s.Send(1, 1, 0, 0)
			a.IngestAll(s.Events)
			snap := checked(t, a)
			predicted := slices.Contains(diagKinds(snap), "unsignaled_run_near_depth")
			if near := snap.QPs[0].NearFull(); near != (uint64(n) >= nearFullAt(uint64(depth))) || predicted && !near {
				t.Fatalf("depth %d, %d WRs unsignaled: NearFull %v, prediction made %v", depth, n, near, predicted)
			}
			if predicted && predictedAt == 0 {
				predictedAt = n
			}
		}
		want := int(firstRunWarnAt(uint64(depth)))
		if want >= int(depth) {
			want = 0
		}
		if predictedAt != want {
			t.Errorf("depth %d: predicted at %d unsignaled WRs, want %d", depth, predictedAt, want)
		}
	}
}

// counterFields calls f with every counter of c, by name, embedded structs
// included; a field of another kind fails the test, which must then learn it.
func counterFields(t *testing.T, v reflect.Value, f func(name string, v reflect.Value)) {
	t.Helper()
	for i := range v.NumField() {
		fv, name := v.Field(i), v.Type().Field(i).Name
		switch fv.Kind() {
		case reflect.Uint64:
			f(name, fv)
		case reflect.Struct:
			counterFields(t, fv, f)
		case reflect.Array:
			// a count per opcode: each element is a counter
			if fv.Type().Elem().Kind() != reflect.Uint64 {
				t.Fatalf("Counters.%s is an array of %s: teach Sub and this test about it", name, fv.Type().Elem().Kind())
			}
			for j := range fv.Len() {
				f(fmt.Sprintf("%s[%d]", name, j), fv.Index(j))
			}
		default:
			t.Fatalf("Counters.%s is a %s: teach Sub and this test about it", name, fv.Kind())
		}
	}
}

func TestCountersSub(t *testing.T) {
	// every total is taken from a reading of 10 at a baseline of 3, or of
	// 2 (below zero: 0); the peaks stay as they are
	peaks := map[string]bool{"PeakOutstanding": true, "LongestUnsignaledRun": true, "PollRecordWCs": true}
	fill := func(n uint64) Counters {
		var c Counters
		counterFields(t, reflect.ValueOf(&c).Elem(), func(_ string, v reflect.Value) { v.SetUint(n) })
		return c
	}
	for _, c := range []struct {
		name       string
		base       uint64
		total, max uint64
	}{
		{"below the reading", 3, 7, 10},
		{"equal", 10, 0, 10},
		{"above the reading", 12, 0, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := fill(10).Sub(fill(c.base))
			counterFields(t, reflect.ValueOf(got), func(name string, v reflect.Value) {
				want := c.total
				if peaks[name] {
					want = c.max
				}
				if v.Uint() != want {
					t.Errorf("%s = %d, want %d (a total Sub does not subtract?)", name, v.Uint(), want)
				}
			})
		})
	}
}

func TestRatioPercent(t *testing.T) {
	for _, c := range []struct {
		name       string
		a, b       uint64
		ratio, pct float64
	}{
		{"zero over zero", 0, 0, 0, 0},
		{"over zero", 5, 0, 0, 0},
		{"half", 1, 2, 0.5, 50},
		{"whole", 1600, 1600, 1, 100},
		{"more than whole", 800, 50, 16, 1600},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Ratio(c.a, c.b); got != c.ratio {
				t.Errorf("Ratio(%d, %d) = %v, want %v", c.a, c.b, got, c.ratio)
			}
			if got := Percent(c.a, c.b); got != c.pct {
				t.Errorf("Percent(%d, %d) = %v, want %v", c.a, c.b, got, c.pct)
			}
		})
	}
}

func TestDMAReadsSaved(t *testing.T) {
	s := savings(&Counters{WRs: 100, Doorbells: 10, BFWrites: 4, DMAReadsWQE: 6, InlineSGEs: 30, Signaled: 10})
	if s.WQEFetchBatching != 90 || s.WQEFetchBF != 4 || s.PayloadReadsSaved != 30 {
		t.Fatalf("savings %+v", s)
	}
	if got := s.DMAReadsSaved(); got != 124 {
		t.Errorf("DMAReadsSaved() = %d, want 124", got)
	}
}

func TestGrowth(t *testing.T) {
	for _, tc := range []struct{ now, before, want uint64 }{
		{10, 4, 6}, {4, 4, 0}, {4, 10, 0}, {^uint64(0), 0, ^uint64(0)},
	} {
		if got := Growth(tc.now, tc.before); got != tc.want {
			t.Errorf("Growth(%d, %d) = %d, want %d", tc.now, tc.before, got, tc.want)
		}
	}
}
