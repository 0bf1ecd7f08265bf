// Command sqbench runs every sqscope benchmark, prints one table and writes
// it, with the machine, kernel, date and the exact commands, to
// BENCHMARKS.md. `make bench` builds sqscope and runs it (as root: the probe
// benchmarks load eBPF).
//
// Comparisons alternate their variants inside each round, rotating the
// order from round to round, and report the median of the rounds with the
// minimum and maximum; ratios are taken within a round, then summarised
// with the 95% confidence interval of their median, rounds being added
// until it is within ±3% (ci.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqbench:", err)
		os.Exit(1)
	}
}

type config struct {
	sqscope  string // the sqscope executable under test
	bpftrace string
	runs     int
	maxRuns  int    // rounds may be added up to this many (ci.go)
	out      string // BENCHMARKS.md
	iters1   uint64 // -n of the post_list 1 overhead runs
	iters16  uint64 // -n of the post_list 16 overhead runs
	only     string // run one section (tests and quick looks)
	goBin    string
	baseline string  // another sqscope build to compare with
	builds   []build // more builds for the qpcache rounds (-build)
	slow     time.Duration
	// the budget section (budget.go): seconds per run, rounds, post
	// list lengths
	budgetSecs, budgetRounds int
	budgetLists              []int
	log                      io.Writer
}

// sections are the values of -only.
var sections = []string{"overhead", "breakdown", "budget", "qpcache", "loss", "go"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := config{log: stderr, budgetLists: []int{1, 16}}
	fs := flag.NewFlagSet("sqbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.sqscope, "sqscope", "./sqscope", "the sqscope executable to measure")
	fs.StringVar(&c.bpftrace, "bpftrace", "bpftrace", "the bpftrace executable (0.17)")
	fs.IntVar(&c.runs, "runs", 7, "rounds of each comparison at least (at least 6 for the ratios' confidence intervals)")
	fs.IntVar(&c.maxRuns, "max-runs", 60, "rounds of the overhead comparison at most: rounds are added until every ratio's 95% interval is within ±3%")
	fs.StringVar(&c.out, "o", "BENCHMARKS.md", "write the report here (empty: do not write)")
	fs.Uint64Var(&c.iters1, "n1", 300000, "WRs per overhead run at post_list 1")
	fs.Uint64Var(&c.iters16, "n16", 800000, "WRs per overhead run at post_list 16")
	fs.StringVar(&c.only, "only", "", "run one section: overhead (with breakdown), breakdown, budget, qpcache, loss or go")
	fs.IntVar(&c.budgetSecs, "budget-secs", 60, "seconds of each run of the budget section (the sentinel with --budget 1 against the untraced workload)")
	fs.IntVar(&c.budgetRounds, "budget-rounds", 3, "rounds of the budget section (its ratios' 95% intervals need 6)")
	fs.Func("budget-lists", "post list lengths of the budget section, comma-separated (default 1,16)", func(v string) error {
		lists, err := parseLists(v)
		c.budgetLists = lists
		return err
	})
	fs.StringVar(&c.goBin, "go", "go", "the go command (for the go test benchmarks)")
	fs.StringVar(&c.baseline, "baseline", "", "another sqscope build: its events and counters modes join the overhead and qpcache rounds")
	fs.DurationVar(&c.slow, "slow-traps", 0, "only make every uprobe trap of the host this much dearer, until interrupted (to check tests as on a slower host)")
	fs.Func("build", "NAME=PATH: one more sqscope build whose run time joins the qpcache rounds (repeatable)", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("want NAME=PATH, got %q", v)
		}
		c.builds = append(c.builds, build{name, path})
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sqbench [flags]   (as root; `make bench` runs it)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if c.slow != 0 {
		if os.Geteuid() != 0 {
			return errors.New("-slow-traps loads eBPF: run as root")
		}
		return slowTraps(ctx, c.slow, stdout, stderr)
	}
	if c.runs < 1 {
		return fmt.Errorf("-runs %d: want at least 1", c.runs)
	}
	if c.maxRuns < c.runs {
		return fmt.Errorf("-max-runs %d is below -runs %d", c.maxRuns, c.runs)
	}
	if c.only != "" && !slices.Contains(sections, c.only) {
		return fmt.Errorf("-only %q: want one of %s", c.only, strings.Join(sections, ", "))
	}
	if c.budgetSecs < 1 || c.budgetRounds < 1 {
		return fmt.Errorf("-budget-secs %d, -budget-rounds %d: want at least 1 each", c.budgetSecs, c.budgetRounds)
	}
	abs, err := filepath.Abs(c.sqscope)
	if err != nil {
		return err
	}
	c.sqscope = abs
	if _, err := os.Stat(c.sqscope); err != nil {
		return fmt.Errorf("the sqscope executable: %w (run `make build` first)", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("the probe benchmarks load eBPF: run as root (sudo make bench)")
	}

	r := &report{machine: describeMachine(c.bpftrace), argv: shownArgs(args)}
	r.background = cpuBusy(time.Second)
	if r.background > 25 {
		fmt.Fprintf(stderr, "sqbench: %.0f%% of the CPUs are busy with other work: expect noisy numbers\n", r.background)
	}
	p0, havePSI := cpuPressure()
	r.start = time.Now()
	if c.only == "" || c.only == "overhead" {
		if err := overhead(ctx, &c, r); err != nil {
			return fmt.Errorf("probe overhead: %w", err)
		}
	}
	if c.only == "" || c.only == "overhead" || c.only == "breakdown" {
		if err := breakdown(ctx, &c, r); err != nil {
			return fmt.Errorf("per-program run time: %w", err)
		}
		if err := helperCosts(ctx, &c, r); err != nil {
			return fmt.Errorf("helper costs: %w", err)
		}
	}
	if c.only == "" || c.only == "budget" {
		if err := budget(ctx, &c, r); err != nil {
			return fmt.Errorf("the sentinel under a budget: %w", err)
		}
	}
	if c.only == "" || c.only == "qpcache" {
		if err := qpCache(ctx, &c, r); err != nil {
			return fmt.Errorf("QP number cache: %w", err)
		}
	}
	if c.only == "" || c.only == "loss" {
		if err := loss(ctx, &c, r); err != nil {
			return fmt.Errorf("loss under load: %w", err)
		}
	}
	if c.only == "" || c.only == "go" {
		if err := goBenchmarks(ctx, &c, r); err != nil {
			return fmt.Errorf("go test benchmarks: %w", err)
		}
	}
	r.elapsed = time.Since(r.start)
	if p1, ok := cpuPressure(); ok && havePSI {
		r.pressure = 100 * float64(p1-p0) / float64(r.elapsed.Microseconds())
	}
	md := r.markdown(&c)
	fmt.Fprint(stdout, r.text())
	if c.out != "" {
		if err := os.WriteFile(c.out, []byte(md), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", c.out, err)
		}
		fmt.Fprintf(stdout, "\nwritten to %s (%s)\n", c.out, r.elapsed.Round(time.Second))
	}
	return nil
}

// shownArgs is sqbench's command line as the report shows it: a program
// given by its path (-go, -sqscope, -bpftrace) by its name, as any host
// runs it.
func shownArgs(args []string) []string {
	out := []string{"sqbench"}
	for i, a := range args {
		if i > 0 && (args[i-1] == "-go" || args[i-1] == "-bpftrace") && filepath.IsAbs(a) {
			a = filepath.Base(a)
		}
		out = append(out, a)
	}
	return out
}

// parseLists reads post list lengths, comma-separated.
func parseLists(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("want post list lengths from 1 to 16, comma-separated, got %q", v)
		}
		out = append(out, n)
	}
	return out, nil
}
