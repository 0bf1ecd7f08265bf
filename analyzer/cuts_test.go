package analyzer

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

// Values of <infiniband/verbs.h> and errno the cuts tests use.
const (
	opSend    = 2  // IBV_WR_SEND
	retENOMEM = 12 // ENOMEM
)

func TestCuts(t *testing.T) {
	caps := streamtest.RCCaps(4096, 0, 30)
	tests := []struct {
		name   string
		events func(s *streamtest.Stream)
		want   Cuts
	}{
		{"nothing cut", func(s *streamtest.Stream) {
			s.Post(1, s.WRs(1, 4, opSend, 0, 16, 1024, 4), 0, 4)
		}, Cuts{}},
		{"SGEs past the bound on posted WRs", func(s *streamtest.Stream) {
			s.Post(1, streamtest.SGECut(s.WRs(1, 4, opSend, 0, 1, 64, 4), 4, 0, 2), 0, 4)
			s.Post(1, streamtest.SGECut(s.WRs(1, 1, opSend, 0, 1, 64, 1), 255, 0), 0, 1)
		}, Cuts{SGECutWRs: 3, SGEsNotSummed: 4 + 4 + 255}},
		{"SGEs past the bound on WRs not posted", func(s *streamtest.Stream) {
			// the provider took the first two; the cut WR after them was refused
			s.Post(1, streamtest.SGECut(s.WRs(1, 4, opSend, 0, 1, 64, 4), 6, 1, 2), retENOMEM, 2)
		}, Cuts{SGECutWRs: 1, SGEsNotSummed: 6}},
		{"aborted wr batch", func(s *streamtest.Stream) {
			s.Add(&trace.Post{Header: s.Header(), QP: streamtest.QPAddr(1), QPNum: 1, API: trace.APIWR, Aborted: true,
				WRs: streamtest.SGECut(s.WRs(1, 2, opSend, 0, 1, 64, 0), 3, 0, 1)})
		}, Cuts{}},
		{"list walk capped", func(s *streamtest.Stream) {
			s.Capped(1, s.WRs(1, 64, opSend, 0, 1, 64, 0), 1024, 0, 1024)
			s.Capped(1, s.WRs(1, 64, opSend, 0, 1, 64, 0), 1024, retENOMEM, 0)
			s.Post(1, s.WRs(1, 8, opSend, 0, 1, 64, 8), 0, 8)
		}, Cuts{WalkCappedPosts: 2}},
		{"both", func(s *streamtest.Stream) {
			s.Capped(1, streamtest.SGECut(s.WRs(1, 64, opSend, 0, 1, 64, 0), 4, 0, 63), 1024, 0, 1024)
		}, Cuts{SGECutWRs: 2, SGEsNotSummed: 8, WalkCappedPosts: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			s.Create(1, trace.QPTypeRC, caps, false)
			s.Create(2, trace.QPTypeRC, caps, false)
			tc.events(s)
			s.Send(2, 4, 0, 4) // a QP with nothing cut beside it
			snap := run(t, s, Options{BF: DefaultBF})
			if len(snap.QPs) != 2 {
				t.Fatalf("%d QPs", len(snap.QPs))
			}
			if got := snap.QPs[0].Cuts; got != tc.want {
				t.Errorf("QP 1 cuts %+v, want %+v", got, tc.want)
			}
			if got := snap.QPs[1].Cuts; got != (Cuts{}) {
				t.Errorf("QP 2 cuts %+v, want none", got)
			}
			if snap.Total.Cuts != tc.want {
				t.Errorf("total cuts %+v, want %+v", snap.Total.Cuts, tc.want)
			}

			var doc struct {
				QPs   []map[string]any `json:"qps"`
				Total map[string]any   `json:"total"`
			}
			if err := json.Unmarshal(jsonOf(t, snap), &doc); err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				key  string
				want uint64
			}{
				{"wrs_sge_cut", tc.want.SGECutWRs},
				{"sges_not_summed", tc.want.SGEsNotSummed},
				{"posts_walk_capped", tc.want.WalkCappedPosts},
			} {
				for what, m := range map[string]map[string]any{"QP 1": doc.QPs[0], "total": doc.Total} {
					v, ok := m[f.key]
					if f.want == 0 && ok {
						t.Errorf("%s: %s %v in the JSON, want it left out", what, f.key, v)
					}
					if f.want != 0 && v != float64(f.want) {
						t.Errorf("%s: %s %v in the JSON, want %d", what, f.key, v, f.want)
					}
				}
				if v, ok := doc.QPs[1][f.key]; ok {
					t.Errorf("QP 2: %s %v in the JSON, want it left out", f.key, v)
				}
			}
		})
	}
}

// cutFields are the cut fields of each QP's JSON and of the total's.
func cutFields(t *testing.T, snap Snapshot) (fields []map[string]any) {
	t.Helper()
	var doc struct {
		QPs   []map[string]any `json:"qps"`
		Total map[string]any   `json:"total"`
	}
	if err := json.Unmarshal(jsonOf(t, snap), &doc); err != nil {
		t.Fatal(err)
	}
	for _, m := range append(doc.QPs, doc.Total) {
		f := map[string]any{}
		for _, k := range []string{"wrs_sge_cut", "sges_not_summed", "posts_walk_capped"} {
			if v, ok := m[k]; ok {
				f[k] = v
			}
		}
		fields = append(fields, f)
	}
	return fields
}

// The counters mode's totals carry the cuts, which replace the earlier
// totals of the QP as every count does.
func TestCountersCuts(t *testing.T) {
	tests := []struct {
		name    string
		flushes []trace.QPCounters
		want    Cuts
	}{
		{"nothing cut", []trace.QPCounters{{PostCalls: 4, WRs: 4, Doorbells: 4}}, Cuts{}},
		{"SGEs past the bound", []trace.QPCounters{
			{PostCalls: 1, WRs: 3, Doorbells: 1, SGECutWRs: 3, SGEsNotSummed: 12},
		}, Cuts{SGECutWRs: 3, SGEsNotSummed: 12}},
		{"list walk capped", []trace.QPCounters{
			{PostCalls: 2, WRs: 1024, Doorbells: 1, Errors: 1, ENOMEM: 1, WalkCappedPosts: 2},
		}, Cuts{WalkCappedPosts: 2}},
		{"later totals replace earlier ones", []trace.QPCounters{
			{PostCalls: 1, WRs: 1024, Doorbells: 1, WalkCappedPosts: 1},
			{PostCalls: 2, WRs: 2048, Doorbells: 2, WalkCappedPosts: 2, SGECutWRs: 1, SGEsNotSummed: 255},
			{PostCalls: 3, WRs: 2051, Doorbells: 3, WalkCappedPosts: 2, SGECutWRs: 4, SGEsNotSummed: 267},
		}, Cuts{SGECutWRs: 4, SGEsNotSummed: 267, WalkCappedPosts: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			s.Create(1, trace.QPTypeRC, streamtest.RCCaps(4096, 0, 30), false)
			s.Create(2, trace.QPTypeRC, streamtest.RCCaps(4096, 0, 30), false)
			for _, c := range tc.flushes {
				s.Counters(1, c)
				s.Counters(2, trace.QPCounters{PostCalls: 1, WRs: 4, Doorbells: 1}) // nothing cut beside it
			}
			snap := run(t, s, Options{BF: DefaultBF})
			if len(snap.QPs) != 2 || !snap.QPs[0].CountersOnly {
				t.Fatalf("%d QPs, counters only %v", len(snap.QPs), len(snap.QPs) > 0 && snap.QPs[0].CountersOnly)
			}
			if got := snap.QPs[0].Cuts; got != tc.want {
				t.Errorf("QP 1 cuts %+v, want %+v", got, tc.want)
			}
			if got := snap.QPs[1].Cuts; got != (Cuts{}) {
				t.Errorf("QP 2 cuts %+v, want none", got)
			}
			if snap.Total.Cuts != tc.want {
				t.Errorf("total cuts %+v, want %+v", snap.Total.Cuts, tc.want)
			}
			fields := cutFields(t, snap)
			want := map[string]any{}
			for k, v := range map[string]uint64{"wrs_sge_cut": tc.want.SGECutWRs, "sges_not_summed": tc.want.SGEsNotSummed,
				"posts_walk_capped": tc.want.WalkCappedPosts} {
				if v != 0 {
					want[k] = float64(v)
				}
			}
			for i, what := range []string{"QP 1", "QP 2", "total"} {
				w := want
				if what == "QP 2" {
					w = map[string]any{}
				}
				if !reflect.DeepEqual(fields[i], w) {
					t.Errorf("%s: JSON cut fields %v, want %v", what, fields[i], w)
				}
			}
		})
	}
}

// The same cuts said per call (events mode) and in totals (counters mode)
// make the same cuts and JSON fields, and so the same report lines: the
// posts of the probe tests' `target cut`, and the totals the kernel keeps
// of them.
func TestCutsBothModes(t *testing.T) {
	caps := streamtest.RCCaps(2048, 2048, 20)
	events := streamtest.New()
	events.Create(1, trace.QPTypeRC, caps, false)
	events.Create(2, trace.QPTypeRC, caps, false)
	events.Capped(1, events.WRs(1, 64, opSend, 0, 1, 64, 0), 1024, 0, 1024)
	events.Post(1, events.WRs(1, 1024, opSend, 0, 1, 64, 0)[:64], 0, 1024)
	events.Post(1, streamtest.SGECut(events.WRs(1, 3, opSend, 0, 1, 64, 3), 4, 0, 1, 2), 0, 3)
	events.Add(&trace.Post{Header: events.Header(), QP: streamtest.QPAddr(2), QPNum: 2, API: trace.APIWR,
		WRs: []trace.WR{{ID: 1, Opcode: opSend, NumSGE: 20, Bytes: 1720, SGEsNotSummed: 4},
			{ID: 2, Opcode: opSend, Flags: 8, NumSGE: 18, Bytes: 280, SGEsNotSummed: 2}}, Accepted: 2})

	counters := streamtest.New()
	counters.Create(1, trace.QPTypeRC, caps, false)
	counters.Create(2, trace.QPTypeRC, caps, false)
	counters.Counters(1, trace.QPCounters{PostCalls: 3, WRs: 2051, Doorbells: 3, WalkCappedPosts: 1,
		SGECutWRs: 3, SGEsNotSummed: 12})
	counters.Counters(2, trace.QPCounters{PostCalls: 1, WRs: 2, Inline: 1, Doorbells: 1, InlineBytes: 280,
		PayloadBytes: 1720, PayloadSGEs: 20, SGECutWRs: 2, SGEsNotSummed: 6})

	es, cs := run(t, events, Options{BF: DefaultBF}), run(t, counters, Options{BF: DefaultBF})
	for i := range es.QPs {
		if es.QPs[i].Cuts != cs.QPs[i].Cuts {
			t.Errorf("QP %d: events mode cuts %+v, counters mode %+v", i+1, es.QPs[i].Cuts, cs.QPs[i].Cuts)
		}
	}
	want := Cuts{SGECutWRs: 5, SGEsNotSummed: 18, WalkCappedPosts: 1}
	if es.Total.Cuts != want || cs.Total.Cuts != want {
		t.Errorf("total cuts: events mode %+v, counters mode %+v, want %+v", es.Total.Cuts, cs.Total.Cuts, want)
	}
	ef, cf := cutFields(t, es), cutFields(t, cs)
	if !reflect.DeepEqual(ef, cf) {
		t.Errorf("JSON cut fields differ:\nevents   %v\ncounters %v", ef, cf)
	}
}
