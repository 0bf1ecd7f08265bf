package main

import (
	"context"
	"embed"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed perwr.bt
var scripts embed.FS

var perWRScript = func() string {
	b, err := scripts.ReadFile("perwr.bt")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// summary is the median, minimum and maximum of a set of runs, and for
// the overhead ratios the median's confidence interval (ci.go).
type summary struct {
	Med, Min, Max float64
	N             int
	// CILo and CIHi bound the median with probability CICoverage; HasCI
	// is false when there are too few runs for one
	CILo, CIHi, CICoverage float64
	HasCI                  bool
}

func summarize(xs []float64) summary {
	if len(xs) == 0 {
		return summary{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return summary{Med: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// ovRow is one variant at one post_list.
type ovRow struct {
	List    int
	Variant variant
	NS      summary // thread CPU ns per post call (post + poll + loop)
	Wall    summary // wall ns per post call
	PostNS  summary // ns inside the post call
	Ratio   summary // NS / floor NS of the same round
	// RatioU is NS / untraced NS of the same round: what the application
	// pays, where Ratio is what the probes add to a trap's price
	RatioU summary
	// RatioB is NS / the -baseline build's NS in the same mode and round
	// (N 0: no baseline, or not sqscope's events or counters mode)
	RatioB summary
	Above  summary // NS - floor NS of the same round
	Lost   uint64  // summed over the rounds
	Exact  bool    // every traced run saw every WR
	Traced bool
	// Sampled: the tracer sees the calls of its sample windows only (the
	// sentinel mode); Seen of WRs were in them, summed over the rounds
	Sampled   bool
	Seen, WRs uint64
	// Capped: the rounds reached -max-runs with the ratio's interval
	// still wider than ±ciTarget
	Capped bool
}

// ovRowOf summarises a variant's runs against the untraced and the
// floor's runs of the same rounds.
func ovRowOf(list int, v variant, runs, untraced, floor []wlRun) ovRow {
	row := ovRow{List: list, Variant: v, Exact: true}
	var ns, wall, post, ratio, ratioU, above []float64
	for k, w := range runs {
		ns = append(ns, w.nsPerCall())
		wall = append(wall, w.wallNSPerCall())
		post = append(post, w.PostNS)
		ratio = append(ratio, w.nsPerCall()/floor[k].nsPerCall())
		ratioU = append(ratioU, w.nsPerCall()/untraced[k].nsPerCall())
		above = append(above, w.nsPerCall()-floor[k].nsPerCall())
		row.Lost += w.Lost
		if w.Traced {
			row.Traced = true
			row.Sampled = row.Sampled || w.Sampled
			row.Seen += w.TracedWR
			row.WRs += w.WRs
			if w.TracedWR != w.WRs {
				row.Exact = false
			}
		}
	}
	row.NS, row.Wall, row.PostNS, row.Above = summarize(ns), summarize(wall), summarize(post), summarize(above)
	row.Ratio, row.RatioU = withCI(ratio), withCI(ratioU)
	return row
}

// ratioOf is the ratio of each round's CPU per post call to another
// variant's of the same round.
func ratioOf(runs, other []wlRun) summary {
	var r []float64
	for k, w := range runs {
		if k < len(other) {
			r = append(r, w.nsPerCall()/other[k].nsPerCall())
		}
	}
	return withCI(r)
}

// inTempDir runs f in a new directory under dir, removed after it, with
// timeout on ctx.
func inTempDir(ctx context.Context, dir string, timeout time.Duration, f func(ctx context.Context, rd string) error) error {
	rd, err := os.MkdirTemp(dir, "run")
	if err != nil {
		return err
	}
	defer os.RemoveAll(rd)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(ctx, rd)
}

// flags is the overhead workload for post_list list, at the length
// configured for it.
func (c *config) flags(list int) []string {
	n := c.iters1
	if list == 16 {
		n = c.iters16
	}
	return overheadFlags(list, n)
}

func overheadFlags(list int, n uint64) []string {
	return wlFlags(list, "-n", strconv.FormatUint(n, 10))
}

// wlFlags is the workload the overhead and the budget sections run at
// post_list list, of the length given by length (-n N or -D SECONDS).
func wlFlags(list int, length ...string) []string {
	fl := append([]string{"-s", "64", "-I", "64", "-Q", "16", "-l", strconv.Itoa(list)}, length...)
	return append(fl, "--sim-deterministic")
}

// overhead measures the cost of tracing per post call: every variant runs
// the same fixed workload once per round, in an order rotated each round.
func overhead(ctx context.Context, c *config, r *report) error {
	variants := []variant{untraced, floorVariant, leastEvents, leastCounters, sqscopeVariant("events"), sqscopeVariant("counters"), sqscopeVariant("sentinel")}
	if _, err := lookPath(c.bpftrace); err != nil {
		fmt.Fprintf(c.log, "sqbench: %v: the bpftrace variant is skipped\n", err)
		r.notes = append(r.notes, fmt.Sprintf("bpftrace not found (%v): its variant was not measured", err))
	} else {
		variants = append(variants, bpftraceVariant)
	}
	if c.baseline != "" {
		for _, mode := range []string{"events", "counters"} {
			variants = append(variants, tracedVariant("baseline "+mode, mode, c.baseline,
				"the same mode traced by the baseline build given with -baseline"))
		}
	}
	dir, err := os.MkdirTemp("", "sqbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	for _, list := range []int{1, 16} {
		wl := c.flags(list)
		runs := make([][]wlRun, len(variants))
		var wideAtEnd []int
		for round := 0; ; round++ {
			// at least -runs rounds, then more until every ratio's
			// interval is within ±ciTarget, up to -max-runs
			if round >= c.runs {
				wideAtEnd = wide(roundRatios(runs, 1), 1, 0)
				if len(wideAtEnd) == 0 || round >= c.maxRuns {
					break
				}
				if round == c.runs {
					fmt.Fprintf(c.log, "overhead post_list=%d: %d ratios wider than ±%.0f%%: more rounds\n", list, len(wideAtEnd), 100*ciTarget)
				}
			}
			for k := range variants {
				i := (k + round) % len(variants)
				v := variants[i]
				fmt.Fprintf(c.log, "overhead post_list=%d round %d (at least %d, at most %d): %s\n", list, round+1, c.runs, c.maxRuns, v.name)
				err := inTempDir(ctx, dir, 3*time.Minute, func(ctx context.Context, rd string) error {
					w, err := v.run(ctx, c, wl, rd)
					if err == nil {
						runs[i] = append(runs[i], w)
					}
					return err
				})
				if err != nil {
					return fmt.Errorf("%s, post_list %d: %w", v.name, list, err)
				}
			}
		}
		for _, i := range wideAtEnd {
			r.notes = append(r.notes, fmt.Sprintf("post_list %d, %s: the ratio's interval is still wider than ±%.0f%% after %d rounds (-max-runs)",
				list, variants[i].name, 100*ciTarget, c.maxRuns))
		}
		for i, v := range variants {
			row := ovRowOf(list, v, runs[i], runs[0], runs[1])
			row.Capped = slices.Contains(wideAtEnd, i)
			if mode, ok := strings.CutPrefix(v.name, "sqscope "); ok {
				if b := slices.IndexFunc(variants, func(b variant) bool { return b.name == "baseline "+mode }); b >= 0 {
					row.RatioB = ratioOf(runs[i], runs[b])
				}
			}
			r.overhead = append(r.overhead, row)
		}
		for _, v := range variants {
			r.commands = append(r.commands, fmt.Sprintf("[%s, post_list %d] %s", v.name, list, v.command(c, wl)))
		}
	}
	return nil
}
