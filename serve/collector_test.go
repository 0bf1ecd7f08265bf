package serve

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

const pid = 4242

// events builds synthetic trace events of one process.
type events struct {
	t   uint64
	evs []trace.Event
	ids map[uint32]uint64
}

func (e *events) hdr() trace.Header {
	e.t += 1000
	return trace.Header{TimeNS: e.t, PID: pid, TID: pid}
}

// create creates a QP on the simulated HCA (the mlx5 model applies).
func (e *events) create(qpn uint32, depth uint32) {
	e.evs = append(e.evs, &trace.QPCreate{Header: e.hdr(), QP: 0x1000 + uint64(qpn), QPNum: qpn, Type: trace.QPTypeRC, Via: "sqsim_create_qp",
		SendCQ: 0x2000 + uint64(qpn), RecvCQ: 0x2000 + uint64(qpn), Gen: uint64(qpn),
		Caps: trace.Caps{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 60}})
}

// post posts n inline SENDs, every sig-th signaled (none when 0); ret is
// what the provider returned, accepting all when 0, none otherwise.
func (e *events) post(qpn uint32, n int, sig uint64, ret int32) {
	if e.ids == nil {
		e.ids = map[uint32]uint64{}
	}
	p := &trace.Post{Header: e.hdr(), QP: 0x1000 + uint64(qpn), QPNum: qpn, Ret: ret}
	for range n {
		id := e.ids[qpn]
		f := uint32(ibv.SendInline)
		if sig > 0 && (id+1)%sig == 0 {
			f |= ibv.SendSignaled
		}
		p.WRs = append(p.WRs, trace.WR{ID: id, Opcode: ibv.WRSend, Flags: f, NumSGE: 1, Bytes: 32})
		if ret == 0 {
			e.ids[qpn]++
		}
	}
	if ret == 0 {
		p.Accepted = uint32(n)
	}
	e.evs = append(e.evs, p)
}

func (e *events) counts(qpn uint32, wrs uint64) {
	e.evs = append(e.evs, &trace.QPCounters{Header: e.hdr(), QP: 0x1000 + uint64(qpn), QPNum: qpn, Gen: uint64(qpn),
		PostCalls: wrs, WRs: wrs, Inline: wrs, Signaled: wrs / 4, Doorbells: wrs, ENOMEM: 3, Errors: 3})
}

func (e *events) destroy(qpn uint32) {
	e.evs = append(e.evs, &trace.QPDestroy{Header: e.hdr(), QP: 0x1000 + uint64(qpn), QPNum: qpn, Gen: uint64(qpn)})
}

// scrape collects c into "name{label=value,...}" -> value, labels sorted.
func scrape(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

func qpSel(name string, qpn any, extra ...string) string {
	ls := append([]string{"comm=app", fmt.Sprintf("pid=%d", pid), "qp_type=" + fmt.Sprint(map[bool]string{true: "RC", false: "folded"}[qpn != "folded"]), fmt.Sprintf("qpn=%v", qpn)}, extra...)
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

type fixture struct {
	c   *Collector
	an  *analyzer.Analyzer
	now time.Time
	ns  uint64
}

func newFixture(o Options) *fixture {
	f := &fixture{an: analyzer.New(analyzer.Options{}), now: time.Unix(1e9, 0), ns: 1e6}
	f.c = NewCollector(o)
	f.c.now = func() time.Time { return f.now }
	f.c.monoNS = func() uint64 { return f.ns }
	f.c.ch.alive = func(uint32) bool { return true }
	f.c.ch.comm = func(uint32) string { return "app" }
	f.c.Attach(f.an, pid)
	return f
}

var testOpts = Options{Listen: DefaultListen, MaxQPs: 8, Grace: time.Minute, DiagWindow: time.Minute}

func TestCollector(t *testing.T) {
	type check struct {
		series string
		want   float64 // -1: absent
	}
	tests := []struct {
		name  string
		opts  Options
		build func(e *events)
		after func(f *fixture) // between the events and the scrape
		want  []check
	}{
		{"events mode: every figure, depth from the create", testOpts, func(e *events) {
			e.create(7, 64)
			e.post(7, 10, 4, 0)
		}, nil, []check{
			{qpSel("sqscope_send_wrs_total", 7), 10},
			{qpSel("sqscope_signaled_wrs_total", 7), 2},
			{qpSel("sqscope_inline_wrs_total", 7), 10},
			{qpSel("sqscope_doorbells_total", 7), 1},
			{qpSel("sqscope_sq_outstanding_wrs", 7), 10},
			{qpSel("sqscope_sq_peak_outstanding_wrs", 7), 10},
			{qpSel("sqscope_sq_depth_wrs", 7), 64},
			{qpSel("sqscope_post_enomem_total", 7, "cause=sq_full", "basis=provider"), 0},
			{qpSel("sqscope_post_enomem_total", 7, "cause=unknown", "basis=none"), 0},
			{qpSel("sqscope_pcie_transactions_saved_total", 7, "cause=cqe_unsignaled"), 8},
			{qpSel("sqscope_pcie_transactions_saved_total", 7, "cause=doorbell_batching"), 9},
			{"sqscope_qps{state=live}", 1},
			{"sqscope_traced_processes{}", 1},
			{"sqscope_tracing{}", 1},
		}},
		{"counters mode: what it does not measure is absent, not 0", testOpts, func(e *events) {
			e.create(7, 64)
			e.counts(7, 100)
		}, nil, []check{
			{qpSel("sqscope_send_wrs_total", 7), 100},
			{qpSel("sqscope_signaled_wrs_total", 7), 25},
			{qpSel("sqscope_post_enomem_total", 7, "cause=unknown", "basis=none"), 3},
			{qpSel("sqscope_post_enomem_total", 7, "cause=sq_full", "basis=provider"), -1},
			{qpSel("sqscope_sq_outstanding_wrs", 7), -1},
			{qpSel("sqscope_sq_peak_outstanding_wrs", 7), -1},
			{qpSel("sqscope_blueflame_writes_total", 7), -1},
			{qpSel("sqscope_cqes_polled_total", 7), -1},
			{qpSel("sqscope_pcie_saved_bytes", 7), -1},
			{qpSel("sqscope_pcie_transactions_saved_total", 7, "cause=payload_inline"), -1},
			{qpSel("sqscope_pcie_transactions_saved_total", 7, "cause=cqe_unsignaled"), 75},
			{qpSel("sqscope_sq_depth_wrs", 7), 64},
		}},
		{"a provider sqscope has no model of: what the application did, causes from its caps, no mlx5 figures", testOpts, func(e *events) {
			e.create(7, 64)
			e.evs[len(e.evs)-1].(*trace.QPCreate).Via = "ibv_create_qp"
			e.post(7, 10, 4, 0)
		}, nil, []check{
			{qpSel("sqscope_send_wrs_total", 7), 10},
			{qpSel("sqscope_signaled_wrs_total", 7), 2},
			{qpSel("sqscope_blueflame_writes_total", 7), -1},
			// the generic model infers the causes from caps, and says so
			{qpSel("sqscope_post_enomem_total", 7, "cause=sq_full", "basis=inferred"), 0},
			{qpSel("sqscope_post_enomem_total", 7, "cause=sge", "basis=inferred"), 0},
			{qpSel("sqscope_post_enomem_total", 7, "cause=sq_full", "basis=provider"), -1},
			{qpSel("sqscope_pcie_transactions_saved_total", 7, "cause=doorbell_batching"), -1},
			{qpSel("sqscope_pcie_saved_bytes", 7), -1},
		}},
		{"a provider sqscope has no model of, the QP created before the trace: no cause inferred, none exported", testOpts, func(e *events) {
			e.evs = append(e.evs, &trace.Attach{Header: e.hdr(), Func: "post_send", Path: "/usr/lib/libefa-rdmav34.so", How: "ops-table"})
			e.post(7, 10, 4, 0)
			e.post(7, 1, 0, int32(ibv.ENOMEM))
		}, nil, []check{
			{fmt.Sprintf("sqscope_post_enomem_total{basis=none,cause=unknown,comm=app,pid=%d,qp_type=unknown,qpn=7}", pid), 1},
			{fmt.Sprintf("sqscope_post_enomem_total{basis=inferred,cause=sq_full,comm=app,pid=%d,qp_type=unknown,qpn=7}", pid), -1},
			{fmt.Sprintf("sqscope_post_enomem_total{basis=provider,cause=sq_full,comm=app,pid=%d,qp_type=unknown,qpn=7}", pid), -1},
			{fmt.Sprintf("sqscope_send_wrs_total{comm=app,pid=%d,qp_type=unknown,qpn=7}", pid), 10},
		}},
		{"past --max-qps, QPs fold into their process's series", Options{MaxQPs: 1, Grace: time.Minute, DiagWindow: time.Minute}, func(e *events) {
			for _, q := range []uint32{1, 2, 3} {
				e.create(q, 64)
				e.post(q, int(q), 0, 0)
			}
		}, nil, []check{
			{qpSel("sqscope_send_wrs_total", 1), 1},
			{qpSel("sqscope_send_wrs_total", 2), -1},
			{qpSel("sqscope_send_wrs_total", "folded"), 5},
			{qpSel("sqscope_sq_outstanding_wrs", "folded"), 5},
			{qpSel("sqscope_sq_depth_wrs", "folded"), -1}, // a sum of depths means nothing
			{qpSel("sqscope_post_enomem_total", "folded", "cause=sq_full", "basis=provider"), 0},
			{qpSel("sqscope_post_enomem_total", "folded", "cause=sq_full", "basis=inferred"), -1},
			{fmt.Sprintf("sqscope_folded_qps{comm=app,pid=%d}", pid), 2},
			{"sqscope_max_qps{}", 1},
		}},
		{"a destroyed QP's series stay for the grace period", testOpts, func(e *events) {
			e.create(1, 64)
			e.post(1, 3, 0, 0)
			e.destroy(1)
		}, func(f *fixture) {
			f.c.Sweep()
			f.now = f.now.Add(testOpts.Grace - time.Second)
			f.c.Sweep()
		}, []check{
			{qpSel("sqscope_send_wrs_total", 1), 3},
			{"sqscope_qps{state=ended}", 1},
		}},
		{"then they go, and the analyzer forgets the QP", testOpts, func(e *events) {
			e.create(1, 64)
			e.post(1, 3, 0, 0)
			e.destroy(1)
		}, func(f *fixture) {
			f.c.Sweep()
			f.now = f.now.Add(testOpts.Grace)
			if n := f.c.Sweep(); n != 1 {
				t.Errorf("swept %d QPs, want 1", n)
			}
			if n := len(f.an.Snapshot().QPs); n != 0 {
				t.Errorf("the analyzer kept %d QPs", n)
			}
		}, []check{
			{qpSel("sqscope_send_wrs_total", 1), -1},
			{"sqscope_qps{state=ended}", 0},
		}},
		{"a folded QP forgotten leaves its counts in its process's series", Options{MaxQPs: 1, Grace: time.Minute, DiagWindow: time.Minute}, func(e *events) {
			e.create(1, 64)
			e.create(2, 64)
			e.create(3, 64)
			e.post(2, 4, 0, 0)
			e.post(3, 5, 0, 0)
			e.destroy(2)
		}, func(f *fixture) {
			f.c.Sweep()
			f.now = f.now.Add(time.Hour)
			f.c.Sweep()
		}, []check{
			{qpSel("sqscope_send_wrs_total", "folded"), 9},
			{qpSel("sqscope_sq_outstanding_wrs", "folded"), 5}, // gauges: the live QPs' only
			{fmt.Sprintf("sqscope_folded_qps{comm=app,pid=%d}", pid), 1},
		}},
		{"a diagnosis is active within the window, counted after", testOpts, func(e *events) {
			e.create(1, 8)
			e.post(1, 8, 0, 0)
			e.post(1, 1, 0, int32(ibv.ENOMEM))
		}, func(f *fixture) { f.ns += uint64(2 * time.Minute) }, []check{
			{fmt.Sprintf("sqscope_diagnosis{kind=sq_overflow_never_signaled,pid=%d,qpn=1,severity=error}", pid), -1},
			{fmt.Sprintf("sqscope_diagnosis_occurrences_total{kind=sq_overflow_never_signaled,pid=%d,qpn=1,severity=error}", pid), 1},
			{qpSel("sqscope_post_enomem_total", 1, "cause=sq_full", "basis=provider"), 1},
		}},
		{"a diagnosis within the window is 1", testOpts, func(e *events) {
			e.create(1, 8)
			e.post(1, 8, 0, 0)
			e.post(1, 1, 0, int32(ibv.ENOMEM))
		}, func(f *fixture) { f.ns = 1e6 }, []check{
			{fmt.Sprintf("sqscope_diagnosis{kind=sq_overflow_never_signaled,pid=%d,qpn=1,severity=error}", pid), 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(tc.opts)
			var e events
			tc.build(&e)
			f.an.IngestAll(e.evs)
			f.ns = e.t + 1
			if tc.after != nil {
				tc.after(f)
			}
			got := scrape(t, f.c)
			for _, c := range tc.want {
				v, ok := got[c.series]
				switch {
				case c.want < 0 && ok:
					t.Errorf("%s = %v, want it absent", c.series, v)
				case c.want >= 0 && !ok:
					t.Errorf("%s absent, want %v", c.series, c.want)
				case ok && v != c.want:
					t.Errorf("%s = %v, want %v", c.series, v, c.want)
				}
			}
			if t.Failed() {
				keys := make([]string, 0, len(got))
				for k := range got {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				t.Logf("scraped:\n%s", strings.Join(keys, "\n"))
			}
			if probs, err := testutil.CollectAndLint(f.c); err != nil || len(probs) > 0 {
				t.Errorf("lint: %v %+v", err, probs)
			}
		})
	}
}

// TestBeforeAttach: while the probes attach, a scrape answers at once
// with sqscope's own metrics only.
func TestBeforeAttach(t *testing.T) {
	c := NewCollector(testOpts)
	got := scrape(t, c)
	if got["sqscope_tracing{}"] != 0 || got["sqscope_max_qps{}"] != 8 {
		t.Errorf("scrape %v", got)
	}
	if _, ok := got["sqscope_lost_events_total{}"]; ok {
		t.Errorf("lost events exported before anything was traced")
	}
}

// TestProcessGone: a process whose QPs were forgotten and that exits later
// takes its folded series with it after the grace period.
func TestProcessGone(t *testing.T) {
	f := newFixture(Options{MaxQPs: 0, Grace: time.Minute, DiagWindow: time.Minute})
	alive := true
	f.c.ch.alive = func(uint32) bool { return alive }
	var e events
	e.create(1, 64)
	e.post(1, 3, 0, 0)
	e.destroy(1)
	f.an.IngestAll(e.evs)
	f.c.Sweep()
	f.now = f.now.Add(time.Hour)
	f.c.Sweep() // the QP forgotten, its counts kept in the folded series
	if got := scrape(t, f.c)[qpSel("sqscope_send_wrs_total", "folded")]; got != 3 {
		t.Fatalf("folded WRs %v after the QP was forgotten, want 3", got)
	}
	alive = false
	f.c.Sweep()
	f.now = f.now.Add(time.Hour)
	f.c.Sweep()
	got := scrape(t, f.c)
	if v, ok := got[qpSel("sqscope_send_wrs_total", "folded")]; ok {
		t.Errorf("folded WRs %v after the process was gone for the grace period, want none", v)
	}
	if len(f.c.ch.procs) != 0 {
		t.Errorf("%d processes kept", len(f.c.ch.procs))
	}
}

// TestTraceNamesProcesses: host-wide (or followed), the trace names each
// process and says when it exits: its comm is the trace's, and its QPs
// end with its exit even before its pid is reaped.
func TestTraceNamesProcesses(t *testing.T) {
	const other = 5151
	f := newFixture(testOpts)
	var e events
	e.create(1, 64)
	h := trace.Header{TimeNS: e.t, PID: other, TID: other}
	e.evs = append(e.evs, &trace.Proc{Header: h, How: trace.ProcFound, Comm: "ib_write_bw"},
		&trace.QPCreate{Header: h, QP: 0x9000, QPNum: 9, Type: trace.QPTypeRC, Via: "sqsim_create_qp", Gen: 99,
			Caps: trace.Caps{MaxSendWR: 32, MaxSendSGE: 1}},
		&trace.Exit{Header: h})
	f.an.IngestAll(e.evs)
	got := scrape(t, f.c)
	if v, ok := got[fmt.Sprintf("sqscope_sq_depth_wrs{comm=ib_write_bw,pid=%d,qp_type=RC,qpn=9}", other)]; !ok || v != 32 {
		t.Errorf("the other process's QP: depth %v (present %v), named by the trace", v, ok)
	}
	if got["sqscope_qps{state=ended}"] != 1 || got["sqscope_qps{state=live}"] != 1 {
		t.Errorf("QPs ended %v, live %v: want the exited process's ended, the target's live", got["sqscope_qps{state=ended}"], got["sqscope_qps{state=live}"])
	}
	if got["sqscope_traced_processes{}"] != 1 {
		t.Errorf("traced processes %v, want 1 (the target)", got["sqscope_traced_processes{}"])
	}
}
