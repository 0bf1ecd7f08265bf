package analyzer

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

// walkNumbers calls f with the path and value of every number in a JSON
// document.
func walkNumbers(path string, v any, f func(string, float64)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			walkNumbers(path+"."+k, x, f)
		}
	case []any:
		for _, x := range v {
			walkNumbers(path+"[]", x, f)
		}
	case float64:
		f(path, v)
	}
}

// Counters mode measures totals only: every number of its JSON is
// measured or derived from measured numbers, rates run over the trace's
// own times, and what it does not measure is absent, not 0.
func TestCountersModeHonest(t *testing.T) {
	const wrs, posts, signaled = streamtest.CountersWRs, streamtest.CountersPosts, streamtest.CountersSignaled
	type want struct {
		spanNS   uint64 // the QP's rate span
		batching uint64 // doorbells saved
	}
	wants := map[string]want{
		"QP created in the trace, one flush at its destroy": {500_000_000, 0},
		"attached after the QP's create, flushed twice":     {500_000_000, wrs - posts/2},
	}
	for _, c := range streamtest.CountersMode {
		t.Run(c.Name, func(t *testing.T) {
			tc := streamtest.Want(t, wants, c.Name)
			s := streamtest.New()
			c.Build(s)
			snap := run(t, s, Options{})
			if len(snap.QPs) != 1 {
				t.Fatalf("%d QPs, want 1", len(snap.QPs))
			}
			q := snap.QPs[0]
			if q.Rates.SpanNS != tc.spanNS {
				t.Errorf("span %d ns, want %d (the trace's own times)", q.Rates.SpanNS, tc.spanNS)
			}
			if want := float64(wrs) * 1e9 / float64(tc.spanNS); math.Abs(q.Rates.WRsPerSec-want) > 1 {
				t.Errorf("post_wrs_per_s %.0f, want %.0f", q.Rates.WRsPerSec, want)
			}
			if len(snap.CQs) != 1 || snap.CQs[0].SpanNS < tc.spanNS || snap.CQs[0].PollsPerSec <= 0 {
				t.Errorf("CQs %+v: want the counted polls over at least %d ns", snap.CQs, tc.spanNS)
			}
			if q.PCIe.DoorbellsSaved != tc.batching || q.PCIe.CQEWritesSaved != wrs-signaled {
				t.Errorf("saved doorbells %d, CQE writes %d; want %d, %d",
					q.PCIe.DoorbellsSaved, q.PCIe.CQEWritesSaved, tc.batching, wrs-signaled)
			}

			js := jsonOf(t, snap)
			var doc map[string]any
			if err := json.Unmarshal(js, &doc); err != nil {
				t.Fatal(err)
			}
			walkNumbers("", doc, func(path string, v float64) {
				if v < 0 || v > 1e15 {
					t.Errorf("%s = %v: negative or wrapped", path, v)
				}
				if strings.HasSuffix(path, "_pct") && v > 100 {
					t.Errorf("%s = %v: not a percentage", path, v)
				}
			})
			qj := doc["qps"].([]any)[0].(map[string]any)
			objs := map[string]map[string]any{
				"qps[0]": qj, "total": doc["total"].(map[string]any),
				"qps[0].rates": qj["rates"].(map[string]any), "qps[0].pcie": qj["pcie"].(map[string]any),
				"total_rates": doc["total_rates"].(map[string]any), "total_pcie": doc["total_pcie"].(map[string]any),
			}
			absent := map[string][]string{
				"qps[0]": {"bf_writes", "wqebbs", "dma_reads_wqe", "longest_unsignaled_run", "signal_interval_typical",
					"signal_interval_longest", "occupancy", "outstanding", "peak_outstanding", "cqes_polled", "enomem_sq_full"},
				"total":        {"bf_writes", "longest_unsignaled_run", "peak_outstanding", "cqes_polled", "post_recvs"},
				"qps[0].rates": {"cqes_per_s"}, "total_rates": {"cqes_per_s"},
				"qps[0].pcie": {"bytes_saved", "bytes_saved_pct", "transactions_saved_pct", "wqe_fetches_saved_blueflame",
					"wqe_fetches_saved_batching", "actual", "baseline"},
				"total_pcie": {"bytes_saved", "wqe_fetches_saved_blueflame", "actual"},
			}
			for obj, keys := range absent {
				for _, k := range keys {
					if v, ok := objs[obj][k]; ok && v != nil {
						t.Errorf("%s.%s = %v, want it absent (not measured)", obj, k, v)
					}
				}
			}
			for _, k := range []string{"wrs", "post_calls", "signaled", "doorbells", "polls"} {
				if _, ok := qj[k]; !ok {
					t.Errorf("qps[0].%s absent, but measured", k)
				}
			}
			if r := qj["rates"].(map[string]any); r["post_wrs_per_s"] == nil || r["span_ns"] == nil {
				t.Errorf("rates %v: post_wrs_per_s and span_ns are measured", r)
			}

		})
	}
}

// Savings never wrap: counts the model does not have leave their savings
// zero, whatever the other counts say.
func TestSavingsNeverWrap(t *testing.T) {
	for _, c := range []Counters{
		{WRs: 10, Doorbells: 10, Signaled: 10},
		{WRs: 5, Doorbells: 10, Signaled: 20},
		{WRs: 10, Doorbells: 10, BFWrites: 20, MMIOBytes: 8},
		{WRs: 10, Doorbells: 10, MMIOBytes: 1},
	} {
		s := savings(&c)
		for name, v := range map[string]uint64{"doorbells": s.DoorbellsSaved, "CQE writes": s.CQEWritesSaved,
			"MMIO writes": s.Actual.MMIOWrites, "bytes": s.Actual.Bytes} {
			if v > 1<<40 {
				t.Errorf("%+v: %s %d wrapped", c, name, v)
			}
		}
		if s.BytesSaved < -(1<<40) || s.BytesPct < -1e6 || s.TransactionsPct < -1e6 {
			t.Errorf("%+v: savings %+v wrapped", c, s)
		}
	}
}

// A front end embeds the snapshot in its own document: the snapshot has no
// JSON method of its own to hide the document's other fields, and the
// totals still leave out what counters mode does not measure.
func TestSnapshotEmbedded(t *testing.T) {
	s := streamtest.New()
	s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(64, 0, 1), false)
	s.Counters(0x1c0, trace.QPCounters{PostCalls: 4, WRs: 8, Doorbells: 4, Signaled: 2})
	b, err := json.Marshal(struct {
		Snapshot
		Extra int `json:"extra"`
	}{run(t, s, Options{}), 7})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["extra"] != 7.0 || doc["qps"] == nil {
		t.Fatalf("embedded snapshot hid the document's fields: %s", b)
	}
	total := doc["total"].(map[string]any)
	if _, ok := total["bf_writes"]; ok || total["wrs"] != 8.0 {
		t.Errorf("total %v: want wrs 8 and no bf_writes", total)
	}
	if _, ok := doc["total_rates"].(map[string]any)["cqes_per_s"]; ok {
		t.Errorf("total_rates %v: cqes_per_s not measured", doc["total_rates"])
	}
}

// The kernel counts the WRs that carry IBV_SEND_SIGNALED; on a QP created
// with sq_sig_all every WR is signaled, as the events mode counts them.
func TestCountersModeSigAll(t *testing.T) {
	for _, sigAll := range []bool{false, true} {
		s := streamtest.New()
		s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), sigAll)
		s.Counters(0x1c0, trace.QPCounters{PostCalls: 10, WRs: 10, Signaled: 5, Doorbells: 10})
		want := map[bool]uint64{false: 5, true: 10}[sigAll]
		if q := run(t, s, Options{}).QPs[0]; q.Signaled != want {
			t.Errorf("sq_sig_all %v: %d signaled, want %d", sigAll, q.Signaled, want)
		}
	}
}

// In a counters-mode trace a QP whose totals never came (one that only
// received, say) shows what counters mode measures, not events mode's
// figures as 0: no occupancy, no ENOMEM cause, no CQEs per QP.
func TestCountersModeQPWithoutTotals(t *testing.T) {
	s := streamtest.New()
	s.Create(0x1c1, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
	for _, mode := range []string{"", ModeCounters} {
		snap := run(t, s, Options{BF: DefaultBF, Mode: mode})
		q := snap.QPs[0]
		counters := mode == ModeCounters
		if q.CountersOnly != counters {
			t.Errorf("mode %q: counters only %v, want %v", mode, q.CountersOnly, counters)
		}
		for _, k := range []string{"outstanding", "peak_outstanding", "cqes_polled", "enomem_sq_full"} {
			if q.Reported(k) == counters {
				t.Errorf("mode %q: %s reported %v", mode, k, q.Reported(k))
			}
		}
	}
}
