package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqscope/sqscope/analyzer"
)

// The per-QP metrics, each defined once: its name (units in the name,
// _total for counters), help, and where its value comes from. key is the
// analyzer's JSON name of the figure: a QP traced in counters mode exports
// only what QP.Reported says was measured and modeled, never a 0 for what
// was not.

// qpLabels are the labels of every per-QP series: they join with
// `rdma res show qp` (pid, comm, lqpn) and name the QP's type. A QP folded
// past --max-qps is counted in its process's series, whose qpn and
// qp_type are "folded".
var qpLabels = []string{"pid", "comm", "qpn", "qp_type"}

// foldedLabel is the qpn and qp_type of a process's folded series.
const foldedLabel = "folded"

// qpSeries is one value of a per-QP metric: by the label value of the
// metric's extra label (none when the metric has no extra label).
type qpSeries struct {
	label string // the extra label's value
	key   string // analyzer JSON name, for QP.Reported
	value func(q *analyzer.QP) float64
}

type qpMetric struct {
	name, help string
	typ        prometheus.ValueType
	extra      string // an extra label (cause), or ""
	// basis: a label "basis" after it says what each value rests on
	// (basisOf)
	basis  bool
	series []qpSeries
	// fold: summed into the process's folded series; a gauge whose sum
	// means nothing (a depth, a peak) is not.
	fold bool
	fam  *family
}

func u(f func(q *analyzer.QP) uint64) func(q *analyzer.QP) float64 {
	return func(q *analyzer.QP) float64 { return float64(f(q)) }
}

func one(key string, f func(q *analyzer.QP) uint64) []qpSeries {
	return []qpSeries{{key: key, value: u(f)}}
}

var qpMetrics = []*qpMetric{
	{name: "sqscope_send_wrs_total", typ: prometheus.CounterValue, fold: true,
		help:   "Send work requests posted and accepted by the provider.",
		series: one("wrs", func(q *analyzer.QP) uint64 { return q.WRs })},
	{name: "sqscope_sq_posted_read_wrs_total", typ: prometheus.CounterValue, fold: true,
		help:   "Send WRs posted as the provider counts them, read from the process's memory without a trap (sentinel mode, where the provider's layout is known: the simulated HCA, rxe, whose count includes WRs a full ring refused); every WR, traced or not.",
		series: one(analyzer.MemoryPostedKey, func(q *analyzer.QP) uint64 { return q.Memory.Posted })},
	{name: "sqscope_post_calls_total", typ: prometheus.CounterValue, fold: true,
		help:   "Post calls (ibv_post_send, or ibv_wr_start..ibv_wr_complete), failed ones included.",
		series: one("post_calls", func(q *analyzer.QP) uint64 { return q.PostCalls })},
	{name: "sqscope_doorbells_total", typ: prometheus.CounterValue, fold: true,
		help:   "Doorbells rung: one per post call that posted at least one WR.",
		series: one("doorbells", func(q *analyzer.QP) uint64 { return q.Doorbells })},
	{name: "sqscope_inline_wrs_total", typ: prometheus.CounterValue, fold: true,
		help:   "Send WRs posted with IBV_SEND_INLINE (the CPU copied the payload into the WQE).",
		series: one("inline", func(q *analyzer.QP) uint64 { return q.Inline })},
	{name: "sqscope_signaled_wrs_total", typ: prometheus.CounterValue, fold: true,
		help:   "Send WRs posted signaled (IBV_SEND_SIGNALED or sq_sig_all): each writes a CQE.",
		series: one("signaled", func(q *analyzer.QP) uint64 { return q.Signaled })},
	{name: "sqscope_blueflame_writes_total", typ: prometheus.CounterValue, fold: true,
		help:   "WQEs written to the HCA by BlueFlame MMIO instead of a doorbell and a WQE fetch (mlx5 model; events mode only).",
		series: one("bf_writes", func(q *analyzer.QP) uint64 { return q.BFWrites })},
	{name: "sqscope_cqes_polled_total", typ: prometheus.CounterValue, fold: true,
		help:   "Send completions polled for the QP (events mode; counters mode where the kernel kept the QP's send queue, of ibv_poll_cq).",
		series: one("cqes_polled", func(q *analyzer.QP) uint64 { return q.CQEsPolled })},
	{name: "sqscope_post_enomem_total", typ: prometheus.CounterValue, fold: true, extra: "cause", basis: true,
		help: "Work requests refused with ENOMEM, by cause: sq_full, inline (inline data over max_inline_data), sge (more SGEs than max_send_sge); unknown where the cause was not seen (counters mode without the kernel's send-queue model). basis: provider (the provider's own checks, as sqscope models mlx5 and rxe), inferred (from the caps the QP reported, on a provider sqscope has no model of), none (cause unknown).",
		series: []qpSeries{
			{"sq_full", "enomem_sq_full", u(func(q *analyzer.QP) uint64 { return q.ENOMEMSQFull })},
			{"inline", "enomem_inline", u(func(q *analyzer.QP) uint64 { return q.ENOMEMInline })},
			{"sge", "enomem_sge", u(func(q *analyzer.QP) uint64 { return q.ENOMEMSGE })},
			// every ENOMEM of counters mode, which does not see the cause;
			// in events mode those of a provider without a model of causes
			{"unknown", "enomem", u(func(q *analyzer.QP) uint64 {
				if q.CountersOnly && !q.KernelSQ {
					return q.ENOMEM
				}
				return q.ENOMEMUnknown
			})},
		}},
	{name: "sqscope_post_errors_total", typ: prometheus.CounterValue, fold: true, extra: "error",
		help: "Work requests refused other than with ENOMEM: einval (a bad opcode or a batch rolled back), not_rts (posted before the QP reached RTS), other errnos.",
		series: []qpSeries{
			{"einval", "einval", u(func(q *analyzer.QP) uint64 { return q.EINVAL })},
			{"not_rts", "not_rts", u(func(q *analyzer.QP) uint64 { return q.NotRTS })},
			{"other", "other_errors", u(func(q *analyzer.QP) uint64 { return q.OtherErrors })},
		}},
	{name: "sqscope_pcie_transactions_saved_total", typ: prometheus.CounterValue, fold: true, extra: "cause",
		help: "PCIe transactions saved against the same WRs posted one per call, not inline, all signaled (mlx5 model), by cause; counters mode measures only doorbell_batching and cqe_unsignaled.",
		series: []qpSeries{
			{"doorbell_batching", "doorbells_saved", u(func(q *analyzer.QP) uint64 { return q.PCIe.DoorbellsSaved })},
			{"wqe_fetch_batching", "wqe_fetches_saved_batching", u(func(q *analyzer.QP) uint64 { return q.PCIe.WQEFetchBatching })},
			{"wqe_fetch_blueflame", "wqe_fetches_saved_blueflame", u(func(q *analyzer.QP) uint64 { return q.PCIe.WQEFetchBF })},
			{"payload_inline", "payload_reads_saved_inline", u(func(q *analyzer.QP) uint64 { return q.PCIe.PayloadReadsSaved })},
			{"cqe_unsignaled", "cqe_writes_saved_unsignaled", u(func(q *analyzer.QP) uint64 { return q.PCIe.CQEWritesSaved })},
		}},
	// Bytes saved are a difference of two growing totals (BlueFlame
	// writes whole WQEs by MMIO, which may cost more bytes than the fetch
	// it saves): a gauge, not a counter.
	{name: "sqscope_pcie_saved_bytes", typ: prometheus.GaugeValue, fold: true,
		help:   "PCIe bytes saved so far against the same WRs posted one per call, not inline, all signaled (mlx5 model, 24 B of TLP header per transaction, an estimate); may fall; events mode only.",
		series: []qpSeries{{key: "bytes_saved", value: func(q *analyzer.QP) float64 { return float64(q.PCIe.BytesSaved) }}}},
	{name: "sqscope_sq_outstanding_wrs", typ: prometheus.GaugeValue, fold: true,
		help:   "Send WRs posted and not yet retired by a completion: the send queue's occupancy now (events mode; counters mode where the kernel kept the QP's send queue, read at each flush).",
		series: one("outstanding", func(q *analyzer.QP) uint64 { return q.Outstanding })},
	{name: "sqscope_sq_peak_outstanding_wrs", typ: prometheus.GaugeValue,
		help:   "The most send WRs outstanding at once since the QP was created or traced (events mode; counters mode where the kernel kept the QP's send queue).",
		series: one("peak_outstanding", func(q *analyzer.QP) uint64 { return q.PeakOutstanding })},
	{name: "sqscope_sq_longest_unsignaled_run_wrs", typ: prometheus.GaugeValue,
		help:   "The longest run of unsignaled send WRs posted in a row (events mode; counters mode where the kernel kept the QP's send queue).",
		series: one("longest_unsignaled_run", func(q *analyzer.QP) uint64 { return q.LongestUnsignaledRun })},
}

// The values of the label basis: what an ENOMEM cause rests on.
const (
	basisProvider = "provider" // the provider's own checks, as its model has them
	basisInferred = "inferred" // the caps the QP reported (the generic model)
	basisNone     = "none"     // no cause: not seen, or none found
)

// basesOf are the values m's label basis takes ("" for none: no label).
func basesOf(m *qpMetric) []string {
	if !m.basis {
		return []string{""}
	}
	return []string{basisInferred, basisNone, basisProvider}
}

// basisOf is what q's value of series s of m rests on ("" when m has no
// label basis).
func basisOf(m *qpMetric, s *qpSeries, q *analyzer.QP) string {
	switch {
	case !m.basis:
		return ""
	case s.key == "enomem":
		return basisNone
	case q.CauseBasis == analyzer.CauseInferred:
		return basisInferred
	}
	return basisProvider
}

// depthFam is the send queue's depth, which the QP reports at its create
// (or the analyzer inferred from the first SQ-full failure): exported only
// when known.
var depthFam = newFamily("sqscope_sq_depth_wrs",
	"Send queue depth: max_send_wr as the provider reported it at ibv_create_qp (or as inferred from the first SQ-full ENOMEM); absent when unknown.",
	prometheus.GaugeValue, qpLabels...)

var (
	diagnosisFam = newFamily("sqscope_diagnosis",
		"1 while a diagnosis of the QP is active: it occurred within --diag-window; kind and severity as sqscope's reports name them.",
		prometheus.GaugeValue, "kind", "severity", "pid", "qpn")
	diagnosisCountFam = newFamily("sqscope_diagnosis_occurrences_total",
		"Occurrences of a diagnosis of the QP (a failing post repeated in a loop is one diagnosis, counted here).",
		prometheus.CounterValue, "kind", "severity", "pid", "qpn")
	foldedFam = newFamily("sqscope_folded_qps",
		"QPs of the process counted in its series with qpn=\"folded\" because more than --max-qps QPs were exported.",
		prometheus.GaugeValue, "pid", "comm")
	maxQPsFam = newFamily("sqscope_max_qps",
		"The --max-qps bound: QPs beyond it are folded into per-process series.", prometheus.GaugeValue)
	exportedQPsFam = newFamily("sqscope_qps",
		"QP lifetimes exported now, by state: live, or ended (destroyed, or their process exited) and kept for --grace.",
		prometheus.GaugeValue, "state")
	lostFam = newFamily("sqscope_lost_events_total",
		"Trace records the kernel could not hand to sqscope (ring buffer full): the numbers above then undercount.", prometheus.CounterValue)
	eventsFam = newFamily("sqscope_events_total",
		"Trace records sqscope read and analysed.", prometheus.CounterValue)
	cpuFam = newFamily("sqscope_cpu_seconds_total",
		"CPU time sqscope itself spent (user and system), attaching, reading and analysing included; not the probes' cost, which the traced processes pay.", prometheus.CounterValue)
	processesFam = newFamily("sqscope_traced_processes",
		"Processes traced now and running: the target, and every process whose QPs sqscope saw.", prometheus.GaugeValue)
	tracingFam = newFamily("sqscope_tracing",
		"1 while the trace runs; 0 while probes are being attached and after the trace ended (sqscope keeps serving its last numbers).", prometheus.GaugeValue)
)

func init() {
	for _, m := range qpMetrics {
		labels := qpLabels
		if m.extra != "" {
			labels = append(append([]string(nil), qpLabels...), m.extra)
		}
		if m.basis {
			labels = append(labels, "basis")
		}
		m.fam = newFamily(m.name, m.help, m.typ, labels...)
	}
	sortFamilies()
}
