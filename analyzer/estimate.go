package analyzer

import "math"

// Estimates from the sentinel's sample windows: between windows nothing
// is traced, so the share of the WRs that were inline or signaled over
// the whole run is estimated from the WRs the windows saw. Each window
// of a process is one cluster of WRs (the WRs of one window are not
// independent draws: an application's pattern repeats within it), and
// the share is a ratio estimator over the clusters, its 95% interval
// from the spread between them (Student's t, n-1 degrees of freedom).
// Running sums keep it in constant memory however long the trace.

// SampledShares are the shares of the WRs the sample windows saw, as
// estimates of the traced processes' over the run.
type SampledShares struct {
	// Windows counts the windows (one per process each) that saw a WR,
	// WRs the WRs they saw.
	Windows  uint64   `json:"windows"`
	WRs      uint64   `json:"wrs"`
	Inline   Estimate `json:"inline_pct"`
	Signaled Estimate `json:"signaled_pct"`
	// NoInterval says why the estimates have no interval: fewer than two
	// windows saw WRs.
	NoInterval string `json:"no_interval,omitempty"`
}

// Estimate is a percentage estimated from samples, with its 95%
// confidence interval when the samples give one.
type Estimate struct {
	Pct  float64  `json:"value"`
	Low  *float64 `json:"ci95_low,omitempty"`
	High *float64 `json:"ci95_high,omitempty"`
}

// ratioSums are the running sums of one share's clusters: x of n WRs in
// each.
type ratioSums struct {
	x, xx, xn float64
}

// shareSums are the sums of the windows that saw WRs.
type shareSums struct {
	windows          uint64
	n, nn            float64
	inline, signaled ratioSums
	wrs              uint64
}

// add takes one window's WRs, inline and signaled among them.
func (s *shareSums) add(wrs, inline, signaled uint64) {
	if wrs == 0 {
		return // nothing of the shares: an idle window says nothing of them
	}
	n := float64(wrs)
	s.windows++
	s.wrs += wrs
	s.n += n
	s.nn += n * n
	for _, p := range []struct {
		r *ratioSums
		x float64
	}{{&s.inline, float64(inline)}, {&s.signaled, float64(signaled)}} {
		p.r.x += p.x
		p.r.xx += p.x * p.x
		p.r.xn += p.x * n
	}
}

// shares are the estimates so far; nil before a window saw a WR.
func (s *shareSums) shares() *SampledShares {
	if s.windows == 0 || s.n == 0 {
		return nil
	}
	out := &SampledShares{Windows: s.windows, WRs: s.wrs}
	if s.windows < 2 {
		out.NoInterval = "one window saw WRs: an interval needs two"
	}
	out.Inline = s.estimate(s.inline)
	out.Signaled = s.estimate(s.signaled)
	return out
}

// estimate is the ratio estimator of one share and its interval.
func (s *shareSums) estimate(r ratioSums) Estimate {
	k := float64(s.windows)
	ratio := r.x / s.n
	e := Estimate{Pct: 100 * ratio}
	if s.windows < 2 {
		return e
	}
	// sum of (x_i - ratio*n_i)^2, from the running sums
	ss := max(0, r.xx-2*ratio*r.xn+ratio*ratio*s.nn)
	meanN := s.n / k
	se := math.Sqrt(ss/(k-1)/k) / meanN
	half := tQuantile975(s.windows-1) * se
	lo, hi := 100*max(0, ratio-half), 100*min(1, ratio+half)
	e.Low, e.High = &lo, &hi
	return e
}

// tQuantile975 is Student's t distribution's 97.5% quantile with df
// degrees of freedom (the normal's past 30).
func tQuantile975(df uint64) float64 {
	t := [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df >= 1 && df <= uint64(len(t)) {
		return t[df-1]
	}
	return 1.960
}
