package main

import (
	"context"
	"embed"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
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
	Above   summary // NS - floor NS of the same round
	Lost    uint64  // summed over the rounds
	Exact   bool    // every traced run saw every WR
	Traced  bool
	// Capped: the rounds reached -max-runs with the ratio's interval
	// still wider than ±ciTarget
	Capped bool
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
	return []string{"-s", "64", "-I", "64", "-Q", "16", "-l", strconv.Itoa(list), "-n", strconv.FormatUint(n, 10), "--sim-deterministic"}
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
				rd, err := os.MkdirTemp(dir, "run")
				if err != nil {
					return err
				}
				rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
				w, err := v.run(rctx, c, wl, rd)
				cancel()
				os.RemoveAll(rd)
				if err != nil {
					return fmt.Errorf("%s, post_list %d: %w", v.name, list, err)
				}
				runs[i] = append(runs[i], w)
			}
		}
		for _, i := range wideAtEnd {
			r.notes = append(r.notes, fmt.Sprintf("post_list %d, %s: the ratio's interval is still wider than ±%.0f%% after %d rounds (-max-runs)",
				list, variants[i].name, 100*ciTarget, c.maxRuns))
		}
		floor := runs[1]
		for i, v := range variants {
			row := ovRow{List: list, Variant: v, Exact: true}
			var ns, wall, post, ratio, above []float64
			for k, w := range runs[i] {
				ns = append(ns, w.nsPerCall())
				wall = append(wall, w.wallNSPerCall())
				post = append(post, w.PostNS)
				ratio = append(ratio, w.nsPerCall()/floor[k].nsPerCall())
				above = append(above, w.nsPerCall()-floor[k].nsPerCall())
				row.Lost += w.Lost
				if w.Traced {
					row.Traced = true
					if w.TracedWR != w.WRs {
						row.Exact = false
					}
				}
			}
			row.NS, row.Wall, row.PostNS, row.Ratio, row.Above = summarize(ns), summarize(wall), summarize(post), withCI(ratio), summarize(above)
			row.Capped = slices.Contains(wideAtEnd, i)
			r.overhead = append(r.overhead, row)
		}
		for _, v := range variants {
			r.commands = append(r.commands, fmt.Sprintf("[%s, post_list %d] %s", v.name, list, v.command(c, wl)))
		}
	}
	return nil
}
