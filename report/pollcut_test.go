package report

import (
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/analyzer/streamtest"
)

// Completions past what a poll record holds are said per CQ and in all,
// and every figure they would have changed says it is a bound: the
// receive side's consumed count (at least), its outstanding receives and
// the sender's occupancy (at most).
func TestPollCutsText(t *testing.T) {
	snap := analyzertest.Run(t, analyzer.Options{}, streamtest.LazyPolls())
	out := text(t, snap)
	checkText(t, out, []string{
		"  cut by the tracer's bounds, in all: 255 completions past the 32 a poll record holds: not attributed to a QP (each CQ's are on its line)\n",
		"  receives: 447 posted in 7 post_recv calls, at least 192 consumed by receive CQEs (its recv CQ returned 191 completions past the poll record bound, not attributed to a QP); outstanding now <= 255, peak <= 447 of max_recv_wr 512",
		"polls 6 (empty 0), CQEs 383 (receive >= 192)\n  191 completions past the 32 a poll record holds: not attributed to a QP (in its CQEs, not told send from receive)\n",
		"  CQEs polled >= 64, outstanding now <= 0, peak <= 96 (upper bounds:",
		"occupancy: peak <= 96 (75%) of 128",
		"  cut by the tracer's bounds: its send CQ's 64 completions past the 32 a poll record holds: not attributed to a QP\n",
	}, nil)
	golden(t, "report_poll_cuts.txt.golden", []byte(out))
}

// The poll record's bound alone, as an interval's counters keep it when
// no completion of the interval was past it, is no cut to say.
func TestPollCutsBoundAlone(t *testing.T) {
	if s := Cuts(analyzer.Cuts{PollRecordWCs: 32}); s != "" {
		t.Errorf("Cuts of the bound alone: %q, want nothing", s)
	}
	if s := PollCuts(analyzer.Cuts{PollRecordWCs: 32}); s != "" {
		t.Errorf("PollCuts of the bound alone: %q, want nothing", s)
	}
}
