package diff

import (
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

// checkAbsent holds a Figures to its rule: a figure is nil exactly when
// Absent says why.
func checkAbsent(t *testing.T, what string, f *Figures) {
	t.Helper()
	for key, given := range map[string]bool{
		"wrs_per_doorbell":  f.WRsPerDoorbell != nil,
		"inline_pct":        f.InlinePct != nil,
		"signaled_pct":      f.SignaledPct != nil,
		"pcie_bytes_per_wr": f.PCIeBytesPerWR != nil,
		"peak_outstanding":  f.Peak != nil,
		"depth":             f.Depth != nil,
	} {
		if why := f.Absent[key]; given == (why != "") {
			t.Errorf("%s: %s given %v, absent because %q", what, key, given, why)
		}
	}
	if len(f.Absent) > 6 {
		t.Errorf("%s: absent %v names more than the figures", what, f.Absent)
	}
}

func checkReport(t *testing.T, rep *Report) {
	t.Helper()
	for _, q := range rep.QPs {
		for _, s := range []*QPSide{q.Before, q.After} {
			if s != nil {
				checkAbsent(t, q.Match, &s.Figures)
			}
		}
	}
	checkAbsent(t, "total before", &rep.Total.Before)
	checkAbsent(t, "total after", &rep.Total.After)
}

// sideOf is a recording of the events s made, as Load reads one.
func sideOf(s *streamtest.Stream) *Side {
	a := analyzer.New(analyzer.Options{BF: analyzer.DefaultBF})
	a.IngestAll(s.Events)
	return &Side{File: "test.sqscope", Snap: a.Snapshot()}
}

// Each figure a QP's mode, model or traffic does not give is absent with
// the reason, never 0.
func TestAbsentWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(s *streamtest.Stream)
		want map[string]string // key: a word of the reason
	}{
		{"counters mode", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 0, 1), false)
			s.Counters(1, trace.QPCounters{PostCalls: 4, WRs: 8, Doorbells: 4, Signaled: 2})
		}, map[string]string{"pcie_bytes_per_wr": "counters mode", "peak_outstanding": "counters mode", "depth": "counters mode"}},
		{"no HCA model", func(s *streamtest.Stream) {
			s.CreateOn(1, streamtest.RCCaps(16, 60, 1), "/usr/lib/libibverbs/libvendor-rdmav34.so")
			s.Send(1, 4, 0, 4)
			s.Poll(1, 3)
		}, map[string]string{"pcie_bytes_per_wr": "no HCA model applies"}},
		{"completions not traced", func(s *streamtest.Stream) {
			s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: "/lib/libmlx5.so.1", How: "explicit"})
			s.IDs[0x1c0] = 100
			s.Send(0x1c0, 4, 0, 4)
		}, map[string]string{"peak_outstanding": "no poll function", "depth": "no poll function"}},
		{"no WR", func(s *streamtest.Stream) {
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
		}, map[string]string{"wrs_per_doorbell": "no doorbell", "inline_pct": "no WR", "signaled_pct": "no WR", "pcie_bytes_per_wr": "no WR"}},
		{"no QP", func(s *streamtest.Stream) {
			s.Add(&trace.Proc{Header: s.Header(), Comm: "idle"})
		}, map[string]string{"wrs_per_doorbell": "no QP", "inline_pct": "no WR", "pcie_bytes_per_wr": "no QP", "peak_outstanding": "no QP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			tc.make(s)
			side := sideOf(s)
			rep := Compare(side, side, ByProcess)
			checkReport(t, rep)
			figs := []*Figures{&rep.Total.Before}
			if len(rep.QPs) > 0 {
				figs = append(figs, &rep.QPs[0].Before.Figures)
			}
			for _, f := range figs {
				for key, word := range tc.want {
					if !strings.Contains(f.Absent[key], word) {
						t.Errorf("%s absent because %q, want a reason with %q (all: %v)", key, f.Absent[key], word, f.Absent)
					}
				}
			}
		})
	}
}
