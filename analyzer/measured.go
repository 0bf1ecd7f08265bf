package analyzer

import (
	"bytes"
	"encoding/json"

	"github.com/sqscope/sqscope/trace"
)

// What counters mode (--mode counters) does not measure: the kernel keeps
// per-QP totals of posts, WRs, inline, signaled, doorbells, payload,
// errors and receives posted, and per-CQ totals of polls; receive
// completions and SRQ receives are not traced (the snapshot says so once,
// in ReceivesNotTraced, and leaves those figures out). Everything a per-call event feeds
// (BlueFlame, WQE sizes and fetches, occupancy, the unsignaled runs, the
// opcodes and the READ and atomic responses they need, the
// ENOMEM cause, per-QP completions) is left out of JSON rather than shown
// as 0.
var (
	unmeasuredCounters = keySet("bf_writes", "wqebbs", "dma_reads_wqe",
		"enomem_sq_full", "enomem_inline", "enomem_sge", "enomem_unknown", "peak_outstanding",
		"cqes_polled", "cqe_errors", "flushed_unsignaled", "unmatched_cqes",
		"wrs_past_bound", "wr_api_calls", "aborted", "longest_unsignaled_run",
		"mmio_bytes", "dma_bytes_wqe", "empty_wr_batches", "inline_sges",
		"baseline_wqe_bytes", "wrs_beyond_model",
		"dma_writes_response", "dma_bytes_response", "opcodes", "not_rts", "recv_cqes_polled")
	unmeasuredQP = keySet("outstanding", "signal_interval_typical",
		"signal_interval_longest", "occupancy")
	// what the kernel's send-queue model measures of those (kernsq.go)
	kernelMeasured = keySet("outstanding", "peak_outstanding", "longest_unsignaled_run",
		"cqes_polled", "cqe_errors", "enomem_sq_full", "enomem_inline", "enomem_sge",
		"enomem_unknown", "not_rts")
	unmeasuredRates = keySet("cqes_per_s")
	// Of the PCIe savings only those of doorbell batching and unsignaled
	// WRs rest on counted numbers; the rest needs the BlueFlame and WQE
	// sizes of each call.
	unmeasuredPCIe = keySet("actual", "baseline", "wqe_fetches_saved_batching",
		"wqe_fetches_saved_blueflame", "payload_reads_saved_inline",
		"bytes_saved", "transactions_saved_pct", "bytes_saved_pct")
)

// CountersModeNote says once, where a counters-mode QP is shown, what it
// leaves out and why; CountersModeKernelNote the same of a QP whose send
// queue the kernel kept (QP.CountersNote chooses).
const (
	CountersModeNote       = "counters mode: totals kept in the kernel; occupancy, BlueFlame writes, WQE fetches, unsignaled runs, CQEs per QP, ENOMEM causes and PCIe bytes need --mode events"
	CountersModeKernelNote = "counters mode: totals and the send queue kept in the kernel; BlueFlame writes, WQE fetches, the occupancy histogram and PCIe bytes need --mode events"
)

// CountersNote is what a counters-mode QP leaves out and why: with the
// reason the kernel's send-queue model could not be used, if it could not.
func (q QP) CountersNote() string {
	switch {
	case q.KernelSQ:
		return CountersModeKernelNote
	case q.OccupancyNotMeasured != "":
		return CountersModeNote + " (the kernel's send-queue model: " + q.OccupancyNotMeasured + ")"
	}
	return CountersModeNote
}

// Measured reports whether the figure of the QP (or of its PCIe savings)
// with this JSON name was measured: false for what counters mode does not
// measure, which a view then leaves out instead of showing 0.
func (q QP) Measured(key string) bool {
	if q.recvUntraced && recvDrop[key] || q.PostsNotTraced && directDrop[key] {
		return false
	}
	if q.CountersOnly && q.KernelSQ && kernelMeasured[key] {
		return true
	}
	return !q.CountersOnly || !qpDrop[key] && !unmeasuredPCIe[key]
}

func keySet(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// without is a's keys not in b.
func without(a, b map[string]bool) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		if !b[k] {
			m[k] = true
		}
	}
	return m
}

func union(sets ...map[string]bool) map[string]bool {
	m := map[string]bool{}
	for _, s := range sets {
		for k := range s {
			m[k] = true
		}
	}
	return m
}

var (
	qpDrop = union(unmeasuredCounters, unmeasuredQP)
	// what a QP whose send queue the kernel kept leaves out
	qpDropKernel     = without(qpDrop, kernelMeasured)
	totalsDropKernel = without(unmeasuredCounters, kernelMeasured)
	// what a trace that does not trace receives leaves out of a QP or
	// the totals, whatever its QPs posted
	recvDrop = keySet("post_recvs")
	// a receive queue in counters mode: no completions seen
	unmeasuredRecv = keySet("consumed", "cqe_errors")
)

type recvJSON RecvQueue

// MarshalJSON leaves out what completions would tell of a receive queue
// whose posts the kernel counted.
func (r RecvQueue) MarshalJSON() ([]byte, error) {
	b, err := marshal(recvJSON(r))
	if err != nil || !r.counted {
		return b, err
	}
	return dropKeys(b, unmeasuredRecv)
}

// directDrop is what a QP whose WQEs are written directly leaves out
// (QP.PostsNotTraced): every figure of its posts, which no probe saw, and
// what rests on them; its completions and polls stay.
var directDrop = keySet("wrs", "post_calls", "inline", "signaled", "doorbells", "bf_writes", "wqebbs",
	"dma_reads_wqe", "dma_reads_payload", "cqe_writes", "enomem_sq_full", "enomem_inline", "enomem_sge",
	"enomem_unknown", "enomem", "einval", "not_rts", "other_errors", "peak_outstanding", "outstanding",
	"outstanding_lower_bound", "longest_unsignaled_run", "mmio_bytes", "dma_bytes_wqe", "dma_bytes_payload",
	"inline_bytes", "inline_sges", "baseline_wqe_bytes", "wrs_beyond_model", "wrs_past_bound", "wr_api_calls",
	"aborted", "empty_wr_batches", "dma_writes_response", "dma_bytes_response", "flushed_unsignaled",
	"signal_interval_typical", "signal_interval_longest", "occupancy", "opcodes", "pcie")

type qpJSON QP

// MarshalJSON leaves out, for a QP traced in counters mode, the fields
// that mode does not measure (its rates and savings leave out their own),
// and, where receives are not traced, its receive count.
func (q QP) MarshalJSON() ([]byte, error) {
	b, err := marshal(qpJSON(q))
	if err != nil {
		return b, err
	}
	drop := q.notModeled()
	switch {
	case q.CountersOnly && q.KernelSQ:
		drop = union(drop, qpDropKernel)
	case q.CountersOnly:
		drop = union(drop, qpDrop)
	}
	if q.recvUntraced {
		drop = union(drop, recvDrop)
	}
	if q.PostsNotTraced {
		drop = union(drop, directDrop)
	}
	if len(drop) == 0 {
		return b, nil
	}
	return dropKeys(b, drop)
}

// Totals are the counters of all QPs; CountersOnly when some QP was traced
// in counters mode, whose unmeasured fields they then leave out of JSON.
type Totals struct {
	Counters
	CountersOnly bool `json:"-"`
	// kernelSQ: some counters-mode QP has a kernel send-queue model: the
	// totals give its occupancy figures and causes (the sum of the QPs'
	// that give them)
	kernelSQ bool
	// notGiven: what the model of no QP gives (provider.go), left out of
	// JSON
	notGiven     map[string]bool
	recvUntraced bool // receives not traced: no receive count
}

// MarshalJSON writes the counters, without the unmeasured ones of counters
// mode, those the model of no QP gives, and the receive count where
// receives are not traced.
func (t Totals) MarshalJSON() ([]byte, error) {
	b, err := marshal(t.Counters)
	if err != nil || (!t.CountersOnly && len(t.notGiven) == 0 && !t.recvUntraced) {
		return b, err
	}
	var drop map[string]bool
	switch {
	case t.CountersOnly && !t.kernelSQ:
		drop = unmeasuredCounters
	case t.CountersOnly:
		drop = totalsDropKernel
	}
	drop = union(drop, t.notGiven)
	if t.recvUntraced {
		drop = union(drop, recvDrop)
	}
	return dropKeys(b, drop)
}

type ratesJSON Rates

// MarshalJSON leaves out the CQE rate in counters mode, which counts CQEs
// per CQ only, and the rates of posts where none was traced.
func (r Rates) MarshalJSON() ([]byte, error) {
	b, err := marshal(ratesJSON(r))
	switch {
	case err != nil:
		return b, err
	case r.postsDirect:
		return dropKeys(b, directRates)
	case r.countersOnly:
		return dropKeys(b, unmeasuredRates)
	}
	return b, nil
}

// directRates are the rates a QP with no post traced leaves out: its span
// is its posts'.
var directRates = keySet("span_ns", "post_wrs_per_s", "post_calls_per_s", "cqes_per_s", "wrs_per_doorbell")

type savingsJSON Savings

// MarshalJSON leaves out the savings the counts did not allow to compute.
func (s Savings) MarshalJSON() ([]byte, error) {
	if s.absent {
		return []byte("null"), nil
	}
	b, err := marshal(savingsJSON(s))
	if err != nil || !s.unmodeled {
		return b, err
	}
	return dropKeys(b, unmeasuredPCIe)
}

// marshal is json.Marshal without HTML escaping, as report.WriteJSON writes.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// dropKeys rewrites a JSON object without the keys in drop, keeping the
// order.
func dropKeys(b []byte, drop map[string]bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, err
	}
	var out bytes.Buffer
	out.WriteByte('{')
	first := true
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if drop[k] {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// onQPCounters applies a QP's totals kept in the kernel (counters mode):
// totals since attach, they replace, not add.
func (a *Analyzer) onQPCounters(e *trace.QPCounters) {
	q := a.qpOfGen(e.PID, e.QPNum, e.QP, e.Gen, e.TimeNS)
	q.noteFound(FoundCounters)
	q.countersOnly = true
	a.countedRecvs(q, e)
	q.c.PostCalls, q.c.WRs, q.c.Inline, q.c.Signaled = e.PostCalls, e.WRs, e.Inline, e.Signaled
	if q.sigAll { // the kernel counts IBV_SEND_SIGNALED; sq_sig_all signals every WR
		q.c.Signaled = e.WRs
	}
	q.c.Doorbells, q.c.EINVAL, q.c.ENOMEM = e.Doorbells, e.EINVAL, e.ENOMEM
	q.c.OtherErrors = e.Errors - min(e.Errors, e.ENOMEM+e.EINVAL)
	q.c.InlineBytes, q.c.DMABytesPayload, q.c.DMAReadsPayload = e.InlineBytes, e.PayloadBytes, e.PayloadSGEs
	q.c.Cuts = Cuts{SGECutWRs: e.SGECutWRs, SGEsNotSummed: e.SGEsNotSummed, WalkCappedPosts: e.WalkCappedPosts}
	if e.TimeNS > q.lastNS {
		q.lastNS = e.TimeNS
	}
	a.kernApply(q, &e.SQ, e.TimeNS, true) // kernsq.go
}

// onCQCounters applies a CQ's totals kept in the kernel (counters mode):
// totals since attach, they replace, not add.
func (a *Analyzer) onCQCounters(e *trace.CQCounters) {
	c := a.cqOfGen(e.PID, e.CQ, e.Gen)
	if e.Polls > c.polls {
		c.notePolls(e.Polls-c.polls, e.TimeNS)
	}
	c.polls, c.cqes, c.empty = e.Polls, e.CQEs, e.Empty
	c.counted, c.lastNS = true, max(c.lastNS, e.TimeNS)
	c.exCQEs = e.ExCQEs
	c.noteSample(e.TimeNS)
	a.recv.kernel = true
}
