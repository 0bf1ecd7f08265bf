package main

import (
	"fmt"
	"math"
	"sort"
)

// The overhead ratios are reported as the median of the rounds with a
// distribution-free confidence interval of the median: the order
// statistics x(l) and x(n-l+1), l the largest with P(B <= l-1) <= (1-ciLevel)/2
// for B ~ Binomial(n, 1/2) (each round falls below the true median with
// probability 1/2, whatever the distribution). Rounds are added until every
// tracer's interval is within ±ciTarget of its median, up to -max-runs.
const (
	ciLevel  = 0.95
	ciTarget = 0.03
)

// medianCI is the interval of the median of xs at ciLevel and the
// coverage it has (at least ciLevel; the order statistics give only some
// levels); ok is false when there are too few values for ciLevel (fewer
// than 6).
func medianCI(xs []float64) (lo, hi, coverage float64, ok bool) {
	n := len(xs)
	if n == 0 {
		return 0, 0, 0, false
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	alpha := (1 - ciLevel) / 2
	p := math.Pow(0.5, float64(n)) // P(B = 0)
	cum, l := 0.0, 0
	for k := 0; k < n/2; k++ { // try l = k+1: P(B <= k)
		cum += p
		if cum > alpha {
			break
		}
		l = k + 1
		p *= float64(n-k) / float64(k+1)
	}
	if l == 0 {
		return 0, 0, 0, false
	}
	tail := binomTail(n, l-1)
	return s[l-1], s[n-l], 1 - 2*tail, true
}

// binomTail is P(B <= k) for B ~ Binomial(n, 1/2).
func binomTail(n, k int) float64 {
	p, cum := math.Pow(0.5, float64(n)), 0.0
	for i := 0; i <= k; i++ {
		cum += p
		p *= float64(n-i) / float64(i+1)
	}
	return cum
}

// withCI is a summary with its median's confidence interval.
func withCI(xs []float64) summary {
	s := summarize(xs)
	s.CILo, s.CIHi, s.CICoverage, s.HasCI = medianCI(xs)
	return s
}

// halfWidth is the interval's larger side over the median: ±3% is 0.03.
// It is +Inf when there is no interval yet.
func (s summary) halfWidth() float64 {
	if !s.HasCI || s.Med == 0 {
		return math.Inf(1)
	}
	return max(s.Med-s.CILo, s.CIHi-s.Med) / math.Abs(s.Med)
}

// fmtCI is the interval of a ratio's median, its half-width and rounds.
func fmtCI(s summary) string {
	if !s.HasCI {
		return fmt.Sprintf("none (%d rounds; %.0f%% needs 6)", s.N, 100*ciLevel)
	}
	return fmt.Sprintf("%.3f–%.3f (±%.1f%%, %d rounds)", s.CILo, s.CIHi, 100*s.halfWidth(), s.N)
}

// roundRatios are each variant's ratio to the floor (variant floorIdx),
// round by round.
func roundRatios(runs [][]wlRun, floorIdx int) [][]float64 {
	out := make([][]float64, len(runs))
	for i := range runs {
		for k, w := range runs[i] {
			if k < len(runs[floorIdx]) {
				out[i] = append(out[i], w.nsPerCall()/runs[floorIdx][k].nsPerCall())
			}
		}
	}
	return out
}

// wide lists the tracers whose ratio's interval is wider than ±ciTarget:
// every variant but the floor and the untraced run, whose ratio, a
// twentieth of the floor's time, is no overhead (±3% of it is a few ns).
func wide(ratios [][]float64, floorIdx, untracedIdx int) []int {
	var out []int
	for i, xs := range ratios {
		if i != floorIdx && i != untracedIdx && withCI(xs).halfWidth() > ciTarget {
			out = append(out, i)
		}
	}
	return out
}
