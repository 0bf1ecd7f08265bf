package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The interval of the median is the pair of order statistics the binomial
// distribution gives for 95%, whatever the order of the values.
func TestMedianCI(t *testing.T) {
	for _, c := range []struct {
		name           string
		n              int
		ok             bool
		lo, hi         float64 // of the values 1..n
		coverage       float64
		halfWidthRatio float64
	}{
		{"too few", 5, false, 0, 0, 0, 0},
		{"six: min and max", 6, true, 1, 6, 1 - 2.0/64, 2.5 / 3.5},
		{"seven", 7, true, 1, 7, 1 - 2.0/128, 3.0 / 4},
		{"nine: second and eighth", 9, true, 2, 8, 1 - 2*10.0/512, 3.0 / 5},
		{"twenty: sixth and fifteenth", 20, true, 6, 15, 0.958610, 4.5 / 10.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			xs := make([]float64, c.n)
			for i := range xs {
				xs[i] = float64(i + 1)
			}
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
			before := slices.Clone(xs)
			lo, hi, cov, ok := medianCI(xs)
			if ok != c.ok || lo != c.lo || hi != c.hi || math.Abs(cov-c.coverage) > 1e-6 {
				t.Fatalf("medianCI = %g–%g (%.6f, %v), want %g–%g (%.6f, %v)", lo, hi, cov, ok, c.lo, c.hi, c.coverage, c.ok)
			}
			if !slices.Equal(xs, before) {
				t.Fatal("medianCI reordered its input")
			}
			s := withCI(xs)
			if hw := s.halfWidth(); c.ok && math.Abs(hw-c.halfWidthRatio) > 1e-9 || !c.ok && !math.IsInf(hw, 1) {
				t.Fatalf("half width %g, want %g", hw, c.halfWidthRatio)
			}
		})
	}
}

// Rounds are wanted while a tracer's ratio (the floor's and the untraced
// run's aside) has an interval wider than ±3%.
func TestWide(t *testing.T) {
	run := func(ns float64) wlRun { return wlRun{PostCalls: 1000, CPUSeconds: ns * 1000 / 1e9} }
	rounds := func(ns ...float64) []wlRun {
		var out []wlRun
		for _, v := range ns {
			out = append(out, run(v))
		}
		return out
	}
	floor := rounds(100, 100, 100, 100, 100, 100, 100)
	for _, c := range []struct {
		name string
		runs [][]wlRun
		want []int
	}{
		{"tight", [][]wlRun{rounds(90, 91, 90, 89, 90, 90, 91), floor, rounds(120, 121, 119, 120, 122, 120, 121)}, nil},
		{"one spread", [][]wlRun{rounds(90, 91, 90, 89, 90, 90, 91), floor, rounds(86, 133, 120, 100, 125, 110, 120)}, []int{2}},
		{"the untraced run spread", [][]wlRun{rounds(5, 9, 3, 8, 4, 5, 7), floor, rounds(120, 121, 119, 120, 122, 120, 121)}, nil},
		{"too few rounds", [][]wlRun{rounds(90, 90, 90), floor[:3], rounds(120, 120, 120)}, []int{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := wide(roundRatios(c.runs, 1), 1, 0); !slices.Equal(got, c.want) {
				t.Fatalf("wide = %v, want %v", got, c.want)
			}
		})
	}
}
