package serve

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

// Collector is a prometheus.Collector that reads one analyzer snapshot
// per scrape (a consistent copy, taken under the analyzer's lock for the
// time of a copy) and turns it into series. Before the probes are
// attached it has no analyzer and exports only sqscope's own metrics.
type Collector struct {
	mu     sync.Mutex // one scrape or sweep at a time: they share churn
	an     atomic.Pointer[analyzer.Analyzer]
	target atomic.Int64 // the traced process's PID, 0 for none
	// tracing: the trace runs; ended: it is over (the target is gone)
	tracing, ended atomic.Bool
	window         time.Duration // --diag-window
	maxQPs         int
	ch             *churn
	now            func() time.Time
	monoNS         func() uint64
	cpu            func() time.Duration                       // sqscope's own CPU time
	order          []exported                                 // a scrape's QPs, kept for the next
	flight         atomic.Pointer[func() session.FlightStats] // the flight recorder's Stats
}

// NewCollector returns a collector with the options' bounds.
func NewCollector(o Options) *Collector {
	return &Collector{window: o.DiagWindow, maxQPs: o.MaxQPs, ch: newChurn(o.Grace, o.MaxQPs),
		now: time.Now, monoNS: trace.MonotonicNS, cpu: session.SelfCPU}
}

// Attach gives the collector the session's analyzer once the probes are
// in place.
func (c *Collector) Attach(an *analyzer.Analyzer, pid int) {
	if pid > 0 { // its comm now, while it surely runs
		c.mu.Lock()
		c.ch.proc(uint32(pid), nil)
		c.mu.Unlock()
	}
	c.target.Store(int64(pid))
	c.an.Store(an)
	c.tracing.Store(true)
}

// End marks the trace over: every QP it traced has ended.
func (c *Collector) End() {
	c.tracing.Store(false)
	c.ended.Store(true)
}

func noHistory(uint32, uint32) bool { return false }

// Describe sends every descriptor the collector uses.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families {
		ch <- f.desc
	}
}

// Sweep forgets what ended more than the grace period ago (run it every
// second or so; scrapes do not forget, so that a scrape never waits for
// it).
func (c *Collector) Sweep() int {
	an := c.an.Load()
	if an == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	snap := an.SnapshotHistory(noHistory)
	now := c.now()
	c.ch.observe(snap.QPs, snap.Processes, now, c.ended.Load())
	return c.ch.sweep(an, snap.QPs, now)
}

// exported is a QP exported by a scrape: its index in the snapshot and
// its labels.
type exported struct {
	i                   int
	pid, comm, qpn, typ string
}

// folded sums a process's folded QPs.
type folded struct {
	n        int
	vals     map[string]float64
	measured map[string]bool
}

// emitFunc takes one series of a family: its value and label values.
type emitFunc func(f *family, v float64, lvs ...string)

// Collect sends the series of one snapshot to client_golang.
func (c *Collector) Collect(out chan<- prometheus.Metric) {
	c.visit(func(f *family, v float64, lvs ...string) {
		out <- prometheus.MustNewConstMetric(f.desc, f.typ, v, lvs...)
	})
}

// visit emits the series of one snapshot.
func (c *Collector) visit(emit emitFunc) {
	emit(tracingFam, b2f(c.tracing.Load()))
	emit(cpuFam, c.cpu().Seconds())
	emit(maxQPsFam, float64(c.maxQPs))
	c.visitFlight(emit)
	an := c.an.Load()
	if an == nil {
		return // attaching: nothing traced, nothing measured yet
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.visitSnapshot(an.SnapshotHistory(noHistory), emit)
}

// visitSnapshot emits the series of snap; c.mu is held.
func (c *Collector) visitSnapshot(snap analyzer.Snapshot, emit emitFunc) {
	now, ended := c.now(), c.ended.Load()
	c.ch.observe(snap.QPs, snap.Processes, now, ended)
	emit(lostFam, float64(snap.Lost))
	emit(eventsFam, float64(snap.Events))
	visitSentinel(emit, snap.Sentinel)

	// the newest lifetime of each QP number, unless its grace is over: a
	// number used again is one series, whose counters start over
	newest := make(map[[2]uint32]int, len(snap.QPs))
	for i := range snap.QPs {
		q := &snap.QPs[i]
		if l := c.ch.lives[lifeKey{q.PID, q.QPNum, q.Gen}]; l != nil && !c.ch.expired(l.endedAt, now) {
			newest[[2]uint32{q.PID, q.QPNum}] = i
		}
	}
	// visited in the order of their labels by name (comm, pid, qp_type,
	// qpn), the order the text formats write series in: each family's
	// series then come already sorted
	c.order = c.order[:0]
	for i := range snap.QPs {
		q := &snap.QPs[i]
		if j, ok := newest[[2]uint32{q.PID, q.QPNum}]; !ok || j != i {
			continue
		}
		typ := q.Type // "unknown" for a QP whose create was not seen
		c.order = append(c.order, exported{i: i, pid: strconv.FormatUint(uint64(q.PID), 10), comm: c.ch.procs[q.PID].comm,
			qpn: strconv.FormatUint(uint64(q.QPNum), 10), typ: typ})
	}
	slices.SortFunc(c.order, func(a, b exported) int {
		return cmp.Or(strings.Compare(a.comm, b.comm), strings.Compare(a.pid, b.pid),
			strings.Compare(a.typ, b.typ), strings.Compare(a.qpn, b.qpn))
	})
	folds := map[uint32]*folded{}
	live, endedQPs := 0, 0
	running := map[uint32]bool{}
	labels := make([]string, 6) // pid, comm, qpn, qp_type, an extra label and basis
	for _, o := range c.order {
		q := &snap.QPs[o.i]
		p := c.ch.procs[q.PID]
		if p.goneAt.IsZero() {
			running[q.PID] = true
		}
		l := c.ch.lives[lifeKey{q.PID, q.QPNum, q.Gen}]
		if l.endedAt.IsZero() {
			live++
		} else {
			endedQPs++
		}
		if l.folded {
			f := folds[q.PID]
			if f == nil {
				f = &folded{vals: map[string]float64{}, measured: map[string]bool{}}
				folds[q.PID] = f
			}
			f.n++
			for _, m := range qpMetrics {
				for k := range m.series {
					s := &m.series[k]
					if m.fold && q.Reported(s.key) {
						key := seriesKey(m, s, basisOf(m, s, q))
						f.vals[key] += s.value(q)
						f.measured[key] = true
					}
				}
			}
			continue
		}
		labels[0], labels[1], labels[2], labels[3] = o.pid, o.comm, o.qpn, o.typ
		for _, m := range qpMetrics {
			for k := range m.series {
				s := &m.series[k]
				if !q.Reported(s.key) {
					continue
				}
				emit(m.fam, s.value(q), qpLabelValues(labels, m, s, basisOf(m, s, q))...)
			}
		}
		if q.MaxSendWR > 0 {
			emit(depthFam, float64(q.MaxSendWR), labels[:4]...)
		}
	}
	c.visitFolded(emit, folds)
	if pid := uint32(c.target.Load()); pid != 0 && !ended && c.ch.alive(pid) {
		running[pid] = true
	}
	emit(processesFam, float64(len(running)))
	emit(exportedQPsFam, float64(live), "live")
	emit(exportedQPsFam, float64(endedQPs), "ended")
	c.visitDiagnoses(emit, snap.Diagnoses, newest)
}

// visitFolded emits each process's folded series: its folded QPs' sums
// and what its forgotten folded QPs counted.
func (c *Collector) visitFolded(emit emitFunc, folds map[uint32]*folded) {
	for pid, p := range c.ch.procs {
		f := folds[pid]
		if f == nil && p.retired == nil {
			continue
		}
		if f == nil {
			f = &folded{}
		}
		pidS := strconv.FormatUint(uint64(pid), 10)
		emit(foldedFam, float64(f.n), pidS, p.comm)
		labels := []string{pidS, p.comm, foldedLabel, foldedLabel, "", ""}
		for _, m := range qpMetrics {
			for k := range m.series {
				s := &m.series[k]
				for _, b := range basesOf(m) {
					key := seriesKey(m, s, b)
					r, retired := p.retired[key]
					if !m.fold || !f.measured[key] && !retired {
						continue
					}
					emit(m.fam, f.vals[key]+r, qpLabelValues(labels, m, s, b)...)
				}
			}
		}
	}
}

// visitDiagnoses emits the diagnoses of the QPs exported: 1 while
// active, and their occurrences. A QP number's lifetimes share its
// series, so their diagnoses of one kind are summed.
func (c *Collector) visitDiagnoses(emit emitFunc, diags []analyzer.Diagnosis, exported map[[2]uint32]int) {
	type key struct {
		kind, sev string
		pid, qpn  uint32
	}
	count := map[key]uint64{}
	active := map[key]bool{}
	nowNS := c.monoNS()
	for _, d := range diags {
		if _, ok := exported[[2]uint32{d.PID, d.QPNum}]; !ok {
			continue
		}
		k := key{d.Kind, d.Severity, d.PID, d.QPNum}
		count[k] += d.Count
		if d.LastNS+uint64(c.window) >= nowNS {
			active[k] = true
		}
	}
	for k, n := range count {
		labels := []string{k.kind, k.sev, strconv.FormatUint(uint64(k.pid), 10), strconv.FormatUint(uint64(k.qpn), 10)}
		emit(diagnosisCountFam, float64(n), labels...)
		if active[k] {
			emit(diagnosisFam, 1, labels...)
		}
	}
}

// qpLabelValues fills labels (pid, comm, qpn and qp_type set) with the
// values of m's extra label and basis, and returns those m has.
func qpLabelValues(labels []string, m *qpMetric, s *qpSeries, basis string) []string {
	n := 4
	if m.extra != "" {
		labels[n] = s.label
		n++
	}
	if m.basis {
		labels[n] = basis
		n++
	}
	return labels[:n]
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
