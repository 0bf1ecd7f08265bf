package advise

import "fmt"

// ModelError is the largest error of the predictions against the simulated
// HCA's ground truth, measured by running each advised setting.
type ModelError struct {
	// CountsPct: doorbells, BlueFlame writes, DMA reads, CQE writes and
	// peak outstanding.
	CountsPct float64 `json:"counts_max_pct"`
	// RatePct: WR/s.
	RatePct float64 `json:"wrs_per_s_max_pct"`
	Where   string  `json:"measured_by"`
}

func (e ModelError) String() string {
	return fmt.Sprintf("counts within %.1f%%, WR/s within %.1f%%", e.CountsPct, e.RatePct)
}

// MeasuredError is what TestAdviceHoldsOnTheSimulator measured (see
// BENCHMARKS.md); the test fails when a run errs by more.
var MeasuredError = ModelError{CountsPct: 5, RatePct: 15, Where: "TestAdviceHoldsOnTheSimulator, BENCHMARKS.md"}
