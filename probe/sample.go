package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sqscope/sqscope/internal/trapcost"
	"github.com/sqscope/sqscope/trace"
)

// Sample windows: while the traced processes are healthy, the sentinel
// mode places the data-path probes events mode would have placed on
// every one of them for Options.SampleFor, every Options.SampleEvery, or
// more rarely when Options.Budget says so. Each window re-synchronises
// the occupancy of their QPs as a late attach does (the analyzer's
// part), and at its end a trace.Window says what every probe of sqscope
// cost the traced processes while it was open: the programs' runs and
// run time (the kernel's BPF statistics, on only then), the uprobe traps
// they took at the price trapcost measured here; against the processes'
// CPU time since the previous window's end (/proc/PID/stat).

// MaxSamplePeriod is the longest wait between two sample windows the
// budget sets.
const MaxSamplePeriod = 10 * time.Minute

// sampler is what the sample windows keep between two of them.
type sampler struct {
	trapNS   uint64
	trapErr  string
	progs    map[*ebpf.Program]bool // the programs to account, true: a return probe on a function without an entry probe
	runs     map[*ebpf.Program]progTotals
	cpu      map[uint32]uint64 // per process: utime+stime in ns at the previous window's end
	lastEnd  uint64            // trace.MonotonicNS of the previous window's end (or of the start)
	ownCPUNS float64           // the traced processes' own CPU per ns of wall time, last period
	// costSum and ownSum: what the windows cost and the processes' own
	// CPU time, since the first window (ns)
	costSum, ownSum float64
	cpuAcc          uint64 // the processes' CPU read since the last window's end, of those that ended too
	// the last window's: when its placing began, how long its probes
	// took to place and to remove, and what it cost per ns of all that
	openingNS, placingNS, removalNS uint64
	costRate                        float64
}

type progTotals struct {
	runs uint64
	ns   uint64
}

// newSampler measures the price of a trap and lists the programs whose
// runs a window accounts for.
func (t *Tracer) newSampler() *sampler {
	s := &sampler{progs: map[*ebpf.Program]bool{}, runs: map[*ebpf.Program]progTotals{}, cpu: map[uint32]uint64{}}
	trap, removal, err := trapcost.MeasureRemoval()
	if err != nil {
		s.trapErr = fmt.Sprintf("the price of a uprobe trap: %v", err)
	}
	s.trapNS = uint64(trap)
	// until a window's removal is timed: twice two rounds of one probe's
	// (a window removes its entry probes, then its return probes, and
	// each round of a dozen or more took about twice one probe's here:
	// 65-88 ms against 17-20 ms)
	s.removalNS = 4 * uint64(removal)
	p := &t.objs.VerbsPrograms
	for _, r := range roles {
		var entry, ret *ebpf.Program
		if r.entry != nil {
			entry = r.entry(p)
		}
		if r.ret != nil {
			ret = r.ret(p)
		}
		if entry != nil && !s.progs[entry] {
			s.progs[entry] = false
		}
		if ret != nil {
			s.progs[ret] = s.progs[ret] || entry == nil
		}
	}
	if p.ErrorSite != nil {
		s.progs[p.ErrorSite] = false
	}
	s.lastEnd = trace.MonotonicNS()
	s.cpuSince(t.sampledPIDs())
	return s
}

// startStats turns the kernel's BPF run-time statistics on for a window
// (they cost every BPF program of the host a clock reading per run, so
// only while a window is open) and takes the programs' totals; without
// them (BPF_ENABLE_STATS needs CAP_SYS_ADMIN) the window counts the calls
// it recorded instead, and note says so.
func (s *sampler) startStats() (st io.Closer, note string) {
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Sprintf("BPF run-time statistics: %v; the traps are two per call recorded, the programs' run time left out: a lower bound", err)
	}
	s.progRuns()
	return st, ""
}

// progRuns reads the programs' totals and returns what changed since the
// previous call: runs, the traps they took, their run time.
func (s *sampler) progRuns() (runs, traps, runNS uint64) {
	return s.progDelta(true)
}

// spent is what the open window's probes cost so far (ns), the totals
// kept for the window's end.
func (s *sampler) spent() float64 {
	_, traps, runNS := s.progDelta(false)
	return float64(traps*s.trapNS + runNS)
}

// progDelta is what changed in the programs' totals since the previous
// progRuns, taken as the new base when commit is set.
func (s *sampler) progDelta(commit bool) (runs, traps, runNS uint64) {
	for p, retOnly := range s.progs {
		st, err := p.Stats()
		if err != nil {
			continue
		}
		now := progTotals{runs: st.RunCount, ns: uint64(st.Runtime)}
		prev := s.runs[p]
		if commit {
			s.runs[p] = now
		}
		if now.runs < prev.runs || now.ns < prev.ns {
			continue
		}
		d := now.runs - prev.runs
		runs += d
		traps += d
		if retOnly { // the entry's trap that sets the return's up
			traps += d
		}
		runNS += now.ns - prev.ns
	}
	return runs, traps, runNS
}

// cpuSince returns the CPU time the processes used since the previous
// call (a process new since then counts from now).
func (s *sampler) cpuSince(pids []uint32) uint64 {
	var cpuNS uint64
	seen := map[uint32]uint64{}
	for _, pid := range pids {
		c, err := procCPU(pid)
		if err != nil {
			continue
		}
		seen[pid] = c
		if prev, ok := s.cpu[pid]; ok && c >= prev {
			cpuNS += c - prev
		}
	}
	s.cpu = seen
	return cpuNS
}

// procCPU is the CPU time a process has used, user and system, in ns
// (/proc/PID/stat, in clock ticks of 10 ms).
func procCPU(pid uint32) (uint64, error) {
	f, err := statFields(int(pid))
	if err != nil {
		return 0, err
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	k, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected CPU times", pid)
	}
	return (u + k) * 10_000_000, nil
}

// sampledPIDs are the processes whose data-path probes the sentinel left
// out, still running.
func (t *Tracer) sampledPIDs() []uint32 {
	s := &t.sentinel
	s.mu.Lock()
	defer s.mu.Unlock()
	var pids []uint32
	for pid := range s.deferred {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			delete(s.deferred, pid) // ended: nothing more to sample
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// runSampler opens and closes the sample windows until ctx is done.
func (t *Tracer) runSampler(ctx context.Context) {
	s := t.newSampler()
	wait := t.opts.SampleEvery
	for {
		// the processes' CPU read every second meanwhile: one that ends
		// before the next window counts up to then
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
			select {
			case <-ctx.Done():
				// the processes' CPU since the last window, which the
				// cost so far is over too
				t.queueAfter(s.tail(t.sampledPIDs(), t.opts))
				return
			case <-time.After(min(time.Until(deadline), time.Second)):
			}
			s.cpuAcc += s.cpuSince(t.sampledPIDs())
		}
		pids := t.sampledPIDs()
		s.cpuAcc += s.cpuSince(pids) // up to the window: what the budget has saved
		if wait = s.short(t.opts); wait > 0 {
			continue
		}
		stats, note := s.startStats()
		calls := t.dataCalls.Load()
		opening := trace.MonotonicNS()
		s.openingNS = opening
		opened := 0
		for _, pid := range pids {
			if t.openWindow(pid, true) {
				opened++
			}
		}
		from := trace.MonotonicNS() // every probe in place
		s.placingNS = from - opening
		s.hold(ctx, t.opts, note == "", from-opening)
		to := trace.MonotonicNS() // the removal begins
		t.closeWhere(func(w *window, _ time.Time) bool { return w.sample })
		s.removalNS = trace.MonotonicNS() - to
		var counted uint64
		if note != "" {
			// the window's records read by now, or soon: a lower bound
			// still, the later ones left out
			time.Sleep(50 * time.Millisecond)
			counted = 2 * (t.dataCalls.Load() - calls)
		}
		w := s.window(from, to, uint32(opened), pids, note, counted, t.opts)
		if stats != nil {
			stats.Close()
		}
		wait = time.Duration(w.NextNS)
		t.queueAfter(w)
		if ctx.Err() != nil {
			return
		}
	}
}

// hold keeps a window open for Options.SampleFor, or less under a
// budget: a window spends only what the budget has saved, its share of
// the processes' own CPU time since the first window less what the
// windows cost, and closes once what it cost so far, with the removal of
// its probes at the rate it costs (as long as the last removal took, or
// for the first two of the removal of one probe timed at the start),
// would spend more. The wait
// before the next window then saves for it. Without the kernel's
// statistics (priced false) its cost is known only after it closes.
func (s *sampler) hold(ctx context.Context, o Options, priced bool, placing uint64) {
	// placing: how long this window's probes took to place
	full := time.NewTimer(o.SampleFor)
	defer full.Stop()
	if o.Budget <= 0 || !priced || s.trapErr != "" {
		select {
		case <-ctx.Done():
		case <-full.C:
		}
		return
	}
	saved := o.Budget/100*(s.ownSum+float64(s.cpuAcc)) - s.costSum
	removal := float64(max(s.removalNS, placing))
	start := trace.MonotonicNS() - placing
	tick := time.NewTicker(budgetTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-full.C:
			return
		case <-tick.C:
		}
		spent := s.spent()
		if spent == 0 {
			continue // nothing traced yet: nothing spent
		}
		rate := spent / float64(trace.MonotonicNS()-start)
		if spent+rate*removal >= saved {
			return
		}
	}
}

// short is how much longer the budget needs to save before a window:
// for its least cost, its probes' placing and removal and one look at
// what it cost, at the rate the last window cost (before the first, at
// the processes' whole CPU time: a window costs them no more); 0 when it
// has saved that, or without a budget.
func (s *sampler) short(o Options) time.Duration {
	if o.Budget <= 0 || s.trapErr != "" {
		return 0
	}
	own := s.ownCPUNS
	if own <= 0 {
		if since := trace.MonotonicNS() - s.lastEnd; since > 0 {
			own = float64(s.cpuAcc) / float64(since)
		}
	}
	if own <= 0 {
		return 0 // idle: a window costs nothing either
	}
	rate := s.costRate
	if rate <= 0 {
		rate = own
	}
	need := rate * float64(s.placingNS+s.removalNS+uint64(budgetTick))
	saved := o.Budget/100*(s.ownSum+float64(s.cpuAcc)) - s.costSum
	if saved >= need {
		return 0
	}
	return min(MaxSamplePeriod, max(budgetTick, time.Duration((need-saved)/(o.Budget/100*own))))
}

// budgetTick is how often an open window under a budget reads what it
// has cost.
const budgetTick = 10 * time.Millisecond

// window accounts for the window ending now (counted: the traps the
// calls it recorded took, when note says the kernel's statistics could
// not be had), and for the period since
// the previous one's end, and sets the wait until the next window:
// Options.SampleEvery, or longer when the budget needs it.
func (s *sampler) window(from, to uint64, opened uint32, pids []uint32, note string, counted uint64, o Options) *trace.Window {
	end := trace.MonotonicNS()
	w := &trace.Window{Header: trace.Header{TimeNS: to}, FromNS: from, PIDs: opened, PeriodNS: end - s.lastEnd,
		CostErr: s.trapErr, CostNote: note, NextNS: uint64(o.SampleEvery)}
	s.lastEnd = end
	runs, traps, runNS := s.progRuns()
	cpuNS := s.cpuAcc + s.cpuSince(pids)
	s.cpuAcc = 0
	if s.trapErr == "" {
		w.Traps, w.TrapNS, w.TargetCPUNS = traps, s.trapNS, cpuNS
		if note == "" {
			w.Runs, w.RunNS = runs, runNS
		} else {
			w.Traps = counted
		}
	}
	if o.Budget <= 0 {
		return w
	}
	w.BudgetPPM = uint32(o.Budget * 1e4)
	if s.trapErr != "" {
		// nothing to price the windows with: as rare as the budget's
		// longest wait, so that it holds whatever they cost
		w.NextNS = uint64(MaxSamplePeriod)
		return w
	}
	if w.PeriodNS == 0 {
		return w
	}
	// The processes' own CPU, without what the window cost them, per ns
	// of wall time; the next window costs about what this one did. The
	// next period is long enough that all the windows so far and the
	// next, over the processes' own CPU since the first, keep to the
	// budget: a window over it is paid back by a longer wait.
	cost := float64(w.CostNS())
	own := max(0, float64(cpuNS)-cost)
	if wall := end - s.openingNS; cost > 0 && s.openingNS != 0 && wall > 0 {
		s.costRate = cost / float64(wall)
	}
	s.costSum += cost
	s.ownSum += own
	if own > 0 {
		s.ownCPUNS = own / float64(w.PeriodNS)
	}
	if s.ownCPUNS <= 0 {
		return w // idle: nothing to charge the windows against
	}
	period := ((s.costSum+cost)/(o.Budget/100) - s.ownSum) / s.ownCPUNS
	next := period - float64(o.SampleFor)
	w.NextNS = uint64(min(float64(MaxSamplePeriod), max(float64(o.SampleEvery), next)))
	// no sooner than the budget saves for the next window's least cost
	// (short, asked again when it is due)
	w.NextNS = max(w.NextNS, uint64(s.short(o)))
	return w
}

// checkSampling checks the sample windows' options and sets their
// defaults.
func checkSampling(o *Options) error {
	switch {
	case o.SampleEvery < 0:
		return fmt.Errorf("sample period %v: want a positive duration (0: no sample windows)", o.SampleEvery)
	case o.SampleFor < 0:
		return fmt.Errorf("sample window %v: want a positive duration", o.SampleFor)
	case o.Budget < 0 || o.Budget > 100:
		return fmt.Errorf("budget %g%%: want a share of the target's CPU between 0 and 100", o.Budget)
	case o.Mode != ModeSentinel && (o.SampleEvery > 0 || o.Budget > 0):
		return errors.New("sample windows and a budget are the sentinel mode's")
	case o.Budget > 0 && o.SampleEvery == 0:
		return errors.New("a budget bounds the sample windows: give a sample period")
	}
	if o.SampleFor == 0 {
		o.SampleFor = DefaultSampleFor
	}
	if o.SampleEvery > 0 && o.SampleFor >= o.SampleEvery {
		return fmt.Errorf("sample window %v: want it shorter than the sample period %v", o.SampleFor, o.SampleEvery)
	}
	return nil
}

// queueAfter queues ev for Run to deliver after the attachments.
func (t *Tracer) queueAfter(ev trace.Event) {
	t.mu.Lock()
	t.after = append(t.after, ev)
	t.haveUnsent.Store(true)
	t.mu.Unlock()
}

// tail is the end of the trace as a trace.Window without a window: the
// processes' CPU time since the last window's end.
func (s *sampler) tail(pids []uint32, o Options) *trace.Window {
	end := trace.MonotonicNS()
	w := &trace.Window{Header: trace.Header{TimeNS: end}, FromNS: end, PeriodNS: end - s.lastEnd, Tail: true,
		CostErr: s.trapErr, TrapNS: s.trapNS, BudgetPPM: uint32(o.Budget * 1e4)}
	s.lastEnd = end
	if cpu := s.cpuAcc + s.cpuSince(pids); s.trapErr == "" {
		w.TargetCPUNS = cpu
	}
	s.cpuAcc = 0
	return w
}

// countCall counts n data-path calls read from the ring, which a sample
// window without the kernel's statistics prices: in the sentinel mode
// only, so that the other modes' decode pays no atomic add per record.
func (t *Tracer) countCall(n uint64) {
	if t.opts.Mode == ModeSentinel {
		t.dataCalls.Add(n)
	}
}
