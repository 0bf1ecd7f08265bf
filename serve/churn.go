package serve

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqscope/sqscope/analyzer"
)

// Churn: a host creates and destroys QPs all day. What sqscope keeps, and
// the series it exports, follow the QPs alive plus those ended within the
// grace period:
//   - a QP lifetime ends at its destroy or when its process is gone; its
//     series stay for --grace (a scrape after the end still sees its last
//     numbers), then go, and the analyzer forgets it;
//   - a QP is given its own series or folded into its process's when first
//     seen, for its whole life, so no counter ever moves between series;
//     past --max-qps QPs with their own series, new QPs are folded;
//   - a folded QP that is forgotten leaves its counts in its process's
//     folded series (retired), which so never falls while the process
//     lives; a process gone for --grace is forgotten whole.

// lifeKey is one QP lifetime (generation 0: created before tracing; a
// number used again then names the newest).
type lifeKey struct {
	pid, qpn uint32
	gen      uint64
}

type life struct {
	folded  bool
	endedAt time.Time // zero while it lives
}

type procState struct {
	comm   string
	goneAt time.Time // zero while it runs
	// retired are the counters of the folded QPs forgotten, by metric
	// name and extra label value (seriesKey).
	retired map[string]float64
}

func seriesKey(m *qpMetric, s *qpSeries, basis string) string {
	return m.name + "\x00" + s.label + "\x00" + basis
}

// churn is the collector's memory of lifetimes; guarded by Collector.mu.
type churn struct {
	grace  time.Duration
	maxQPs int
	own    int // QP lifetimes with series of their own
	lives  map[lifeKey]*life
	procs  map[uint32]*procState
	alive  func(pid uint32) bool
	comm   func(pid uint32) string
}

func newChurn(grace time.Duration, maxQPs int) *churn {
	return &churn{grace: grace, maxQPs: maxQPs, lives: map[lifeKey]*life{}, procs: map[uint32]*procState{},
		alive: processAlive, comm: readComm}
}

// processAlive says whether a process exists: kill(pid, 0) finds it
// (EPERM: it does, another user's).
func processAlive(pid uint32) bool {
	err := syscall.Kill(int(pid), 0)
	return err == nil || err == syscall.EPERM
}

func readComm(pid uint32) string {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// proc is a process's state; its name is the trace's (trace.Proc) when
// known, else read now from /proc.
func (c *churn) proc(pid uint32, known map[uint32]*analyzer.Process) *procState {
	p := c.procs[pid]
	if p == nil {
		p = &procState{}
		if kp := known[pid]; kp != nil {
			p.comm = kp.Comm
		}
		if p.comm == "" {
			p.comm = c.comm(pid)
		}
		c.procs[pid] = p
	}
	return p
}

// observe notes a snapshot's QPs and processes at now: new lifetimes are
// given their series, ended ones their end. A process is gone when the
// trace saw it exit (host-wide, followed), when it no longer exists, or
// when the trace of its target is over (targetEnded).
func (c *churn) observe(qps []analyzer.QP, procs []analyzer.Process, now time.Time, targetEnded bool) {
	known := make(map[uint32]*analyzer.Process, len(procs))
	for i := range procs {
		known[procs[i].PID] = &procs[i]
	}
	gone := func(pid uint32) bool {
		kp := known[pid]
		return targetEnded || kp != nil && kp.Exited || !c.alive(pid)
	}
	checked := map[uint32]bool{}
	for i := range qps {
		q := &qps[i]
		p := c.proc(q.PID, known)
		if p.goneAt.IsZero() && !checked[q.PID] {
			checked[q.PID] = true
			if gone(q.PID) {
				p.goneAt = now
			}
		}
		k := lifeKey{q.PID, q.QPNum, q.Gen}
		l := c.lives[k]
		if l == nil {
			l = &life{folded: c.own >= c.maxQPs}
			if !l.folded {
				c.own++
			}
			c.lives[k] = l
		}
		if l.endedAt.IsZero() && (q.Destroyed || !p.goneAt.IsZero()) {
			l.endedAt = now
		}
	}
	// a process whose QPs are all forgotten still holds its folded
	// counts and its name: it goes too, once gone for the grace period
	for pid, p := range c.procs {
		if p.goneAt.IsZero() && !checked[pid] && gone(pid) {
			p.goneAt = now
		}
	}
}

// expired says whether an ended lifetime's grace is over.
func (c *churn) expired(t, now time.Time) bool { return !t.IsZero() && now.Sub(t) >= c.grace }

// sweep forgets the lifetimes and processes whose grace is over: folded
// counts go to their process's retired totals, and the analyzer drops
// them. It returns how many lifetimes it forgot.
func (c *churn) sweep(an *analyzer.Analyzer, qps []analyzer.QP, now time.Time) int {
	gone := map[lifeKey]bool{}
	for i := range qps {
		q := &qps[i]
		k := lifeKey{q.PID, q.QPNum, q.Gen}
		l := c.lives[k]
		if l == nil || !c.expired(l.endedAt, now) {
			continue
		}
		gone[k] = true
		if l.folded {
			retire(c.proc(q.PID, nil), q)
		} else {
			c.own--
		}
		delete(c.lives, k)
	}
	goneProcs := map[uint32]bool{}
	for pid, p := range c.procs {
		if c.expired(p.goneAt, now) {
			goneProcs[pid] = true
		}
	}
	if len(gone) == 0 && len(goneProcs) == 0 {
		return 0
	}
	n := an.Forget(func(pid, qpn uint32, gen uint64) bool {
		return gone[lifeKey{pid, qpn, gen}] || goneProcs[pid]
	}, func(pid uint32) bool { return goneProcs[pid] })
	for k, l := range c.lives { // lifetimes of gone processes not in this snapshot
		if goneProcs[k.pid] {
			if !l.folded {
				c.own--
			}
			delete(c.lives, k)
		}
	}
	for pid := range goneProcs {
		delete(c.procs, pid)
	}
	return n
}

// retire adds a forgotten folded QP's counts to its process's.
func retire(p *procState, q *analyzer.QP) {
	for _, m := range qpMetrics {
		if !m.fold || m.typ != prometheus.CounterValue {
			continue
		}
		for i := range m.series {
			s := &m.series[i]
			if !q.Reported(s.key) {
				continue
			}
			if p.retired == nil {
				p.retired = map[string]float64{}
			}
			p.retired[seriesKey(m, s, basisOf(m, s, q))] += s.value(q)
		}
	}
}
