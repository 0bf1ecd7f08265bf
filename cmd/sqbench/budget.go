package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// The sentinel's cost over a long run: its sample windows at their
// defaults under --budget 1, against the untraced workload, the two
// alternated in each round.
const (
	budgetPct = 1 // the --budget of the sentinel's runs
	// the targets: the added CPU in percent of the untraced's, and the
	// sampled shares' difference from the truth's in percent of it
	targetBudgetAdded = 1.5
	targetShareDiff   = 5.0
)

// budgetTraceFlags are sqscope trace's flags of the sentinel's runs: the
// sample windows at their defaults.
var budgetTraceFlags = []string{"--mode", "sentinel", "--budget", strconv.Itoa(budgetPct), "--workload", "--"}

// rateCmp is the WR/s sqscope gives from the counters it reads in the
// target's memory (the sum of its QPs' memory.wrs_per_s) against the
// workload's own over its traffic time, and their difference in percent
// of the workload's; Absent says which rounds had none, and why.
type rateCmp struct {
	Read, Truth summary
	diffCmp
}

// diffCmp is a figure's difference from the truth's, round by round, in
// percent of the truth's; Absent says which rounds had none, and why.
type diffCmp struct {
	Diff   summary
	Absent string
}

// within says whether every round's difference is within ±pct with none
// absent, and how far the farthest was.
func (c diffCmp) within(pct float64) (bool, float64) {
	far := max(math.Abs(c.Diff.Min), math.Abs(c.Diff.Max))
	return c.Diff.N > 0 && c.Absent == "" && far <= pct, far
}

// verdict holds the comparison to targetShareDiff in every round: what
// was compared, what was found (said), and what that rests on.
func (c diffCmp) verdict(what, said, basis string) string {
	ok, far := c.within(targetShareDiff)
	if c.Diff.N > 0 {
		said += fmt.Sprintf("; the farthest round %.2f%%", far)
	}
	return verdict(fmt.Sprintf("%s within ±%.0f%% of the truth's in every round", what, targetShareDiff), ok, said+"; "+basis)
}

// rateOf compares the WR/s sqscope read with the workload's, round by
// round. A round's figure is absent when a QP sqscope listed had no
// rate from memory (fewer than two reads, or no layout for its
// provider): a sum short of a QP would look like a slower workload.
func rateOf(rounds []budgetRound) rateCmp {
	var read, truth, diff []float64
	var why []string
	for i, rd := range rounds {
		sum, missing := 0.0, 0
		for _, q := range rd.Trace.QPs {
			if q.Memory == nil || q.Memory.WRPerS == 0 {
				missing++
				continue
			}
			sum += q.Memory.WRPerS
		}
		w := rd.Traced.wrsPerSec()
		switch {
		case len(rd.Trace.QPs) == 0:
			why = append(why, fmt.Sprintf("round %d: no QP listed", i+1))
		case missing > 0:
			why = append(why, fmt.Sprintf("round %d: %d of %d QPs with no rate read from memory", i+1, missing, len(rd.Trace.QPs)))
		case w == 0:
			why = append(why, fmt.Sprintf("round %d: the workload gave no WR/s", i+1))
		default:
			read, truth, diff = append(read, sum), append(truth, w), append(diff, 100*(sum-w)/w)
		}
	}
	return rateCmp{Read: summarize(read), Truth: summarize(truth), diffCmp: diffCmp{summarize(diff), strings.Join(why, "; ")}}
}

// say is the comparison in a table's cell or, for a sentence, in words.
func (c rateCmp) say(sentence bool) string {
	if c.Diff.N == 0 {
		return "absent: " + c.Absent
	}
	f := "%s vs %s: %s"
	if sentence {
		f = "read %s WR/s vs the workload's %s, a difference of %s%% of the workload's"
	}
	return withWhy(fmt.Sprintf(f, fmtSummary(c.Read), fmtSummary(c.Truth), fmtPct(c.Diff, true)), c.Absent)
}

// budgetRound is one round: the untraced run and the sentinel's, with
// the tracer's summary.
type budgetRound struct {
	Untraced, Traced wlRun
	Trace            traceJSON
}

// shareCmp is a share of the WRs (inline or signaled) the windows saw
// against the truth's over the whole run, both in percent, and their
// difference in percent of the truth's; Absent says why there is none.
type shareCmp struct {
	Sampled, Truth summary
	diffCmp
	// Estimated: rounds whose share came from sqscope's own estimate
	// (sentinel.sampling.shares), Intervals those of them with an
	// interval, Inside those whose interval held the truth's share
	Estimated, Intervals, Inside int
}

// budgetRow is one post list length's rounds.
type budgetRow struct {
	List, Secs, Rounds int
	Untraced, NS       summary // the traffic thread's CPU ns per post call
	Ratio              summary // NS / untraced NS of the same round
	AddedPct           summary // (NS - untraced NS) / untraced NS, in percent
	Windows            summary
	// SharePct is the windows' probe cost sqscope measured, in percent of
	// the target's own CPU (sentinel.sampling.probe_cost.share_pct);
	// ShareAbsent says why it is missing from some or all rounds.
	SharePct         summary
	ShareAbsent      string
	Inline, Signaled shareCmp
	// Rate: the WR/s sqscope read against the workload's
	Rate rateCmp
	// the workload's own WR/s: its WRs over its traffic time
	UntracedWRs, TracedWRs summary
}

// budgetFlags is the budget section's workload: the overhead one, run
// for secs seconds.
func budgetFlags(list, secs int) []string {
	return wlFlags(list, "-D", strconv.Itoa(secs))
}

func budgetCommand(c *config, wl []string) string {
	return fmt.Sprintf("%s trace --json %s %s --json-out F", c.show(), strings.Join(budgetTraceFlags, " "), strings.Join(wl, " "))
}

// budget runs the workload untraced and in the sentinel mode with
// --budget 1, alternated, -budget-rounds times per post list length.
func budget(ctx context.Context, c *config, r *report) error {
	dir, err := os.MkdirTemp("", "sqbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	timeout := time.Duration(c.budgetSecs)*time.Second + 3*time.Minute
	for _, list := range c.budgetLists {
		wl := budgetFlags(list, c.budgetSecs)
		rounds := make([]budgetRound, c.budgetRounds)
		for round := range rounds {
			rd := &rounds[round]
			for k := range 2 {
				traced := (k+round)%2 == 1
				name := map[bool]string{false: "untraced", true: fmt.Sprintf("sentinel --budget %d", budgetPct)}[traced]
				fmt.Fprintf(c.log, "budget post_list=%d round %d of %d: %s for %d s\n", list, round+1, len(rounds), name, c.budgetSecs)
				err := inTempDir(ctx, dir, timeout, func(ctx context.Context, tmp string) (err error) {
					if traced {
						rd.Traced, rd.Trace, err = runTracedJSON(ctx, c, budgetTraceFlags, wl, tmp)
					} else {
						rd.Untraced, err = untraced.run(ctx, c, wl, tmp)
					}
					return err
				})
				if err != nil {
					return fmt.Errorf("%s, post_list %d: %w", name, list, err)
				}
			}
		}
		r.budget = append(r.budget, budgetRowOf(list, c.budgetSecs, rounds))
		r.commands = append(r.commands,
			fmt.Sprintf("[budget: untraced, post_list %d] %s", list, untraced.command(c, wl)),
			fmt.Sprintf("[budget: sentinel --budget %d, post_list %d] %s", budgetPct, list, budgetCommand(c, wl)))
	}
	return nil
}

// budgetRowOf summarises a post list length's rounds.
func budgetRowOf(list, secs int, rounds []budgetRound) budgetRow {
	row := budgetRow{List: list, Secs: secs, Rounds: len(rounds)}
	var un, ns, ratio, added, windows, share, uwr, twr []float64
	var why []string
	for i, rd := range rounds {
		u, t := rd.Untraced.nsPerCall(), rd.Traced.nsPerCall()
		un, ns = append(un, u), append(ns, t)
		ratio, added = append(ratio, t/u), append(added, 100*(t-u)/u)
		uwr, twr = append(uwr, rd.Untraced.wrsPerSec()), append(twr, rd.Traced.wrsPerSec())
		var sm *sampling
		if rd.Trace.Sentinel != nil {
			sm = rd.Trace.Sentinel.Sampling
		}
		switch {
		case sm == nil:
			windows = append(windows, 0)
			why = append(why, fmt.Sprintf("round %d: no window ended", i+1))
		case sm.Cost == nil:
			windows = append(windows, float64(sm.Windows))
			why = append(why, fmt.Sprintf("round %d: %s", i+1, orElse(sm.NotMeasured, "sqscope gave no cost")))
		default:
			windows, share = append(windows, float64(sm.Windows)), append(share, sm.Cost.SharePct)
		}
	}
	row.Untraced, row.NS, row.Ratio, row.AddedPct = summarize(un), summarize(ns), withCI(ratio), summarize(added)
	row.Windows, row.SharePct, row.ShareAbsent = summarize(windows), summarize(share), strings.Join(why, "; ")
	row.UntracedWRs, row.TracedWRs = summarize(uwr), summarize(twr)
	row.Rate = rateOf(rounds)
	row.Inline = shareOf(rounds, func(n counts) uint64 { return n.Inline },
		func(s *sampling) *shareEstimate { return &s.Shares.Inline })
	row.Signaled = shareOf(rounds, func(n counts) uint64 { return n.Signaled },
		func(s *sampling) *shareEstimate { return &s.Shares.Signaled })
	return row
}

// shareOf compares, round by round, the share of part in the WRs the
// sentinel's windows saw with the truth's over the traced run: sqscope's
// own estimate (est) where it gives one, and whether its interval holds
// the truth's, else the share of the WRs its QPs counted in windows.
func shareOf(rounds []budgetRound, part func(counts) uint64, est func(*sampling) *shareEstimate) shareCmp {
	var sampled, truth, diff []float64
	var unseen, none, estimated, intervals, inside int
	for _, rd := range rounds {
		var seen counts
		for _, q := range rd.Trace.QPs {
			if q.Sentinel {
				seen.add(q.WRs, q.Inline, q.Signaled)
			}
		}
		t := rd.Traced.Truth
		switch {
		case seen.WRs == 0:
			unseen++
		case t.WRs == 0 || part(t) == 0:
			none++
		default:
			s, w := float64(part(seen))/float64(seen.WRs), float64(part(t))/float64(t.WRs)
			if sm := rd.Trace.Sentinel; sm != nil && sm.Sampling != nil && sm.Sampling.Shares != nil {
				e := est(sm.Sampling)
				s = e.Pct / 100
				estimated++
				if e.Low != nil && e.High != nil {
					intervals++
					if *e.Low <= 100*w && 100*w <= *e.High {
						inside++
					}
				}
			}
			sampled, truth, diff = append(sampled, 100*s), append(truth, 100*w), append(diff, 100*(s-w)/w)
		}
	}
	c := shareCmp{Sampled: summarize(sampled), Truth: summarize(truth), diffCmp: diffCmp{Diff: summarize(diff)},
		Estimated: estimated, Intervals: intervals, Inside: inside}
	var why []string
	if unseen > 0 {
		why = append(why, fmt.Sprintf("no WR seen in a window in %d of %d rounds", unseen, len(rounds)))
	}
	if none > 0 {
		why = append(why, fmt.Sprintf("none in the truth in %d of %d rounds", none, len(rounds)))
	}
	c.Absent = strings.Join(why, "; ")
	return c
}

func orElse(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// say is the comparison in a table's cell (its unit in the header) or,
// for a sentence, in words.
func (s shareCmp) say(sentence bool) string {
	if s.Diff.N == 0 {
		return "absent: " + s.Absent
	}
	f := "%.2f vs %.2f: %s"
	if sentence {
		f = "sampled %.2f%% vs the truth's %.2f%%, a difference of %s%% of the truth's"
	}
	return withWhy(fmt.Sprintf(f, s.Sampled.Med, s.Truth.Med, fmtPct(s.Diff, true)), s.Absent)
}

// withWhy is a figure followed by why some rounds lack it, if they do.
func withWhy(figure, why string) string {
	if why == "" {
		return figure
	}
	return figure + " (" + why + ")"
}

// intervalSay says how often sqscope's stated interval held the truth's
// share.
func (s shareCmp) intervalSay() string {
	switch {
	case s.Estimated == 0:
		return "sqscope gave no estimate (sentinel.sampling.shares) in any round: the share of the WRs its QPs counted in windows"
	case s.Intervals == 0:
		return fmt.Sprintf("sqscope's estimate in %d round(s), without an interval (fewer than two windows saw WRs)", s.Estimated)
	}
	return fmt.Sprintf("sqscope's 95%% interval held the truth's in %d of %d round(s) that had one", s.Inside, s.Intervals)
}

func (b budgetRow) name() string {
	return fmt.Sprintf("sentinel --budget %d", budgetPct)
}

// shareCell is the probe cost sqscope measured, in a table's cell (unit
// "%") or, with unit, in a sentence.
func (b budgetRow) shareCell(unit string) string {
	if b.SharePct.N == 0 {
		return "absent: " + b.ShareAbsent
	}
	return withWhy(fmtPct(b.SharePct, false)+unit, b.ShareAbsent)
}

func (r *report) budgetTable() *table {
	t := &table{head: []string{"post_list", "run", "CPU ns/post call", "ratio to untraced [min–max]; 95% CI of the median",
		"added CPU, % of untraced", "windows", "probe cost sqscope measured, % of the target's CPU",
		"inline share, %: sampled vs truth: difference, % of the truth's", "signaled share, %: sampled vs truth: difference, % of the truth's",
		"WR/s (the workload's own)", "WR/s sqscope read in memory vs the workload's: difference, % of the workload's"}}
	for _, b := range r.budget {
		t.rows = append(t.rows,
			[]string{fmt.Sprint(b.List), "untraced", fmtNS(b.Untraced), "", "", "", "", "", "", fmtSummary(b.UntracedWRs), ""},
			[]string{fmt.Sprint(b.List), b.name(), fmtNS(b.NS), fmtRatioCI(b.Ratio, false), fmtPct(b.AddedPct, true), fmtNS(b.Windows),
				b.shareCell(""), b.Inline.say(false), b.Signaled.say(false), fmtSummary(b.TracedWRs), b.Rate.say(false)})
	}
	return t
}

// budgetSummary are the section's rows of the summary table.
func (r *report) budgetSummary() [][]string {
	var rows [][]string
	for _, b := range r.budget {
		what := fmt.Sprintf("post_list %d, %s over %d s", b.List, b.name(), b.Secs)
		rows = append(rows,
			[]string{what + ": thread CPU time per post call (untraced " + fmtNS(b.Untraced) + ")", fmtNS(b.NS), "ns"},
			[]string{what + ": ratio to untraced", fmtRatioCI(b.Ratio, false), "×"},
			[]string{what + ": added CPU, of the untraced's", fmtPct(b.AddedPct, true), "%"},
			[]string{what + ": probe cost sqscope measured, of the target's CPU", b.shareCell(""), "%"},
			[]string{what + ": inline share sampled vs truth: difference, of the truth's", b.Inline.say(false), "%"},
			[]string{what + ": signaled share sampled vs truth: difference, of the truth's", b.Signaled.say(false), "%"},
			[]string{what + ": WR/s read in memory vs the workload's: difference, of the workload's", b.Rate.say(false), "%"})
	}
	return rows
}

// budgetVerdicts holds the section to the targets: the added
// CPU, the sampled shares and the WR/s read in memory.
func (r *report) budgetVerdicts() []string {
	var out []string
	for _, b := range r.budget {
		what := fmt.Sprintf("post_list %d, %s over %d s", b.List, b.name(), b.Secs)
		out = append(out, verdict(fmt.Sprintf("%s: added CPU ≤ %.1f%% of the untraced's", what, targetBudgetAdded), b.AddedPct.Med <= targetBudgetAdded,
			fmt.Sprintf("%s%% of %d rounds; sqscope measured %s", fmtPct(b.AddedPct, true), b.Rounds, b.shareCell("%"))))
		for _, s := range []struct {
			name string
			cmp  shareCmp
		}{{"inline", b.Inline}, {"signaled", b.Signaled}} {
			out = append(out, s.cmp.verdict(fmt.Sprintf("%s: sampled %s share", what, s.name), s.cmp.say(true), s.cmp.intervalSay()))
		}
		out = append(out, b.Rate.verdict(what+": WR/s", b.Rate.say(true), "a rate of counts read, not an estimate: it has no interval"))
	}
	return out
}

const budgetMethod = `The sentinel mode as it runs by default, its sample windows (` + "`--sample-for`" + ` 200 ms at most every
` + "`--sample-every`" + ` 10 s) under ` + "`--budget 1`" + `, over a long run of the workload above (` + "`-D`" + ` SECONDS
instead of ` + "`-n`" + `, as fast as it goes), against the same workload untraced: the two alternate in each
round, in an order rotated from round to round. "CPU ns/post call" is the traffic thread's CPU time per
post call, as above; the ratio to untraced is taken within each round (its 95% interval needs 6
rounds: ` + "`-budget-rounds`" + `), and "added CPU" is (sentinel − untraced) / untraced of the same round,
the share of its CPU the workload pays for the windows (a busy-polling thread runs the whole time either
way, so the cost shows as fewer post calls per CPU second). "windows" and "probe cost sqscope measured"
are sqscope's own account (` + "`sentinel.sampling`" + ` of ` + "`--json`" + `: the windows that ended, and
` + "`probe_cost.share_pct`" + `, the windows' probes against the target's own CPU, which the budget keeps to).
The inline and signaled shares are sqscope's estimates from the WRs the windows saw (` + "`sentinel.sampling.shares`" + `,
with their 95% intervals, whether each held the truth's said below) against the simulated HCA's
truth over the whole run (` + "`--json-out`" + `), with their difference in percent of the truth's (median
[min–max] of the rounds). "WR/s" is the workload's own rate, its WRs over its traffic time, against
the rate sqscope gives from the send-queue counters it reads in the target's memory every 100 ms
(the sum of its QPs' ` + "`memory.wrs_per_s`" + `: WRs posted between the first and the last read over the
time between them), a count, not a sample, so it has no interval; a figure sqscope does not give
is shown absent, with why.
`
