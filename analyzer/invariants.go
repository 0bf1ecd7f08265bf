package analyzer

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// wrapAt is where a count stops being a count: a uint64 this large is a
// subtraction that went below zero, not anything a trace can hold.
const wrapAt = 1 << 62

// Check returns every invariant of a report the snapshot breaks, none when
// its numbers can be trusted: no count wrapped, every percentage in
// 0..100, every span within the trace, occupancy within the depth (or a
// diagnosis saying why not), percentiles within the peak, signaled WRs
// within the WRs, every CQE matched or counted as unmatched, and totals
// equal to the sum of their QPs. The tests run it on every report they
// make; it also serves a snapshot read back from JSON.
func (s Snapshot) Check() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	span := s.LastNS - min(s.FirstNS, s.LastNS)
	if s.FirstNS > s.LastNS {
		bad("trace starts at %d ns after it ends at %d ns", s.FirstNS, s.LastNS)
	}
	checkNumbers("snapshot", reflect.ValueOf(s), bad)
	if tr := &s.TotalRates; s.Events > 0 && (tr.SpanNS != span && !tr.WhileTraced || tr.SpanNS > span) {
		bad("total rates span %d ns, the trace %d ns", tr.SpanNS, span)
	}
	checkSavings("total", &s.TotalPCIe, bad)
	var sum Counters
	for i := range s.QPs {
		q := &s.QPs[i]
		addCounters(&sum, &q.Counters)
		checkQP(&s, q, span, bad)
	}
	// counted per CQ
	sum.Polls, sum.EmptyPolls = s.Total.Polls, s.Total.EmptyPolls
	sum.CQEsPastBound, sum.CQEsPastBoundRecv, sum.PollRecordWCs = s.Total.CQEsPastBound, s.Total.CQEsPastBoundRecv, s.Total.PollRecordWCs
	if len(s.QPs) > 0 && sum != s.Total.Counters {
		bad("totals %+v are not the sum of the QPs' %+v", s.Total.Counters, sum)
	}
	for _, c := range s.CQs {
		checkCQ(&c, span, bad)
	}
	for _, d := range s.Diagnoses {
		if d.Count == 0 || d.FirstNS > d.LastNS || d.FirstNS < s.FirstNS || d.LastNS > s.LastNS {
			bad("diagnosis %s of QP %#x: %d times from %d to %d ns, outside the trace %d..%d ns",
				d.Kind, d.QPNum, d.Count, d.FirstNS, d.LastNS, s.FirstNS, s.LastNS)
		}
	}
	return errs
}

func checkQP(s *Snapshot, q *QP, span uint64, bad func(string, ...any)) {
	id := fmt.Sprintf("QP %#x (pid %d, gen %d)", q.QPNum, q.PID, q.Gen)
	c := &q.Counters
	for _, r := range []struct {
		what      string
		part, all uint64
	}{
		{"signaled WRs", c.Signaled, c.WRs},
		{"inline WRs", c.Inline, c.WRs},
		{"doorbells", c.Doorbells, c.PostCalls},
		{"doorbells", c.Doorbells, c.WRs},
		{"BlueFlame writes", c.BFWrites, c.Doorbells},
		{"error CQEs", c.CQEErrors, c.CQEsPolled},
		{"empty polls", c.EmptyPolls, c.Polls},
	} {
		if r.part > r.all {
			bad("%s: %d %s of %d", id, r.part, r.what, r.all)
		}
	}
	if q.Rates.SpanNS > span {
		bad("%s: rates over %d ns, longer than the trace's %d ns", id, q.Rates.SpanNS, span)
	}
	checkSavings(id, &q.PCIe, bad)
	checkNotGiven(id, q, bad)
	if q.CountersOnly {
		return // what follows needs per-call events
	}
	if q.PostsNotTraced {
		// its posts were not seen: no send figure but its completions
		// (left out of its JSON), and all of those match no WR
		if c.WRs != 0 || c.PostCalls != 0 || c.UnmatchedCQEs != c.CQEsPolled {
			bad("%s: posts not traced, yet %d WRs in %d post calls, %d of its %d CQEs matching none", id, c.WRs, c.PostCalls, c.UnmatchedCQEs, c.CQEsPolled)
		}
		return
	}
	// every polled CQE retired a signaled WR, flushed an unsignaled one,
	// completed a WR posted before the attach, or is counted as matching
	// none
	other := c.UnmatchedCQEs + c.FlushedUnsignaled + q.PreAttachCQEs
	if other > c.CQEsPolled || c.CQEsPolled-other > c.Signaled {
		bad("%s: %d CQEs polled, %d unmatched, %d flushed unsignaled, %d of WRs posted before the attach, for %d signaled WRs",
			id, c.CQEsPolled, c.UnmatchedCQEs, c.FlushedUnsignaled, q.PreAttachCQEs, c.Signaled)
	}
	if q.Model == "" || q.CompletionsNotTraced {
		// no model of the HCA or of what bounds the WRs outstanding
		// (a provider other than mlx5's holds what it holds), or no
		// completion seen: the occupancy counts WRs posted
		checkHist(id, q, bad)
		return
	}
	if c.PostCalls > 0 && c.DMAReadsWQE+c.BFWrites != c.Doorbells {
		bad("%s: %d WQE fetches and %d BlueFlame writes for %d doorbells", id, c.DMAReadsWQE, c.BFWrites, c.Doorbells)
	}
	o := &q.Occupancy
	if o.Now != q.Outstanding || o.Now > o.Peak || o.Peak != c.PeakOutstanding || o.Depth != uint64(q.MaxSendWR) {
		bad("%s: occupancy now %d (outstanding %d), peak %d (%d), depth %d (max_send_wr %d)",
			id, o.Now, q.Outstanding, o.Peak, c.PeakOutstanding, o.Depth, q.MaxSendWR)
	}
	checkHist(id, q, bad)
	if d := uint64(q.MaxSendWR); (q.CapsKnown || q.CapsInferred) && c.PeakOutstanding > d && !hasDiag(s, q, DiagCallsNotTraced) {
		bad("%s: %d WRs outstanding at the peak of a queue of %d, and no diagnosis says why", id, c.PeakOutstanding, d)
	}
}

// checkNotGiven: a figure of the counters the QP's provider model does not
// give is none (0, left out of its JSON and nothing in the totals), and a
// model without PCIe figures has no savings.
func checkNotGiven(id string, q *QP, bad func(string, ...any)) {
	ng := q.notModeled()
	if len(ng) == 0 {
		return
	}
	v, t := reflect.ValueOf(q.Counters), reflect.TypeOf(q.Counters)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if f := v.Field(i); ng[name] && f.Kind() == reflect.Uint64 && f.Uint() != 0 {
			bad("%s: %s %d, a figure the model of provider %s does not give", id, name, f.Uint(), q.Provider)
		}
	}
	if ng["pcie"] && !q.PCIe.absent && q.PCIe != (Savings{}) {
		bad("%s: PCIe savings, which the model of provider %s does not give", id, q.Provider)
	}
}

// checkHist checks the occupancy after each post call: percentiles and
// buckets within the peak, one count per post call.
func checkHist(id string, q *QP, bad func(string, ...any)) {
	o, c := &q.Occupancy, &q.Counters
	if o.P50 > o.P99 || o.P99 > o.Peak || o.Mean > float64(o.Peak) {
		bad("%s: occupancy p50 %d, p99 %d, mean %.1f over the peak %d", id, o.P50, o.P99, o.Mean, o.Peak)
	}
	var n uint64
	for _, b := range o.Histogram {
		n += b.Count
		if b.Lo > b.Hi || b.Hi > o.Peak || b.Count == 0 {
			bad("%s: occupancy bucket %d..%d (%d) outside 0..%d", id, b.Lo, b.Hi, b.Count, o.Peak)
		}
	}
	if n != c.PostCalls-min(c.Aborted+c.EdgePosts, c.PostCalls) {
		bad("%s: occupancy histogram of %d post calls, %d made (%d aborted, %d at windows' edges)", id, n, c.PostCalls, c.Aborted, c.EdgePosts)
	}
}

func hasDiag(s *Snapshot, q *QP, k DiagKind) bool {
	for _, d := range s.Diagnoses {
		if d.Kind == k.String() && d.PID == q.PID && d.QPNum == q.QPNum {
			return true
		}
	}
	return false
}

// checkSavings checks the PCIe savings: a saving may be negative, a cost
// (BlueFlame writes a 192 B WQE in three MMIO writes, one transaction more
// than a doorbell and a WQE fetch), but never more than the baseline
// itself, and never more than all of it.
func checkSavings(id string, p *Savings, bad func(string, ...any)) {
	if p.unmodeled || p.absent {
		return
	}
	for _, v := range []struct {
		what string
		pct  float64
	}{{"transactions", p.TransactionsPct}, {"bytes", p.BytesPct}} {
		if !(v.pct >= -100 && v.pct <= 100) {
			bad("%s: PCIe %s saved %.1f%%", id, v.what, v.pct)
		}
	}
	if p.BytesSaved > int64(min(p.Baseline.Bytes, math.MaxInt64)) || -p.BytesSaved > int64(min(p.Baseline.Bytes, math.MaxInt64)) ||
		p.Actual.Transactions() > 2*p.Baseline.Transactions() {
		bad("%s: PCIe %d bytes saved of %d, %d transactions against a baseline of %d",
			id, p.BytesSaved, p.Baseline.Bytes, p.Actual.Transactions(), p.Baseline.Transactions())
	}
}

// savingsFields may be negative (checkSavings bounds them).
var savingsFields = keySet("TransactionsPct", "BytesPct", "BytesSaved")

func checkCQ(c *CQ, span uint64, bad func(string, ...any)) {
	// (a QP's CQEs are not summed here: a send completion may come
	// from a CQ other than the one its QP's create named, in a damaged
	// recording, and is the QP's all the same)
	if c.EmptyPolls > c.Polls || c.UnmatchedExCQEs+c.CQEsPastBound > c.CQEs || c.CQEsPastBoundRecv > c.CQEsPastBound || c.SpanNS > span {
		bad("CQ %#x (pid %d, gen %d): %d empty of %d polls, %d unmatched and %d past the poll record bound (%d of them receives) of %d CQEs, over %d ns (trace %d ns)",
			c.CQ, c.PID, c.Gen, c.EmptyPolls, c.Polls, c.UnmatchedExCQEs, c.CQEsPastBound, c.CQEsPastBoundRecv, c.CQEs, c.SpanNS, span)
	}
}

// checkNumbers reports every count that wrapped below zero and every float
// that is not a finite non-negative number, by its path.
func checkNumbers(path string, v reflect.Value, bad func(string, ...any)) {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if f := t.Field(i); f.IsExported() && !savingsFields[f.Name] {
				checkNumbers(path+"."+t.Field(i).Name, v.Field(i), bad)
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			checkNumbers(path, v.Elem(), bad)
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkNumbers(fmt.Sprintf("%s[%d]", path, i), v.Index(i), bad)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			checkNumbers(fmt.Sprintf("%s[%v]", path, k), v.MapIndex(k), bad)
		}
	case reflect.Uint64:
		if v.Uint() >= wrapAt {
			bad("%s = %d: a count wrapped below zero", path, v.Uint())
		}
	case reflect.Int64, reflect.Int32:
		if v.Int() < 0 && !strings.HasSuffix(path, ".ExitCode") { // -1: killed by a signal
			bad("%s = %d: negative", path, v.Int())
		}
	case reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			bad("%s = %v: not a measure", path, f)
		}
	}
}

// modeVaries are the JSON fields of a QP two runs of one workload may
// differ in whatever the mode: the process, the addresses of its CQs and
// SRQ, and times.
var modeVaries = keySet("pid", "send_cq", "recv_cq", "srq", "counters_only", "rates")

// CheckModes compares a counters-mode snapshot with an events-mode one of
// the same deterministic run: their QPs, in order, must agree on every
// field both report (the counters mode leaves out what it does not
// measure), times and addresses aside.
func CheckModes(events, counters Snapshot) []error {
	if len(events.QPs) != len(counters.QPs) {
		return []error{fmt.Errorf("events mode saw %d QPs, counters mode %d", len(events.QPs), len(counters.QPs))}
	}
	var errs []error
	for i := range events.QPs {
		e, err := qpFields(events.QPs[i])
		if err != nil {
			return []error{err}
		}
		c, err := qpFields(counters.QPs[i])
		if err != nil {
			return []error{err}
		}
		for k, cv := range c {
			if ev, ok := e[k]; ok && ev != cv {
				errs = append(errs, fmt.Errorf("QP %#x: %s is %s in events mode, %s in counters mode",
					events.QPs[i].QPNum, k, ev, cv))
			}
		}
		if counters.QPs[i].KernelSQ {
			errs = append(errs, sameDiagnoses(events, counters, events.QPs[i].QPNum)...)
		}
	}
	return errs
}

// needHistory are the diagnoses only events mode gives: they need each
// call (the occupancy's trend, each WR's flags on an sq_sig_all QP,
// completions matched to WRs, the receive side's completions, a CQ's
// polls after an overrun), see kernsq.go.
var needHistory = keySet("occupancy_trending_full", "sig_all_ignores_signaled_flag",
	"calls_not_traced", "inline_unsupported", "rq_starved", "rnr_retry_exceeded",
	"sq_overflow_rnr_retry", "cq_overrun")

// pollKinds are the overflows told apart by the send CQ's polls since the
// oldest signaled WR outstanding: counters mode says sq_overflow_inferred
// instead where its CQ's totals were not flushed since (kernsq.go).
var pollKinds = keySet("sq_overflow_cq_not_polled", "sq_overflow_polls_too_rare", "sq_overflow_completions_slow")

// sameDiagnoses requires of the QP numbered qpn the same kinds of
// diagnosis in both modes, but those that need each call.
func sameDiagnoses(events, counters Snapshot, qpn uint32) []error {
	counted := map[string]bool{}
	for _, d := range counters.Diagnoses {
		if d.QPNum == qpn {
			counted[d.Kind] = true
		}
	}
	kinds := func(s Snapshot) map[string]bool {
		m := map[string]bool{}
		for _, d := range s.Diagnoses {
			k := d.Kind
			if d.QPNum != qpn || needHistory[k] {
				continue
			}
			if pollKinds[k] && counted["sq_overflow_inferred"] {
				k = "sq_overflow_inferred"
			}
			m[k] = true
		}
		return m
	}
	e, c := kinds(events), kinds(counters)
	var errs []error
	for k := range e {
		if !c[k] {
			errs = append(errs, fmt.Errorf("QP %#x: diagnosis %s in events mode, not in counters mode", qpn, k))
		}
	}
	for k := range c {
		if !e[k] {
			errs = append(errs, fmt.Errorf("QP %#x: diagnosis %s in counters mode, not in events mode", qpn, k))
		}
	}
	return errs
}

// qpFields flattens a QP's JSON into path -> value, without modeVaries.
func qpFields(q QP) (map[string]string, error) {
	b, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var flat func(string, any)
	flat = func(p string, v any) {
		if o, ok := v.(map[string]any); ok {
			for k, x := range o {
				if !modeVaries[k] {
					flat(p+k+".", x)
				}
			}
			return
		}
		out[p[:len(p)-1]] = fmt.Sprint(v)
	}
	flat("", m)
	return out, nil
}
