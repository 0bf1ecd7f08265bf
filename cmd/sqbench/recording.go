package main

import "fmt"

// The figures of recordings and their targets: bytes per WR of the
// workload's recordings, and a report's rate from a compressed one.
const (
	recordingSize1  = "recording size, post_list 1"
	recordingSize16 = "recording size, post_list 16"
	reportRate1     = "sqscope report of a recording (read and analysed), synthetic workload stream, one core, post_list 1"
	reportRate16    = "sqscope report of a recording (read and analysed), synthetic workload stream, one core, post_list 16"

	targetRecordingSize1  = 8.0  // bytes per WR
	targetRecordingSize16 = 1.5  // bytes per WR
	targetReportRate      = 15e6 // WRs per CPU-second
)

// recordingVerdicts says whether recordings meet their targets.
func (r *report) recordingVerdicts() []string {
	var out []string
	for _, c := range []struct {
		what   string
		target float64
	}{{recordingSize1, targetRecordingSize1}, {recordingSize16, targetRecordingSize16}} {
		if s, ok := r.otherFigure(c.what); ok {
			out = append(out, verdict(fmt.Sprintf("%s ≤ %.1f bytes/WR", c.what, c.target), s.Med <= c.target, fmtNum(s.Med)+" bytes/WR"))
		}
	}
	for _, what := range []string{reportRate1, reportRate16} {
		if s, ok := r.otherFigure(what); ok {
			out = append(out, verdict(fmt.Sprintf("%s ≥ %s WR/s", what, fmtNum(targetReportRate)), s.Med >= targetReportRate,
				fmtNum(s.Med)+" WRs per CPU-second"))
		}
	}
	return out
}
