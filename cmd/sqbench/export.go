package main

import "fmt"

// The export figures (BenchmarkExport in cmd/sqscope) and the targets they
// are held to.
const (
	exportRecording    = "30 s demo recording (4 QPs at 16k WR/s, one overflowing from 8 s): size"
	exportPerfettoSize = "Perfetto export: size"
	exportSpeed        = "Perfetto export of decoded events, one core, per CPU-second"
	exportHeapThird    = "Perfetto export: peak live heap, first third of the recording"
	exportHeapWhole    = "Perfetto export: peak live heap, whole recording"

	targetExportSize  = 1.5 // × the recording
	targetExportSpeed = 5e6 // events per second of one core
	targetHeapGrowth  = 1.5 // whole recording against its first third: flat
)

func (r *report) otherFigure(what string) (summary, bool) {
	for _, o := range r.other {
		if o.What == what {
			return o.Value, true
		}
	}
	return summary{}, false
}

// exportVerdicts says whether the export meets its targets.
func (r *report) exportVerdicts() []string {
	var out []string
	if s, ok := r.otherFigure(exportPerfettoSize); ok {
		out = append(out, verdict(fmt.Sprintf("Perfetto export ≤ %.1f× the recording", targetExportSize), s.Med <= targetExportSize,
			fmt.Sprintf("%.2f×", s.Med)))
	}
	if s, ok := r.otherFigure(exportSpeed); ok {
		out = append(out, verdict(fmt.Sprintf("Perfetto export ≥ %s events/s on one core", fmtNum(targetExportSpeed)), s.Med >= targetExportSpeed,
			fmtNum(s.Med)+" events per CPU-second"))
	}
	third, ok1 := r.otherFigure(exportHeapThird)
	whole, ok2 := r.otherFigure(exportHeapWhole)
	if ok1 && ok2 && third.Med > 0 {
		out = append(out, verdict("export memory flat in the recording's size (3× the events, < 1.5× the heap)", whole.Med < targetHeapGrowth*third.Med,
			fmt.Sprintf("%.2f MiB for a third, %.2f MiB for the whole", third.Med, whole.Med)))
	}
	return out
}
