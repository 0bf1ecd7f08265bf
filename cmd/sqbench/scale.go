package main

import "fmt"

// The figures at 4,096 QPs (the analyzer's and the view's benchmarks, and
// BenchmarkScale and BenchmarkLiveView in cmd/sqscope) and the targets they are held to.
const (
	snapshot4096  = "analyzer snapshot of 4,096 QPs, as the live view takes it (target < 5)"
	tuiCPU4096    = "TUI CPU at 10 Hz, 4,096 QPs, simulated screen (target < 5)"
	topCPU64      = "sqscope replay's live view at 10 Hz in a 200×60 tmux terminal, 64 QPs"
	topCPU4096    = "sqscope replay's live view at 10 Hz in a 200×60 tmux terminal, 4,096 QPs (target < 5)"
	liveView4096  = "sqscope top's live view at 10 Hz in a 200×60 tmux terminal, a live workload of 4,096 QPs posting (its threads' CPU; target < 5)"
	liveProc4096  = "sqscope top at 10 Hz, a live workload of 4,096 QPs posting: the whole process (reading, analysing, the view)"
	topRSS4096    = "sqscope replay's peak resident memory, 4,096 QPs (target < 200)"
	reportRSS4096 = "sqscope report's peak resident memory, 4,096 QPs (target < 200)"

	targetSnapshotMS = 5   // CPU-ms per snapshot of 4,096 QPs
	targetViewCPU    = 5   // % of a core at 10 Hz
	targetRSSMiB     = 200 // MiB resident with 4,096 QPs
)

// scaleVerdicts says whether the figures at 4,096 QPs meet their targets.
func (r *report) scaleVerdicts() []string {
	var out []string
	for _, t := range []struct {
		what, unit string
		target     float64
	}{
		{snapshot4096, "CPU-ms", targetSnapshotMS},
		{tuiCPU4096, "% of a core", targetViewCPU},
		{topCPU4096, "% of a core", targetViewCPU},
		{liveView4096, "% of a core", targetViewCPU},
		{topRSS4096, "MiB", targetRSSMiB},
		{reportRSS4096, "MiB", targetRSSMiB},
	} {
		if s, ok := r.otherFigure(t.what); ok {
			out = append(out, verdict(t.what, s.Med < t.target, fmt.Sprintf("%s %s", fmtNum(s.Med), t.unit)))
		}
	}
	return out
}
