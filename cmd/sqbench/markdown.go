package main

import (
	"fmt"
	"strings"
	"time"
)

// targets are the goals the probe overhead is held to; lists of 16, as
// applications driving many QPs post them, have their own.
const (
	targetEvents     = 1.15
	targetCounters   = 1.05
	targetEvents16   = 1.25
	targetCounters16 = 1.10
	// the sentinel against the untraced workload: a healthy post pays
	// close to nothing
	targetSentinel = 1.05
	// counters mode against the -baseline build's (the build before its
	// send-queue model in the kernel): the model costs little
	targetCountersBaseline = 1.05
)

func (r *report) row(list int, name string) (ovRow, bool) {
	for _, o := range r.overhead {
		if o.List == list && o.Variant.name == name {
			return o, true
		}
	}
	return ovRow{}, false
}

// summaryTable is every headline figure in one table.
func (r *report) summaryTable() *table {
	t := &table{head: []string{"figure", "median [min–max]", "unit"}}
	for _, list := range []int{1, 16} {
		for _, name := range []string{"untraced", "floor", "least events", "least counters", "sqscope events", "sqscope counters", "sqscope sentinel", "bpftrace", "baseline events", "baseline counters"} {
			o, ok := r.row(list, name)
			if !ok {
				continue
			}
			t.rows = append(t.rows, []string{fmt.Sprintf("post_list %d, %s: thread CPU time per post call", list, name), fmtNS(o.NS), "ns"})
			if name != "floor" && name != "untraced" {
				t.rows = append(t.rows, []string{fmt.Sprintf("post_list %d, %s: ratio to the floor", list, name), fmtRatioCI(o.Ratio, o.Capped), "×"})
			}
			if name != "untraced" {
				t.rows = append(t.rows, []string{fmt.Sprintf("post_list %d, %s: ratio to untraced", list, name), fmtRatioCI(o.RatioU, false), "×"})
			}
			if o.RatioB.N > 0 {
				t.rows = append(t.rows, []string{fmt.Sprintf("post_list %d, %s: ratio to the -baseline build's", list, name), fmtRatioCI(o.RatioB, false), "×"})
			}
		}
	}
	t.rows = append(t.rows, r.budgetSummary()...)
	var best *lossRow
	for i, l := range r.loss {
		if l.Stall == 0 && l.Lost == 0 && l.Unseen == 0 && (best == nil || l.WRsPerS > best.WRsPerS) {
			best = &r.loss[i]
		}
	}
	if best != nil {
		t.rows = append(t.rows, []string{fmt.Sprintf("highest traced post rate with 0 lost events (%s ring, %d QP(s) over %d thread(s), post_list %d)", best.ring(), best.QPs, best.Threads, best.List),
			fmtNum(best.WRsPerS), "WR/s"})
	}
	for _, l := range r.loss {
		if l.Stall > 0 {
			t.rows = append(t.rows, []string{fmt.Sprintf("reader stopped %s, %s ring: lost records reported", l.Stall, l.ring()), fmt.Sprint(l.Lost), "records"})
		}
	}
	for _, o := range r.other {
		t.rows = append(t.rows, []string{o.What, fmtSummary(o.Value), o.Unit})
	}
	return t
}

// leastTarget is the target the least programs are held against at a
// post list length: at 16, the looser one for the lists of many-QP
// applications (what cannot reach it cannot reach the other either).
func leastTarget(list int, target, target16 float64) float64 {
	if list == 16 {
		return target16
	}
	return target
}

// verdicts says, for each target, whether it is met.
func (r *report) verdicts() []string {
	var out []string
	for _, list := range []int{1, 16} {
		ev, ok1 := r.row(list, "sqscope events")
		ct, ok2 := r.row(list, "sqscope counters")
		bt, ok3 := r.row(list, "bpftrace")
		if ok1 {
			out = append(out, verdict(fmt.Sprintf("post_list %d: full events ≤ %.2f× the floor", list, targetEvents), ev.Ratio.Med <= targetEvents,
				fmt.Sprintf("%.3f×, 95%% CI %s", ev.Ratio.Med, fmtCI(ev.Ratio))))
		}
		if ok2 {
			out = append(out, verdict(fmt.Sprintf("post_list %d: counters mode ≤ %.2f× the floor", list, targetCounters), ct.Ratio.Med <= targetCounters,
				fmt.Sprintf("%.3f×, 95%% CI %s", ct.Ratio.Med, fmtCI(ct.Ratio))))
		}
		for _, l := range []struct {
			name, what, mode string
			target           float64
			sq               ovRow
			ok               bool
		}{{"least events", "a full-event tracer", "events", leastTarget(list, targetEvents, targetEvents16), ev, ok1},
			{"least counters", "a counting tracer", "counters", leastTarget(list, targetCounters, targetCounters16), ct, ok2}} {
			if least, ok := r.row(list, l.name); ok && l.ok {
				reach := "so none can reach"
				if least.Ratio.Med <= l.target {
					reach = "which leaves room for"
				}
				line := fmt.Sprintf("post_list %d: less than %s must do (%s, bpf/bench/least.bpf.c) costs %.3f× the floor, %s %.2f× here; sqscope %s costs %.3f× as much as it",
					list, l.what, l.name, least.Ratio.Med, reach, l.target, l.mode, l.sq.NS.Med/least.NS.Med)
				if list > 1 {
					line += fmt.Sprintf(" (it reads all %d WRs of the list and their SGEs, in one read each)", list)
				}
				out = append(out, line)
			}
		}
		if list == 16 && ok1 {
			out = append(out, verdict(fmt.Sprintf("post_list 16: full events ≤ %.2f× the floor (lists of many-QP applications)", targetEvents16), ev.Ratio.Med <= targetEvents16,
				fmt.Sprintf("%.3f×, 95%% CI %s", ev.Ratio.Med, fmtCI(ev.Ratio))))
		}
		if list == 16 && ok2 {
			out = append(out, verdict(fmt.Sprintf("post_list 16: counters mode ≤ %.2f× the floor (lists of many-QP applications)", targetCounters16), ct.Ratio.Med <= targetCounters16,
				fmt.Sprintf("%.3f×, 95%% CI %s", ct.Ratio.Med, fmtCI(ct.Ratio))))
		}
		if ok1 && ok3 {
			out = append(out, verdict(fmt.Sprintf("post_list %d: full events cheaper than bpftrace", list), ev.NS.Med < bt.NS.Med,
				fmt.Sprintf("%.0f ns vs %.0f ns per call (%.2f× cheaper)", ev.NS.Med, bt.NS.Med, bt.NS.Med/ev.NS.Med)))
		}
		if ok2 && ct.RatioB.N > 0 {
			out = append(out, verdict(fmt.Sprintf("post_list %d: counters mode ≤ %.2f× the -baseline build's counters mode", list, targetCountersBaseline), ct.RatioB.Med <= targetCountersBaseline,
				fmt.Sprintf("%.3f×, 95%% CI %s", ct.RatioB.Med, fmtCI(ct.RatioB))))
		}
		if se, ok := r.row(list, "sqscope sentinel"); ok {
			out = append(out, verdict(fmt.Sprintf("post_list %d: sentinel on a healthy workload ≤ %.2f× untraced", list, targetSentinel), se.RatioU.Med <= targetSentinel,
				fmt.Sprintf("%.3f×, 95%% CI %s", se.RatioU.Med, fmtCI(se.RatioU))))
		}
	}
	out = append(out, r.budgetVerdicts()...)
	for _, l := range r.loss {
		if l.Stall == 0 {
			out = append(out, verdict(fmt.Sprintf("0 lost events at full speed, %d QP(s) over %d thread(s), post_list %d (%s WR/s)", l.QPs, l.Threads, l.List, fmtNum(l.WRsPerS)),
				l.Lost == 0 && l.Unseen == 0, fmt.Sprintf("%d lost", l.Lost)))
		}
	}
	out = append(append(out, r.recordingVerdicts()...), r.exportVerdicts()...)
	return append(out, r.scaleVerdicts()...)
}

func verdict(what string, ok bool, got string) string {
	mark := "met"
	if !ok {
		mark = "NOT met"
	}
	return fmt.Sprintf("%s: %s (%s)", what, mark, got)
}

func (r *report) text() string {
	var b strings.Builder
	if len(r.overhead)+len(r.budget)+len(r.loss)+len(r.other) > 0 {
		b.WriteString("\n== summary\n")
		b.WriteString(r.summaryTable().text())
	}
	if len(r.overhead) > 0 {
		fmt.Fprintf(&b, "\n== probe overhead per post call, ns (median [min–max] of %d rounds)\n", r.overhead[0].NS.N)
		b.WriteString(r.overheadTable().text())
	}
	if len(r.budget) > 0 {
		fmt.Fprintf(&b, "\n== the sentinel's sample windows under --budget %d, %d s runs (median [min–max] of %d rounds)\n", budgetPct, r.budget[0].Secs, r.budget[0].Rounds)
		b.WriteString(r.budgetTable().text())
	}
	if len(r.breakdown) > 0 {
		b.WriteString("\n== BPF run time per hit, ns (kernel statistics; they add their own cost, which the floor's empty programs show)\n")
		b.WriteString(r.breakdownTable().text())
	}
	if len(r.qpcHits) > 0 {
		b.WriteString("\n== QP number cache: share of the posts that found their QP's number\n")
		b.WriteString(r.qpcHitTable().text())
	}
	if len(r.qpcTimes) > 0 {
		fmt.Fprintf(&b, "\n== QP number cache: BPF run time per hit, ns (median [min–max] of %d rounds)\n", r.qpcTimes[0].NS.N)
		b.WriteString(r.qpcTimeTable().text())
	}
	if len(r.loss) > 0 {
		b.WriteString("\n== loss under load (events mode)\n")
		b.WriteString(r.lossTable().text())
	}
	if len(r.costs) > 0 {
		b.WriteString("\n== what each operation costs in a uprobe program here, ns (above an empty program)\n")
		b.WriteString(r.costTable().text())
		b.WriteString(r.costVerdict() + "\n")
	}
	if v := r.verdicts(); len(v) > 0 {
		b.WriteString("\n== targets\n")
		for _, s := range v {
			b.WriteString(s + "\n")
		}
	}
	for _, n := range r.notes {
		b.WriteString("note: " + n + "\n")
	}
	return b.String()
}

func (r *report) markdown(c *config) string {
	var b strings.Builder
	m := r.machine
	b.WriteString("# sqscope benchmarks\n\n")
	b.WriteString("Written by `make bench` (`cmd/sqbench`); run it again to refresh this file.\n")
	b.WriteString("Absolute times depend on the machine, and on a virtual machine mostly on what a trap into\n")
	b.WriteString("its kernel costs: compare the ratios, measured side by side in one run.\n\n")
	b.WriteString("## Machine\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s (took %s) |\n", r.start.UTC().Format(time.RFC3339), r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "| CPUs (nproc) | %d |\n", m.CPUs)
	fmt.Fprintf(&b, "| CPU | %s |\n", m.CPU)
	fmt.Fprintf(&b, "| memory | %.1f GiB |\n", m.MemGiB)
	fmt.Fprintf(&b, "| kernel | %s |\n", m.Kernel)
	fmt.Fprintf(&b, "| Go | %s |\n", m.Go)
	fmt.Fprintf(&b, "| bpftrace | %s |\n", m.Bpftrace)
	if m.Commit != "" {
		fmt.Fprintf(&b, "| sqscope | %s |\n", m.Commit)
	}
	fmt.Fprintf(&b, "| other load | %.0f%% of the CPUs busy in the second before the run; during it, some task waited for a CPU %.0f%% of the time (/proc/pressure/cpu, the benchmark's own processes included) |\n",
		r.background, r.pressure)
	b.WriteString("\n## Summary\n\n")
	b.WriteString(r.summaryTable().markdown())
	if v := r.verdicts(); len(v) > 0 {
		b.WriteString("\nTargets:\n\n")
		for _, s := range v {
			b.WriteString("- " + s + "\n")
		}
	}
	if len(r.overhead) > 0 {
		fmt.Fprintf(&b, "\n## Probe overhead per post call\n\nMedian [min–max] of %d rounds. ", r.overhead[0].NS.N)
		b.WriteString(overheadMethod)
		b.WriteString("\n")
		b.WriteString(r.overheadTable().markdown())
		b.WriteString("\nVariants:\n\n")
		seen := map[string]bool{}
		for _, o := range r.overhead {
			if !seen[o.Variant.name] {
				seen[o.Variant.name] = true
				fmt.Fprintf(&b, "- **%s**: %s\n", o.Variant.name, o.Variant.desc)
			}
		}
	}
	if len(r.budget) > 0 {
		fmt.Fprintf(&b, "\n## The sentinel's sample windows under --budget %d\n\n%d s runs, median [min–max] of %d rounds. ", budgetPct, r.budget[0].Secs, r.budget[0].Rounds)
		b.WriteString(budgetMethod)
		b.WriteString("\n")
		b.WriteString(r.budgetTable().markdown())
		fmt.Fprintf(&b, "\nRuns:\n\n- **untraced**: %s\n- **sentinel --budget %d**: the sentinel mode with its sample windows at their defaults and `--budget %d` (the default); between windows a healthy post takes no trap\n",
			untraced.desc, budgetPct, budgetPct)
	}
	b.WriteString("\n## What the probes do per hit\n\n")
	b.WriteString(probeDesign)
	if len(r.breakdown) > 0 {
		b.WriteString("\n## Where the time goes: BPF run time per hit\n\n")
		b.WriteString(breakdownMethod)
		b.WriteString("\n")
		b.WriteString(r.breakdownTable().markdown())
	}
	if len(r.costs) > 0 {
		b.WriteString("\n## Why: what each operation costs here\n\n")
		b.WriteString(costMethod)
		b.WriteString("\n")
		b.WriteString(r.costTable().markdown())
		b.WriteString("\n" + r.costVerdict() + "\n")
	}
	if len(r.qpcHits)+len(r.qpcTimes) > 0 {
		b.WriteString("\n## The per-thread cache of QP numbers\n\n")
		b.WriteString(qpcMethod)
		if len(r.qpcHits) > 0 {
			b.WriteString("\nShare of the posts that found their QP's number, by the cache's shape:\n\n")
			b.WriteString(r.qpcHitTable().markdown())
		}
		if len(r.qpcTimes) > 0 {
			fmt.Fprintf(&b, "\nBPF run time per hit, ns, median [min–max] of %d rounds:\n\n", r.qpcTimes[0].NS.N)
			b.WriteString(r.qpcTimeTable().markdown())
		}
	}
	if len(r.loss) > 0 {
		b.WriteString("\n## Loss under load\n\n")
		b.WriteString(lossMethod)
		b.WriteString("\n")
		b.WriteString(r.lossTable().markdown())
		for _, l := range r.loss {
			if l.Stall > 0 && l.Message != "" {
				fmt.Fprintf(&b, "\nWhat sqscope printed with the reader stopped (%s ring):\n\n```\n%s\n```\n", l.ring(), l.Message)
			}
		}
	}
	if len(r.other) > 0 {
		b.WriteString("\n## Other figures\n\n")
		b.WriteString("`go test` benchmarks of the other packages, median [min–max] of their `-count` runs.\n\n")
		b.WriteString(r.otherTable().markdown())
	}
	b.WriteString("\n## Commands\n\n")
	fmt.Fprintf(&b, "`make bench` builds `./sqscope` and runs `%s`, which runs:\n\n", strings.Join(r.argv, " "))
	b.WriteString("```\n")
	for _, cmd := range r.commands {
		b.WriteString(cmd + "\n")
	}
	for _, l := range r.loss {
		b.WriteString(l.Command + "\n")
	}
	b.WriteString("```\n")
	for _, n := range r.notes {
		b.WriteString("\nNote: " + n + "\n")
	}
	return b.String()
}

const overheadMethod = `The workload is the built-in one on the simulated HCA: 64 B inline SENDs,
a CQE every 16th WR (` + "`-s 64 -I 64 -Q 16 --sim-deterministic`" + `), one QP, one post call and one
poll per loop iteration, with 1 or 16 WRs per post call. Each round runs every variant once, in an
order rotated from round to round. The time per post call is the CPU time the workload's traffic
thread used over its traffic loop (` + "`app.cpu_seconds`" + ` of ` + "`--json-out`" + `, CLOCK_THREAD_CPUTIME_ID over the loop,
which excludes start-up and attaching) divided by its post calls: the post, its poll, the probes they
hit (a uprobe runs in the thread that hits it) and the loop. Other processes' load does not inflate
it as it does the wall time, also given ("wall ns/post call", ` + "`app.seconds`" + `). "ns inside post" is the
workload's ` + "`app.avg_post_ns`" + ` (wall time inside the post call only). The ratio to the floor is taken
within each round, then summarised with the 95% confidence interval of its median (the order
statistics the binomial distribution gives, whatever the rounds' distribution); rounds are added
until every tracer's ratio has its interval within ±3% of its median, so that a change of 5% shows, up to
` + "`-max-runs`" + ` (the rows say when that was reached first); "CPU ns above floor" likewise. The ratio to untraced is
what the application pays, taken and summarised the same way (the rounds are not added for it). "all WRs seen"
checks that the trace holds every WR the simulated HCA counted (the exactness the tests require); the sentinel
traces the calls of its sample windows only, by design, and says which share of the WRs they held (its first
window opens only after ` + "`--sample-every`" + `, 10 s, so a short run may have none: the next section measures
the windows over a long run).
`

const breakdownMethod = `The same workloads once more with the kernel's BPF statistics on (` + "`BPF_ENABLE_STATS`" + `): the
mean run time of each program per hit, read from sqscope's own programs (found through its file
descriptors) and from the floor's and the least programs'. The statistics add two clock reads to every run: the floor's
empty programs show that cost, so "sum above floor" is the programs' own work. They point at where the
time goes; the ratios above, from the thread's CPU time, are what counts.
`

const lossMethod = `The workload runs for 3 s as fast as it can under ` + "`sqscope trace`" + ` (events mode, the ring
sqscope picks, 32 MiB): one and two QPs (one thread each, on 2 cores), then 256 QPs over 8 threads and 1,024
over 16 (each thread posting to its QPs in turn and polling one CQ they share), with 1 and 16 WRs
per call. The traced
workload cannot post faster than the probes let it, so its full speed is the highest post rate a
traced workload reaches here; the table shows whether any record was lost at it. Then the reader is
stopped (SIGSTOP to sqscope) for a second while the workload runs, with the default and a 1 MiB
ring: the ring fills, the kernel side counts each record it could not write, and sqscope reports
the count. "WRs missing from the trace" compares the trace with the simulated HCA's own count.
sqscope's CPU is its own (reading, decoding, analysing; the probes' cost is the workload's), from
its summary: the share of a core and the CPU per event after the probes were attached.
`

const costMethod = `Programs that each repeat one operation (bpf/bench/cost.bpf.c), all attached to the simulated
post_send of one post_list 1 run with the kernel's BPF statistics on; the time per operation is the
program's mean run time above the empty program's, divided by the repetitions.
`

// costVerdict turns the operation costs into the least overhead each mode
// can have at post_list 1, against the measured floor.
func (r *report) costVerdict() string {
	ev, ct := r.minimum()
	floor, ok := r.row(1, "floor")
	if !ok || floor.NS.Med == 0 {
		return fmt.Sprintf("A traced post_list 1 loop iteration needs at least %.0f ns of BPF work in the events mode and %.0f ns in the counters mode.", ev, ct)
	}
	return fmt.Sprintf("A post_list 1 loop iteration (one post of one WR, one poll) traced in full needs at least: "+
		"per-thread state at its four probes (the arguments from entry to return, the empty-poll count), two user "+
		"reads for the WR (header, SGE), the post record's timestamp and the record itself: %.0f ns, %.2f× a floor "+
		"of %.0f ns, before any field is decoded or counted and leaving out the one poll in 16 that returns a "+
		"completion. The counters mode needs the per-thread state at three probes (a successful post's "+
		"return needs nothing) and the two reads: %.0f ns, %.2f×. %s",
		ev, 1+ev/floor.NS.Med, floor.NS.Med, ct, 1+ct/floor.NS.Med, budgetVerdict(ev, ct, floor.NS.Med)) +
		r.measuredRest(ev, ct) + r.costVerdict16()
}

// measuredRest says, for post_list 1, how far each mode is from the least
// it needs: the programs' own work beyond it (BPF statistics), and the
// time a traced iteration takes beyond the programs' run time.
func (r *report) measuredRest(ev, ct float64) string {
	var floor *bdRow
	for i := range r.breakdown {
		if b := &r.breakdown[i]; b.List == 1 && b.Variant == "floor" {
			floor = b
		}
	}
	if floor == nil {
		return ""
	}
	var out []string
	for _, m := range []struct {
		name string
		need float64
	}{{"sqscope events", ev}, {"sqscope counters", ct}} {
		ov, ok := r.row(1, m.name)
		for _, b := range r.breakdown {
			if !ok || b.List != 1 || b.Variant != m.name {
				continue
			}
			bpf := b.sum() - floor.sum()
			out = append(out, fmt.Sprintf("%s: the programs run %.0f ns above the empty ones, %.0f ns beyond the least above "+
				"(their own decoding and bookkeeping), and a traced iteration takes %.0f ns more than the floor's, %.0f ns "+
				"more than that run time (spent around the programs, not in them)",
				strings.TrimPrefix(m.name, "sqscope "), bpf, bpf-m.need, ov.Above.Med, ov.Above.Med-bpf))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " Measured at post_list 1, " + strings.Join(out, "; ") + "."
}

// costVerdict16 is costVerdict's sentence for post_list 16, when that
// floor was measured.
func (r *report) costVerdict16() string {
	floor, ok := r.row(16, "floor")
	if !ok || floor.NS.Med == 0 {
		return ""
	}
	ev, ct := r.minimum16()
	return fmt.Sprintf("\n\nAt post_list 16 (every poll returns a completion) the least is: the same per-thread state, "+
		"a 2 KiB read of the WR array and one of the SGEs, and in the events mode the timestamps and records of the "+
		"post and the poll and a read of the completion: %.0f ns, %.2f× a floor of %.0f ns; the counters mode %.0f ns, "+
		"%.2f×. %s", ev, 1+ev/floor.NS.Med, floor.NS.Med, ct, 1+ct/floor.NS.Med, budgetVerdict(ev, ct, floor.NS.Med))
}

// budgetVerdict says whether the targets leave room for the unavoidable
// operations of each mode.
func budgetVerdict(ev, ct, floor float64) string {
	say := func(need, target float64) string {
		budget := (target - 1) * floor
		than := "less than"
		if need <= budget {
			than = "room for"
		}
		return fmt.Sprintf("at %.2f× leaves %.0f ns, %s the %.0f ns it cannot do without.", target, budget, than, need)
	}
	return "The target for the events mode " + say(ev, 1.15) + " The counters mode's target " + say(ct, 1.05)
}

const probeDesign = `- One ring-buffer record per post call (every WR of the list in it) and per poll that
  returned completions; no record per WR, none for an empty poll (a per-thread count, carried
  by the next record or the periodic flush). Records do not wake the reader: it looks every
  10 ms, and is woken when a quarter of the ring is unread.
- Arguments are kept from entry to return in the thread's state: an array slot picked by the
  thread id (an inlined lookup), or task-local storage (a hash by thread id where the kernel
  does not allow it) for a thread whose slot another thread holds; written in place, no map
  update per call. Entry probes take no timestamp (records carry the return time;
  --call-times adds the entry time).
- A successful post of one WR is recorded straight into the ring. Longer records are built in
  per-CPU slots and published only if no other program took the slots over meanwhile (a
  preempted program). A poll record carries its thread's pending empty polls of the CQ, so no
  shared map is touched on the way.
- User memory is read through windows: a one-WR post reads its WR header and its SGE (two
  reads); a longer list, or a thread whose last list was longer, reads the WR and SGE arrays
  2 KiB at a time, and a plain loop (no bpf_loop callback) decodes the first 16 WRs. The walk
  state sits in a per-CPU slot so that the programs fit older kernels' 512-byte stack limit
  across calls. Completions are read in one go. A QP's number is cached per thread.
- The counters mode counts a post at its entry, as if every WR will be accepted: the return
  probe of a successful call does nothing, and a failed call's walks the list again and puts
  what was accepted in place of the guess. Counts are kept per thread and added to the shared
  per-QP and per-CQ maps every 32 calls, when the thread moves to another QP or CQ, and when
  it exits (the reader waits for the target's threads to exit before its last read).
`
