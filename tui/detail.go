package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/rivo/tview"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/report"
)

var sparkLevels = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws v (scaled to max) in width cells, each the maximum of its
// share of the samples.
func Sparkline(v []uint64, maxV uint64, width int) string {
	if width <= 0 || len(v) == 0 {
		return ""
	}
	if maxV == 0 {
		for _, x := range v {
			maxV = max(maxV, x)
		}
		if maxV == 0 {
			maxV = 1
		}
	}
	cols := min(width, len(v))
	var b strings.Builder
	for c := 0; c < cols; c++ {
		lo, hi := c*len(v)/cols, (c+1)*len(v)/cols
		var m uint64
		for _, x := range v[lo:hi] {
			m = max(m, x)
		}
		lvl := int(m * uint64(len(sparkLevels)-1) / maxV)
		b.WriteRune(sparkLevels[min(lvl, len(sparkLevels)-1)])
	}
	return b.String()
}

func (u *UI) selectedRow() (row, bool) {
	for _, r := range u.rows {
		if u.hasSel && r.key == u.selected {
			return r, true
		}
	}
	return row{}, false
}

func (u *UI) renderDetail() {
	r, ok := u.selectedRow()
	if !ok {
		u.setText(u.detail, "no QP selected")
		return
	}
	q := r.qp
	_, _, w, _ := u.detail.GetInnerRect()
	if w <= 0 {
		w = 60
	}
	var b strings.Builder
	who := fmt.Sprint(q.PID)
	if q.Comm != "" {
		who += " (" + tview.Escape(q.Comm) + ")"
	}
	fmt.Fprintf(&b, "[::b]QP %#x (%d)[::-] pid %s %s  depth %d  max_inline %d  max_sge %d", q.QPNum, q.QPNum, who, q.Type, q.MaxSendWR, q.MaxInline, q.MaxSendSGE)
	if q.SigAll {
		b.WriteString("  sq_sig_all")
	}
	if q.CapsInferred {
		b.WriteString("  [orange]caps inferred[-]")
	} else if !q.CapsKnown {
		b.WriteString("  [orange]caps unknown (attached late)[-]")
	}
	if q.CountersOnly {
		writeCountersDetail(&b, &r)
	} else {
		if q.Sentinel {
			b.WriteString("\n[gray]" + tview.Escape(SentinelNote(q)) + "[-]")
		}
		u.writeEventsDetail(&b, &r, w)
	}
	if cut := report.Cuts(r.c.Cuts); cut != "" {
		b.WriteString("\n[orange]" + cut + "[-]")
	}
	u.setText(u.detail, b.String())
}

// writeEventsDetail writes what the per-call events of a QP show.
func (u *UI) writeEventsDetail(b *strings.Builder, r *row, w int) {
	q := r.qp
	// scaled to the QP's own peak, so that normal occupancy is not a flat
	// line at the bottom of a deep queue; the title gives the depth
	hist := make([]uint64, len(q.History))
	var peak uint64
	for i, h := range q.History {
		hist[i] = uint64(h.Max)
		peak = max(peak, hist[i])
	}
	fmt.Fprintf(b, "\noccupancy, last %s (top of the scale %d, depth %d):\n", historySpan(q, u.snap.HistoryStepNS), max(peak, 1), q.MaxSendWR)
	b.WriteString("[green]" + Sparkline(hist, max(peak, 1), w) + "[-]\n")
	if p := q.PCIe; q.Model != "" {
		fmt.Fprintf(b, "saved vs one WR per call, not inline, all signaled (%.1f%% of PCIe transactions, %s):\n", p.TransactionsPct, q.Model)
		fmt.Fprintf(b, "  doorbells %d (batching)   WQE fetches %d (batching) + %d (BlueFlame)\n", p.DoorbellsSaved, p.WQEFetchBatching, p.WQEFetchBF)
		fmt.Fprintf(b, "  payload reads %d (inline)   CQE writes %d (unsignaled)   ~%d B\n", p.PayloadReadsSaved, p.CQEWritesSaved, p.BytesSaved)
	} else {
		noModel(b, q)
	}
	fmt.Fprintf(b, "signal pattern: %s, longest unsignaled run %d of depth %d\n", signalPattern(r), q.LongestUnsignaledRun, q.MaxSendWR)
	least := map[bool]string{true: ">="}[q.OutstandingUpperBound] // completions past the poll record bound: not all attributed
	fmt.Fprintf(b, "WRs %d  posts %d  inline %d  CQEs polled %s%d  polls %d (empty %d)", r.c.WRs, r.c.PostCalls, r.c.Inline, least, r.c.CQEsPolled, r.c.Polls, r.c.EmptyPolls)
}

// SentinelNote says once, where a sentinel-mode QP is shown, what its
// figures are of.
func SentinelNote(q *analyzer.QP) string {
	n := "sentinel mode: the counts and rates below are of the sample and escalation windows, which the probes slow; refusals are all counted"
	switch {
	case q.OutstandingRead():
		n += "; outstanding is the last read of its counters in the process's memory"
	case q.OutstandingSampledNS != 0:
		n += "; outstanding is what the last window measured when it closed"
	}
	if m := q.Memory; m != nil && m.WRPerS > 0 {
		n += fmt.Sprintf("; read from memory, with no trap: %.0f WR/s, every WR traced or not", m.WRPerS)
	}
	return n
}

// noModel says why a QP has no PCIe figures: its provider is not mlx5's.
func noModel(b *strings.Builder, q *analyzer.QP) {
	fmt.Fprintf(b, "provider %s: no PCIe figures (the mlx5 model does not apply)\n", q.Provider)
}

// writeCountersDetail writes what the kernel's totals of a QP measure, and
// once why the rest is not shown.
func writeCountersDetail(b *strings.Builder, r *row) {
	p := r.qp.PCIe
	fmt.Fprintf(b, "\n[gray]%s[-]\n", tview.Escape(r.qp.CountersNote()))
	if r.qp.Model != "" {
		fmt.Fprintf(b, "saved vs one WR per call, all signaled: doorbells %d   CQE writes %d (unsignaled)\n", p.DoorbellsSaved, p.CQEWritesSaved)
	} else {
		noModel(b, r.qp)
	}
	fmt.Fprintf(b, "signal pattern: %s\n", signalPattern(r))
	if q := r.qp; q.KernelSQ {
		bound := map[bool]string{true: ">= "}[q.OutstandingLowerBound]
		fmt.Fprintf(b, "send queue: outstanding %s%d  peak %s%d  longest unsignaled run %d  send CQEs %d\n",
			bound, q.Outstanding, bound, q.PeakOutstanding, q.LongestUnsignaledRun, q.CQEsPolled)
	}
	fmt.Fprintf(b, "WRs %d  posts %d  inline %d  polls %d (empty %d) of the send CQ", r.c.WRs, r.c.PostCalls, r.c.Inline, r.c.Polls, r.c.EmptyPolls)
}

func signalPattern(r *row) string {
	if r.c.Signaled > 0 {
		return fmt.Sprintf("1 in %.1f WRs signaled", analyzer.Ratio(r.c.WRs, r.c.Signaled))
	}
	return "never signaled"
}

// historySpan is how much trace time the history covers.
func historySpan(q *analyzer.QP, step uint64) time.Duration {
	return time.Duration(uint64(len(q.History)) * step).Round(time.Second)
}
