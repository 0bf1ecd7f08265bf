// Package export converts a recording's events into timelines other tools
// open: Chrome trace-event JSON today (Perfetto and chrome://tracing read
// it). An exporter is a sink: it takes events in order, as a session or a
// recording reader delivers them, and asks its own analyzer for the
// occupancy each event leaves. See docs/design.md.
package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// chromeEvent is one entry of the Chrome trace-event format's traceEvents.
type chromeEvent struct {
	Name string      `json:"name"`
	Cat  string      `json:"cat,omitempty"`
	Ph   string      `json:"ph"`
	Ts   json.Number `json:"ts"`
	Dur  json.Number `json:"dur,omitempty"`
	Pid  uint32      `json:"pid"`
	Tid  uint32      `json:"tid"`
	S    string      `json:"s,omitempty"` // instant scope: t(hread), p(rocess), g(lobal)
	Args any         `json:"args,omitempty"`
}

// usec formats ns as microseconds with ns precision, without rounding
// through a float.
func usec(ns uint64) json.Number {
	b := strconv.AppendUint(nil, ns/1000, 10)
	frac := ns % 1000
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return json.Number(b)
}

func hex(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }

// chromeWriter streams a trace-event JSON object: nothing is held but the
// set of processes already named.
type chromeWriter struct {
	bw     *bufio.Writer
	enc    *json.Encoder
	n      int
	counts map[string]int // events written, by phase
	named  map[uint32]bool
	target string
	err    error
}

func newChromeWriter(w io.Writer, meta map[string]string, target string) *chromeWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	c := &chromeWriter{bw: bw, enc: json.NewEncoder(bw), counts: map[string]int{}, named: map[uint32]bool{}, target: target}
	c.enc.SetEscapeHTML(false)
	m, _ := json.Marshal(meta)
	fmt.Fprintf(bw, "{\"displayTimeUnit\":\"ns\",\"otherData\":%s,\"traceEvents\":[\n", m)
	return c
}

func (c *chromeWriter) write(ev *chromeEvent) {
	if c.err != nil {
		return
	}
	if !c.named[ev.Pid] && ev.Ph != "M" {
		c.named[ev.Pid] = true
		name := fmt.Sprintf("pid %d", ev.Pid)
		if c.target != "" {
			name = fmt.Sprintf("%s (pid %d)", c.target, ev.Pid)
		}
		c.write(&chromeEvent{Name: "process_name", Ph: "M", Ts: "0", Pid: ev.Pid, Args: map[string]string{"name": name}})
	}
	if c.n > 0 {
		c.bw.WriteString(",")
	}
	if err := c.enc.Encode(ev); err != nil {
		c.err = err
		return
	}
	c.n++
	c.counts[ev.Ph]++
}

func (c *chromeWriter) close() error {
	if c.err != nil {
		return c.err
	}
	c.bw.WriteString("]}\n")
	return c.bw.Flush()
}

// Chrome turns events into Chrome trace events, asking its analyzer for
// the occupancy each post and poll leaves.
type Chrome struct {
	cw  *chromeWriter
	a   *analyzer.Analyzer
	qps []uint32 // scratch: QPs a poll completed WRs of
	// the QPs of each send CQ: an extended poll's completions do not say
	// their QP, so its occupancy counters are all of them
	cqQPs map[[2]uint64][]uint32
}

// ChromeOptions describe the trace being written.
type ChromeOptions struct {
	Recording string           // the recording's file name
	Version   string           // of the sqscope writing the export
	Info      trace.FileInfo   // the recording's header
	Model     analyzer.Options // the HCA model the occupancy is rebuilt with
}

// NewChrome starts a Chrome trace-event JSON object on w; its otherData
// says where the events come from.
func NewChrome(w io.Writer, o ChromeOptions) *Chrome {
	fi := &o.Info
	meta := map[string]string{"recording": o.Recording, "sqscope_version": o.Version, "clock": "CLOCK_MONOTONIC"}
	for k, v := range map[string]string{"hostname": fi.Hostname, "kernel": fi.Kernel, "target": fi.Target, "recorded_by": fi.Version} {
		if v != "" {
			meta[k] = v
		}
	}
	x := &Chrome{cw: newChromeWriter(w, meta, fi.Target), cqQPs: map[[2]uint64][]uint32{}}
	model := o.Model
	model.OnDiagnosis = x.diagnosis
	x.a = analyzer.New(model)
	return x
}

// Close ends the JSON object; the error is the first write error.
func (x *Chrome) Close() error { return x.cw.close() }

// Stats counts the trace events written, by kind.
type Stats struct {
	Events, Counters, Slices, Instants int
}

// Stats is what was written so far.
func (x *Chrome) Stats() Stats {
	c := x.cw.counts
	return Stats{Events: x.cw.n, Counters: c["C"], Slices: c["X"], Instants: c["i"]}
}

func (x *Chrome) counter(h *trace.Header, qpNum uint32) {
	out, ok := x.a.Outstanding(h.PID, qpNum)
	if !ok {
		return
	}
	x.cw.write(&chromeEvent{Name: "SQ occupancy QP " + hex(uint64(qpNum)), Cat: "sq", Ph: "C", Ts: usec(h.TimeNS),
		Pid: h.PID, Tid: h.TID, Args: map[string]uint64{"outstanding": out}})
}

// slice is a call from entry to return; a call without its entry time is
// drawn with no duration at its return.
func slice(name, cat string, h *trace.Header, entryNS uint64, args any) *chromeEvent {
	start, dur := h.TimeNS, uint64(0)
	if entryNS != 0 && entryNS <= h.TimeNS {
		start, dur = entryNS, h.TimeNS-entryNS
	}
	return &chromeEvent{Name: name, Cat: cat, Ph: "X", Ts: usec(start), Dur: usec(dur), Pid: h.PID, Tid: h.TID, Args: args}
}

// Event draws one event.
func (x *Chrome) Event(ev trace.Event) {
	x.a.Ingest(ev)
	switch e := ev.(type) {
	case *trace.QPCreate:
		x.counter(&e.Header, e.QPNum)
		if k := [2]uint64{uint64(e.PID), e.SendCQ}; !contains(x.cqQPs[k], e.QPNum) {
			x.cqQPs[k] = append(x.cqQPs[k], e.QPNum)
		}
	case *trace.Post:
		name := "ibv_post_send"
		if e.API == trace.APIWR {
			name = "ibv_wr_complete"
			if e.Aborted {
				name = "ibv_wr_abort"
			}
		}
		args := map[string]any{"qp_num": hex(uint64(e.QPNum)), "n": e.NumWRs(), "accepted": e.Accepted, "ret": e.Ret}
		if e.WalkCapped { // n and accepted are lower bounds
			args["walk_capped"] = true
		}
		var notSummed int
		for i := range e.WRs {
			notSummed += int(e.WRs[i].SGEsNotSummed)
		}
		if notSummed > 0 { // the WRs' byte counts are lower bounds
			args["sges_not_summed"] = notSummed
		}
		x.cw.write(slice(name, "post", &e.Header, e.EntryNS, args))
		if e.Ret != 0 {
			x.cw.write(&chromeEvent{Name: "post failed: " + ibv.ErrnoName(e.Ret), Cat: "error", Ph: "i", S: "t",
				Ts: usec(e.TimeNS), Pid: e.PID, Tid: e.TID, Args: map[string]any{
					"qp_num": hex(uint64(e.QPNum)), "ret": e.Ret, "failed_wr_index": e.Accepted}})
		}
		if e.Accepted > 0 && !e.Aborted {
			x.counter(&e.Header, e.QPNum)
		}
	case *trace.Poll:
		if e.Ret == 0 {
			return
		}
		name := "ibv_poll_cq"
		if e.Ex {
			name = "ibv_start_poll..ibv_end_poll"
		}
		x.cw.write(slice(name, "poll", &e.Header, e.EntryNS, map[string]any{
			"cq": hex(e.CQ), "ret": e.Ret, "max": e.Max}))
		if e.Ret < 0 {
			x.cw.write(&chromeEvent{Name: "poll_cq failed", Cat: "error", Ph: "i", S: "t", Ts: usec(e.TimeNS),
				Pid: e.PID, Tid: e.TID, Args: map[string]any{"cq": hex(e.CQ), "ret": e.Ret}})
		}
		x.qps = x.qps[:0]
		if e.Ex {
			x.qps = append(x.qps, x.cqQPs[[2]uint64{uint64(e.PID), e.CQ}]...)
		}
		for i := range e.WCs {
			wc := &e.WCs[i]
			if wc.Status != ibv.WCSuccess {
				x.cw.write(&chromeEvent{Name: "error CQE", Cat: "error", Ph: "i", S: "t", Ts: usec(e.TimeNS),
					Pid: e.PID, Tid: e.TID, Args: map[string]any{"qp_num": hex(uint64(wc.QPNum)), "wr_id": wc.ID,
						"status": wc.Status, "opcode": wc.Opcode}})
			}
			if e.Ex || ibv.IsRecvWC(wc.Opcode) || contains(x.qps, wc.QPNum) {
				continue // no QP said, receive completion, or QP already listed
			}
			x.qps = append(x.qps, wc.QPNum)
		}
		for _, qpn := range x.qps {
			x.counter(&e.Header, qpn)
		}
	case *trace.Lost:
		x.cw.write(&chromeEvent{Name: fmt.Sprintf("%d events lost", e.Count), Cat: "error", Ph: "i", S: "g",
			Ts: usec(e.TimeNS), Pid: e.PID, Tid: e.TID, Args: map[string]uint64{"lost": e.Count}})
	}
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// diagnosis draws a diagnosis, when first made, as a process-wide instant.
func (x *Chrome) diagnosis(d analyzer.Diagnosis) {
	args := map[string]any{"qp_num": hex(uint64(d.QPNum)), "severity": d.Severity, "message": d.Message, "fix": d.Fix}
	for k, v := range d.Evidence {
		args[k] = v
	}
	x.cw.write(&chromeEvent{Name: "diagnosis: " + d.Kind, Cat: "diagnosis", Ph: "i", S: "p", Ts: usec(d.FirstNS),
		Pid: d.PID, Tid: d.PID, Args: args})
}
