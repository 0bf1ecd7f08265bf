package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// overflowCycles is QP 1 (depth 16) filling its send queue one signaled
// WR per 1,000 ns window, then refused posts (ENOMEM), one a window, then
// every completion polled: 16+refused windows a cycle.
func overflowCycles(cycles, refused int) []trace.Event {
	s := streamtest.New()
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
	for range cycles {
		var ids []uint64
		for range 16 {
			ids = append(ids, s.IDs[1])
			s.Send(1, 1, ibv.SendSignaled, 0)
			s.Wait(900)
		}
		for range refused {
			s.Post(1, s.WRs(1, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
			s.Wait(900)
		}
		s.Poll(1, ids...)
		s.Wait(700)
	}
	return s.Events
}

// A live trace's series is its analyzer's histories, joined k windows to
// a bucket so that no QP has more than Buckets: each bucket is the band
// of its windows and their WRs, its failed posts those of its windows;
// the failed posts of windows no history keeps are dropped as they come,
// and a history that lost its oldest windows is said.
func TestLiveSeries(t *testing.T) {
	const step, windows = 1000, 1000
	for _, tc := range []struct {
		name    string
		cycles  int
		refused int
		k       uint64
		full    bool
	}{
		{"within the history", 20, 1, 1, false},
		// 2,400 windows with failed posts, 1,000 windows kept in 512 buckets
		{"longer than the history", 800, 3, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := withBF
			opts.HistoryStepNS, opts.HistoryLen = step, windows
			a := analyzer.New(opts)
			s := NewLiveSeries(a)
			most := 0
			evs := overflowCycles(tc.cycles, tc.refused)
			for _, ev := range evs {
				a.Ingest(ev)
				s.Event(ev)
				for _, m := range s.fails {
					most = max(most, len(m))
				}
			}
			if most > 2*windows || tc.full && most < windows {
				t.Errorf("%d windows of failed posts kept for a QP, more than twice the %d a history holds", most, windows)
			}
			snap := a.Snapshot()
			q := &snap.QPs[0]
			raw, rawStart := q.History, q.HistoryStartNS
			if full := len(raw) == windows; full != tc.full {
				t.Fatalf("history of %d windows: full %v, want %v", len(raw), full, tc.full)
			}
			s.TakeLive(snap)
			if s.StepNS != tc.k*step {
				t.Fatalf("buckets of %d ns, want %d", s.StepNS, tc.k*step)
			}
			got, start := s.of(q)
			if len(got) > Buckets(1) || start != rawStart/s.StepNS*s.StepNS {
				t.Fatalf("%d buckets from %d ns; want at most %d, from the bucket of %d", len(got), start, Buckets(1), rawStart)
			}
			// each bucket against the windows it joins
			want := map[uint64]*analyzer.OccSample{}
			for i, smp := range raw {
				b := (rawStart/step + uint64(i)) / tc.k
				if w := want[b]; w != nil {
					w.Max, w.Min, w.WRs, w.CQEs, w.End = max(w.Max, smp.Max), min(w.Min, smp.Min), w.WRs+smp.WRs, w.CQEs+smp.CQEs, smp.End
				} else {
					c := smp
					want[b] = &c
				}
			}
			if len(want) != len(got) {
				t.Fatalf("%d buckets, want %d", len(got), len(want))
			}
			top := uint32(0)
			for i, smp := range got {
				if w := want[start/s.StepNS+uint64(i)]; w == nil || smp != *w {
					t.Fatalf("bucket %d is %+v, want %+v", i, smp, w)
				}
				top = max(top, smp.Max)
			}
			if top != 16 {
				t.Errorf("the series peaks at %d, want the depth 16", top)
			}
			// the failed posts of the windows kept, in their buckets
			var wantFails, gotFails uint64
			for _, ev := range evs {
				if p, ok := ev.(*trace.Post); ok && p.Ret != 0 && p.TimeNS/step >= rawStart/step {
					wantFails++
				}
			}
			for _, f := range s.failsOf(q, start, len(got)) {
				gotFails += f[1]
			}
			if gotFails != wantFails || wantFails == 0 {
				t.Errorf("%d failed posts marked, want %d", gotFails, wantFails)
			}
			if said := strings.Contains(s.Note, "1 QP(s) whose history is full"); said != tc.full {
				t.Errorf("note %q: says a history is full %v, want %v", s.Note, said, tc.full)
			}

			var b bytes.Buffer
			if err := WriteHTML(&b, Page{Title: "trace", Header: "live trace:", Snap: snap, Series: s}); err != nil {
				t.Fatal(err)
			}
			p := checkPage(t, snap, b.Bytes())
			if p.data.StepS != float64(s.StepNS)/1e9 || p.data.QPs[0].Occ == nil || p.data.QPs[0].Occ.N != len(got) {
				t.Errorf("page: step %g s, series %+v", p.data.StepS, p.data.QPs[0].Occ)
			}
			if tc.full && !strings.Contains(p.Text, "record the run and report --html the recording") {
				t.Error("the page does not say the plot starts after the run's start")
			}
		})
	}
}
