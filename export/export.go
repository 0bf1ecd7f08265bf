// Package export converts a recording's events into timelines other tools
// open: Perfetto's native protobuf trace and Chrome trace-event JSON. An
// Exporter is a sink: it takes events in order, as a session or a
// recording reader delivers them, keeps its own analyzer for the occupancy
// each event leaves, applies the filters (a time window, QPs, processes)
// and folds runs of failed posts into one slice each; a format writer
// draws what is left. Nothing is held per event: memory does not grow
// with the recording. See docs/design.md.
package export

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// Format is an output format.
type Format string

const (
	FormatPerfetto Format = "perfetto" // Perfetto's protobuf trace
	FormatChrome   Format = "chrome"   // Chrome trace-event JSON
)

// Defaults of Options.
const (
	DefaultFold     = 10 * time.Millisecond
	DefaultRateStep = 100 * time.Millisecond
)

// Options describe the export.
type Options struct {
	Recording string           // the recording's file name
	Version   string           // of the sqscope writing the export
	Info      trace.FileInfo   // the recording's header
	Model     analyzer.Options // the HCA model the occupancy is rebuilt with
	Filter    Filter
	// Fold: failed posts of a QP with the same cause, each less than Fold
	// after the one before, become one slice.
	Fold time.Duration
	// RateStep is the period of the per-QP rate counters (post
	// failures/s; with Rates, doorbells/s, inline share and PCIe bytes
	// saved/s).
	RateStep time.Duration
	Rates    bool
	// Instants: a post or poll whose entry time was not recorded (no
	// --call-times) is drawn as an instant with its arguments; without
	// it, only by the counters it moves.
	Instants bool
	// Progress, when set, gets a line a second about an export that has
	// run for more than a second; Offset and Size say how much of the
	// recording has been read.
	Progress io.Writer
	Offset   func() int64
	Size     int64 // default: the size of the file Recording names
}

// Stats count what was written.
type Stats struct {
	Counters int // counter samples
	Slices   int
	Instants int
	Bursts   int   // slices or instants of folded post failures
	Folded   int64 // failed post calls folded into them
	Selected int64 // recorded events the filters selected
}

// Events counts the trace events written.
func (s Stats) Events() int { return s.Counters + s.Slices + s.Instants }

type qpKey struct{ pid, qpn uint32 }

// qpState is what the exporter keeps per QP.
type qpState struct {
	qpKey
	sendCQ, recvCQ uint64
	gone           bool // destroyed
	open           bool // b holds a burst
	b              burst
	// failed calls in the current rate window; failing: the last window
	// had some, so a zero follows when they stop
	fails   uint64
	failing bool
	posted  bool // posts in the current rate window
	rateOn  bool // the rate counters are not at zero
	prev    analyzer.Counters
	prevSav int64
	errs    [6]uint64 // the analyzer's failure counters by cause
	tracks  trackSlots
}

// Exporter is the sink that writes a timeline.
type Exporter struct {
	o        Options
	tl       timeline
	a        *analyzer.Analyzer
	w        window
	resolved bool
	err      error               // the filter could not be applied
	started  bool                // the window began (baseline counters written)
	ended    bool                // the window ended
	qps      map[uint64]*qpState // by pid<<32 | QP number
	names    procNames           // processes' command names, shared with tl
	order    []*qpState
	last     *qpState // the QP of the last post, to skip the map
	diags    []analyzer.Diagnosis
	stats    Stats
	firstNS  uint64
	lastNS   uint64
	tickNS   uint64 // the end of the current rate window
	step     uint64
	fold     uint64
	seen     int64 // events read
	scratch  item
	retired  []uint32
	prog     progress
}

// New starts an export in format f on w.
func New(w io.Writer, f Format, o Options) (*Exporter, error) {
	if o.Fold <= 0 {
		o.Fold = DefaultFold
	}
	if o.RateStep <= 0 {
		o.RateStep = DefaultRateStep
	}
	x := &Exporter{o: o, qps: map[uint64]*qpState{}, step: uint64(o.RateStep), fold: uint64(o.Fold), names: procNames{}}
	switch f {
	case FormatChrome:
		x.tl = newChrome(w, &o, x.names)
	case FormatPerfetto:
		x.tl = newPerfetto(w, &o, x.names)
	default:
		return nil, fmt.Errorf("unknown format %q (want perfetto or chrome)", f)
	}
	model := o.Model
	model.OnDiagnosis = func(d analyzer.Diagnosis) { x.diags = append(x.diags, d) }
	model.HistoryLen = -1 // the export draws its own
	x.a = analyzer.New(model)
	if o.Size == 0 && o.Recording != "" {
		if st, err := os.Stat(o.Recording); err == nil {
			o.Size = st.Size()
		}
	}
	x.prog = progress{w: o.Progress, offset: o.Offset, size: o.Size, start: time.Now()}
	return x, nil
}

// Stats is what was written so far.
func (x *Exporter) Stats() Stats { return x.stats }

// Event takes the next event of the recording.
func (x *Exporter) Event(ev trace.Event) {
	h := ev.Hdr()
	t := h.TimeNS
	x.seen++
	if x.seen&0x3fff == 0 {
		x.prog.report(x.seen)
	}
	if !x.resolved {
		x.resolve(t)
	}
	if x.err != nil {
		return
	}
	if x.firstNS == 0 || t < x.firstNS {
		x.firstNS = t
	}
	x.lastNS = max(x.lastNS, t)
	if t >= x.tickNS {
		x.tick(t)
	}
	if !x.started && t >= x.w.from {
		x.start()
	}
	if !x.ended && x.w.to != 0 && t > x.w.to {
		x.end()
	}
	x.a.Ingest(ev)
	draw := x.started && !x.ended
	switch e := ev.(type) {
	case *trace.QPCreate:
		q := x.qp(e.PID, e.QPNum)
		q.sendCQ, q.recvCQ, q.gone = e.SendCQ, e.RecvCQ, false
		if draw && x.w.qp(e.PID, e.QPNum) {
			x.stats.Selected++
			x.sample(t, e.PID, e.QPNum)
		}
	case *trace.QPDestroy:
		if q := x.qps[uint64(e.PID)<<32|uint64(e.QPNum)]; q != nil {
			x.closeBurst(q)
			q.gone = q.gone || e.Ret == 0
		}
	case *trace.Post:
		x.post(e, draw)
	case *trace.Poll:
		if draw && e.Ret != 0 {
			x.poll(e)
		}
	case *trace.End:
		// the cut: where every probe stopped at once, the target running on
		if e.CutNS != 0 && x.started && x.w.inTime(e.CutNS) {
			x.stats.Selected++
			x.emit(&item{kind: itemGlobal, name: "trace cut: every probe stopped here", cat: "trace",
				pid: e.PID, tid: e.PID, ts: e.CutNS, args: []arg{uintArg("posts_in_flight_unseen", e.InFlightUnseen)}})
		}
	case *trace.Proc:
		x.names.note(e)
	case *trace.Lost:
		if draw && len(x.w.qps) == 0 && (len(x.w.pids) == 0 || x.w.pid(e.PID)) {
			x.stats.Selected++
			x.emit(&item{kind: itemGlobal, name: fmt.Sprintf("%d events lost", e.Count), cat: "error",
				pid: e.PID, tid: e.TID, ts: t, args: []arg{uintArg("lost", e.Count)}})
		}
	}
	if len(x.diags) > 0 {
		for _, d := range x.diags {
			if draw && x.w.qp(d.PID, d.QPNum) && x.w.inTime(d.FirstNS) {
				x.diagnosis(d)
			}
		}
		x.diags = x.diags[:0]
	}
}

func (x *Exporter) resolve(firstNS uint64) {
	x.resolved = true
	x.w, x.err = x.o.Filter.resolve(&x.o.Info, firstNS)
	start := x.o.Info.StartMonoNS
	if start == 0 || start > firstNS {
		start = firstNS
	}
	x.tickNS = start + x.step
}

func (x *Exporter) qp(pid, qpn uint32) *qpState {
	if q := x.last; q != nil && q.pid == pid && q.qpn == qpn {
		return q
	}
	k := uint64(pid)<<32 | uint64(qpn)
	q := x.qps[k]
	if q == nil {
		q = &qpState{qpKey: qpKey{pid, qpn}}
		x.qps[k] = q
		x.order = append(x.order, q)
	}
	x.last = q
	return q
}

// start writes, at the start of the window, the occupancy every QP
// selected has by then.
func (x *Exporter) start() {
	x.started = true
	for _, q := range x.order {
		if x.w.from > 0 && x.w.qp(q.pid, q.qpn) {
			x.sample(x.w.from, q.pid, q.qpn)
		}
		if x.o.Rates {
			q.prev, _ = x.a.QPCounters(q.pid, q.qpn)
			q.prevSav = q.prev.Savings().BytesSaved
		}
	}
}

// end closes what is open when the window ends.
func (x *Exporter) end() {
	for _, q := range x.order {
		x.closeBurst(q)
	}
	x.ended = true
}

// sample writes a QP's occupancy at t.
func (x *Exporter) sample(t uint64, pid, qpn uint32) {
	if out, ok := x.a.Outstanding(pid, qpn); ok {
		x.stats.Counters++
		x.tl.counter(t, counterValue{pid: pid, qpn: qpn, kind: ctrOutstanding, v: float64(out), slot: &x.qp(pid, qpn).tracks})
	}
}

func (x *Exporter) emit(it *item) {
	switch it.kind {
	case itemSlice:
		x.stats.Slices++
	default:
		x.stats.Instants++
	}
	x.stats.Counters += len(it.counters)
	x.tl.item(it)
}

// timed makes the item a slice from entry to ret, or an instant at ret
// when the entry time was not recorded.
func timed(it *item, entry, ret uint64) {
	it.kind, it.ts, it.dur = itemInstant, ret, 0
	if entry != 0 && entry < ret {
		it.kind, it.ts, it.dur = itemSlice, entry, ret-entry
	}
}

// outstanding adds the QP's occupancy to the item's counters.
func (x *Exporter) outstanding(it *item, pid, qpn uint32) {
	if out, ok := x.a.Outstanding(pid, qpn); ok {
		it.counters = append(it.counters, counterValue{pid: pid, qpn: qpn, kind: ctrOutstanding, v: float64(out), slot: &x.qp(pid, qpn).tracks})
	}
}

// post draws a post call; failed ones fold into bursts.
func (x *Exporter) post(e *trace.Post, draw bool) {
	q := x.qp(e.PID, e.QPNum)
	var cause string
	if e.Ret != 0 {
		cause = x.cause(q, e.Ret)
	}
	if !draw || !x.w.qp(e.PID, e.QPNum) {
		return
	}
	x.stats.Selected++
	took := e.Accepted > 0 && !e.Aborted
	if e.EntryNS != 0 && e.EntryNS < x.w.from {
		// a call is in the window when all of it is; what it left is
		if took {
			x.sample(e.TimeNS, e.PID, e.QPNum)
		}
		return
	}
	if e.Ret != 0 {
		x.failed(q, e, cause)
		if took {
			x.sample(e.TimeNS, e.PID, e.QPNum)
		}
		return
	}
	x.closeBurst(q)
	q.posted = true
	if !x.o.Instants && (e.EntryNS == 0 || e.EntryNS >= e.TimeNS) {
		if took {
			x.sample(e.TimeNS, e.PID, e.QPNum)
		}
		return
	}
	it := &x.scratch
	*it = item{name: "ibv_post_send", cat: "post", pid: e.PID, tid: e.TID, args: it.args[:0], counters: it.counters[:0]}
	if e.API == trace.APIWR {
		it.name = "ibv_wr_complete"
		if e.Aborted {
			it.name = "ibv_wr_abort"
		}
	}
	timed(it, e.EntryNS, e.TimeNS)
	it.args = append(it.args, hexArg("qp_num", uint64(e.QPNum)), uintArg("n", uint64(e.NumWRs())))
	if e.Accepted != e.NumWRs() {
		it.args = append(it.args, uintArg("accepted", uint64(e.Accepted)))
	}
	if e.WalkCapped { // n and accepted are lower bounds
		it.args = append(it.args, boolArg("walk_capped", true))
	}
	var notSummed uint64
	for i := range e.WRs {
		notSummed += uint64(e.WRs[i].SGEsNotSummed)
	}
	if notSummed > 0 { // the WRs' byte counts are lower bounds
		it.args = append(it.args, uintArg("sges_not_summed", notSummed))
	}
	if took {
		x.outstanding(it, e.PID, e.QPNum)
	}
	x.emit(it)
}

// causes name the analyzer's failure counters, in the order qpState.errs
// keeps them.
var causes = [6]string{"SQ full", "inline data too big", "too many SGEs", "invalid WR", "cause unknown", "other error"}

// cause is why the analyzer says the post it just took failed.
func (x *Exporter) cause(q *qpState, ret int32) string {
	c, ok := x.a.QPCounters(q.pid, q.qpn)
	if !ok {
		return ""
	}
	now := [6]uint64{c.ENOMEMSQFull, c.ENOMEMInline, c.ENOMEMSGE, c.EINVAL, c.ENOMEMUnknown, c.OtherErrors}
	cause := ""
	for i := range now {
		if now[i] != q.errs[i] && cause == "" {
			cause = causes[i]
		}
	}
	q.errs = now
	if cause == "other error" || cause == "invalid WR" && ret == ibv.EINVAL {
		return ""
	}
	return cause
}

// causeTitle names a failure: the errno and, when the analyzer told it,
// the cause.
func causeTitle(ret int32, cause string) string {
	if cause == "" {
		return ibv.ErrnoName(ret)
	}
	return ibv.ErrnoName(ret) + " (" + cause + ")"
}

// failed folds a failed post into its QP's burst.
func (x *Exporter) failed(q *qpState, e *trace.Post, cause string) {
	q.fails++
	start := e.TimeNS
	if e.EntryNS != 0 && e.EntryNS < start {
		start = e.EntryNS
	}
	b := &q.b
	if q.open && (b.ret != e.Ret || b.cause != cause || start > b.last+x.fold) {
		x.closeBurst(q)
	}
	if !q.open {
		q.open = true
		*b = burst{pid: e.PID, tid: e.TID, qpn: e.QPNum, ret: e.Ret, cause: cause, first: start}
	}
	b.last = max(b.last, e.TimeNS)
	b.count++
	b.refused += uint64(e.NumWRs() - min(e.Accepted, e.NumWRs()))
}

func (x *Exporter) closeBurst(q *qpState) {
	if !q.open {
		return
	}
	q.open = false
	x.stats.Bursts++
	x.stats.Folded += int64(q.b.count)
	if q.b.count == 1 && q.b.first == q.b.last {
		x.stats.Instants++
	} else {
		x.stats.Slices++
	}
	x.tl.burst(&q.b)
}

// poll draws a poll that returned completions or an error. An extended
// poll session is one slice; its completions name no QP, so it moves the
// occupancy of every QP its CQ is the send CQ of.
func (x *Exporter) poll(e *trace.Poll) {
	x.retired = x.retired[:0]
	any := false
	if e.Ex {
		for _, q := range x.order {
			if q.pid == e.PID && q.sendCQ == e.CQ && !q.gone && x.w.qp(q.pid, q.qpn) {
				x.retired = append(x.retired, q.qpn)
			}
		}
		any = len(x.retired) > 0 || len(e.WCs) > 0 && len(x.w.qps) == 0 && x.w.pid(e.PID)
	}
	for i := range e.WCs {
		wc := &e.WCs[i]
		if e.Ex || !x.w.qp(e.PID, wc.QPNum) {
			continue
		}
		any = true
		if !ibv.IsRecvWC(wc.Opcode) && !slices.Contains(x.retired, wc.QPNum) {
			x.retired = append(x.retired, wc.QPNum)
		}
	}
	if len(e.WCs) == 0 {
		any = x.w.pid(e.PID) && (len(x.w.qps) == 0 || x.cqSelected(e.PID, e.CQ))
	}
	if !any {
		return
	}
	x.stats.Selected++
	if e.EntryNS != 0 && e.EntryNS < x.w.from || !x.o.Instants && (e.EntryNS == 0 || e.EntryNS >= e.TimeNS) && e.Ret > 0 {
		// drawn by the counters it moves: untimed, or begun before the window
		for _, qpn := range x.retired {
			x.sample(e.TimeNS, e.PID, qpn)
		}
	} else {
		x.pollItem(e)
	}
	if e.Ret < 0 {
		x.emit(&item{kind: itemInstant, name: "poll_cq failed", cat: "error", pid: e.PID, tid: e.TID, ts: e.TimeNS,
			args: []arg{hexArg("cq", e.CQ), intArg("ret", int64(e.Ret))}})
	}
	for i := range e.WCs {
		wc := &e.WCs[i]
		if wc.Status != ibv.WCSuccess && (e.Ex || x.w.qp(e.PID, wc.QPNum)) {
			x.emit(&item{kind: itemInstant, name: "error CQE", cat: "error", pid: e.PID, tid: e.TID, ts: e.TimeNS,
				args: []arg{hexArg("qp_num", uint64(wc.QPNum)), uintArg("wr_id", wc.ID),
					strArg("status", ibv.WCStatusName(wc.Status)), strArg("opcode", ibv.WCOpName(wc.Opcode))}})
		}
	}
}

func (x *Exporter) pollItem(e *trace.Poll) {
	it := &x.scratch
	*it = item{name: "ibv_poll_cq", cat: "poll", pid: e.PID, tid: e.TID, args: it.args[:0], counters: it.counters[:0]}
	if e.Ex {
		it.name = "ibv_start_poll..ibv_end_poll"
	}
	timed(it, e.EntryNS, e.TimeNS)
	it.args = append(it.args, hexArg("cq", e.CQ), intArg("ret", int64(e.Ret)), intArg("max", int64(e.Max)))
	for _, qpn := range x.retired {
		x.outstanding(it, e.PID, qpn)
	}
	x.emit(it)
}

func (x *Exporter) cqSelected(pid uint32, cq uint64) bool {
	for _, q := range x.order {
		if q.pid == pid && (q.sendCQ == cq || q.recvCQ == cq) && x.w.qp(pid, q.qpn) {
			return true
		}
	}
	return false
}

// diagnosis draws a diagnosis, when first made, as a process-wide instant
// with its evidence.
func (x *Exporter) diagnosis(d analyzer.Diagnosis) {
	x.stats.Selected++
	args := []arg{hexArg("qp_num", uint64(d.QPNum)), strArg("severity", d.Severity),
		strArg("message", d.Message), strArg("fix", d.Fix)}
	keys := make([]string, 0, len(d.Evidence))
	for k := range d.Evidence {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, uintArg(k, d.Evidence[k]))
	}
	x.emit(&item{kind: itemProcess, name: "diagnosis: " + d.Kind, cat: "diagnosis", pid: d.PID, tid: d.PID,
		ts: d.FirstNS, args: args})
}

// tick ends the rate windows that end at or before t: it writes their
// samples and closes bursts idle for longer than the fold time.
func (x *Exporter) tick(t uint64) {
	for t >= x.tickNS && x.tickNS != math.MaxUint64 {
		b, n := x.tickNS, uint64(1)
		if !x.rates(b) {
			n = (t-b)/x.step + 1 // nothing to sample until the window of t
		}
		if n > (math.MaxUint64-b)/x.step {
			x.tickNS = math.MaxUint64
			return
		}
		x.tickNS = b + n*x.step
	}
}

// rates writes the samples of the window that ends at b; it says whether
// the next window needs one too.
func (x *Exporter) rates(b uint64) bool {
	draw := x.started && !x.ended && x.w.inTime(b)
	secs := float64(x.step) / 1e9
	busy := false
	for _, q := range x.order {
		if q.open && q.b.last+x.fold < b {
			x.closeBurst(q)
		}
		busy = busy || q.open
		if !x.w.qp(q.pid, q.qpn) {
			continue
		}
		if q.fails > 0 || q.failing {
			x.rate(draw, b, q, ctrFailures, float64(q.fails)/secs)
			q.failing = q.fails > 0
			q.fails = 0
			busy = busy || q.failing
		}
		if !x.o.Rates || !q.posted && !q.rateOn {
			continue
		}
		c, _ := x.a.QPCounters(q.pid, q.qpn)
		sav := c.Savings()
		var inline float64
		if wrs := c.WRs - q.prev.WRs; wrs > 0 {
			inline = 100 * float64(c.Inline-q.prev.Inline) / float64(wrs)
		}
		x.rate(draw, b, q, ctrDoorbells, float64(c.Doorbells-q.prev.Doorbells)/secs)
		x.rate(draw, b, q, ctrInline, inline)
		x.rate(draw, b, q, ctrPCIeSaved, float64(sav.BytesSaved-q.prevSav)/secs)
		q.prev, q.prevSav = c, sav.BytesSaved
		q.rateOn, q.posted = q.posted, false
		busy = busy || q.rateOn
	}
	return busy
}

func (x *Exporter) rate(draw bool, t uint64, q *qpState, k counterKind, v float64) {
	if draw {
		x.stats.Counters++
		x.tl.counter(t, counterValue{pid: q.pid, qpn: q.qpn, kind: k, v: v, slot: &q.tracks})
	}
}

// ErrNothingSelected says the filters selected no event.
var ErrNothingSelected = errors.New("the filters select nothing")

// Close ends the export: it closes what is open and ends the file. The
// error is the first write error, a filter that could not be applied, or
// ErrNothingSelected (wrapped, saying what the recording holds) when the
// filters selected no event.
func (x *Exporter) Close() error {
	if !x.ended && x.resolved && x.err == nil && x.tickNS != math.MaxUint64 {
		x.tick(x.tickNS) // the samples of the last window
	}
	if !x.ended {
		x.end()
	}
	werr := x.tl.close()
	x.prog.done(x.seen)
	switch {
	case x.err != nil:
		return x.err
	case werr != nil:
		return fmt.Errorf("writing the output: %w", werr)
	case x.stats.Selected == 0 && !x.o.Filter.empty() && x.seen > 0:
		return fmt.Errorf("%w: %s selects none of the %d events (%s)", ErrNothingSelected,
			x.o.Filter.describe(), x.seen, x.holds())
	}
	return nil
}

// holds says what the recording holds: its QPs, processes and span.
func (x *Exporter) holds() string {
	var qps []string
	pids := map[uint32]bool{}
	for _, q := range x.order {
		qps = append(qps, fmt.Sprintf("%s (pid %d)", hex(uint64(q.qpn)), q.pid))
		pids[q.pid] = true
	}
	start := x.o.Info.StartMonoNS
	if start == 0 || start > x.firstNS {
		start = x.firstNS
	}
	span := fmt.Sprintf("from %.6f s to %.6f s after the start", float64(x.firstNS-start)/1e9, float64(x.lastNS-start)/1e9)
	if len(qps) == 0 {
		return "no QP; " + span
	}
	if len(qps) > 8 {
		qps = append(qps[:8], "...")
	}
	return "QPs " + strings.Join(qps, ", ") + "; " + strconv.Itoa(len(pids)) + " process(es); " + span
}
