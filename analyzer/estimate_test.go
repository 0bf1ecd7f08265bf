package analyzer

import (
	"math"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The shares of the WRs the sample windows saw are estimates of the
// run's: the WRs between windows (the edge's, escalations') are not
// samples; one window gives no interval, more give the ratio
// estimator's from the spread between them.
func TestSampledShares(t *testing.T) {
	const qpn = 0x1c0
	s := streamtest.New()
	s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", How: trace.HowErrorSite})
	s.MemQP(qpn, ibv.QPSRTS)
	s.IDs[qpn] = 1000
	// 8 WRs: 4 inline, 2 signaled (every 4th)
	sampleWindow(s, func() {
		s.Send(qpn, 4, ibv.SendInline, 4)
		s.Send(qpn, 4, 0, 4)
	})
	snap := run(t, s, Options{BF: DefaultBF})
	sh := snap.Sentinel.Sampling.Shares
	if sh == nil || sh.Windows != 1 || sh.WRs != 8 || sh.Inline.Pct != 50 || sh.Signaled.Pct != 25 ||
		sh.Inline.Low != nil || sh.NoInterval == "" {
		t.Fatalf("one window: shares %+v; want 8 WRs, 50%% inline, 25%% signaled, no interval and why", sh)
	}
	// posted between windows: no sample
	s.Wait(1_000_000)
	s.Send(qpn, 16, ibv.SendInline, 0)
	// a second window of 4 WRs, none inline, 1 signaled
	sampleWindow(s, func() { s.Send(qpn, 4, 0, 4) })
	snap = run(t, s, Options{BF: DefaultBF})
	sh = snap.Sentinel.Sampling.Shares
	if sh == nil || sh.Windows != 2 || sh.WRs != 12 || sh.NoInterval != "" || sh.Inline.Low == nil || sh.Signaled.Low == nil {
		t.Fatalf("two windows: shares %+v; want 12 WRs and intervals", sh)
	}
	// inline: 4 of 12; clusters (4 of 8) and (0 of 4): ratio 1/3,
	// residuals 4-8/3 and 0-4/3, their squares 16/9+16/9 = 32/9, over
	// 1 df and 2 clusters: variance 16/9, its root 4/3 over the mean
	// cluster of 6 WRs: 2/9; t(1) 12.706
	wantHalf := 12.706 * 2.0 / 9
	if math.Abs(sh.Inline.Pct-100.0/3) > 1e-9 || math.Abs(*sh.Inline.Low-0) > 1e-9 ||
		math.Abs(*sh.Inline.High-100*min(1, 1.0/3+wantHalf)) > 1e-9 {
		t.Errorf("inline %+v (low %v high %v): want 33.3%% and [0, %.1f]", sh.Inline, *sh.Inline.Low, *sh.Inline.High, 100*min(1, 1.0/3+wantHalf))
	}
	// signaled: 2 of 8 and 1 of 4, the same share: no spread
	if sh.Signaled.Pct != 25 || *sh.Signaled.Low != 25 || *sh.Signaled.High != 25 {
		t.Errorf("signaled %+v (low %v high %v): want 25%% exactly", sh.Signaled, *sh.Signaled.Low, *sh.Signaled.High)
	}
}

// Student's t quantiles: the table's ends and the normal's past it.
func TestTQuantile(t *testing.T) {
	for _, c := range []struct {
		df   uint64
		want float64
	}{{1, 12.706}, {30, 2.042}, {31, 1.960}, {1000, 1.960}} {
		if got := tQuantile975(c.df); got != c.want {
			t.Errorf("t(%d) = %v, want %v", c.df, got, c.want)
		}
	}
}
