package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sqscope/sqscope/bpf/bench"
)

// build is an sqscope executable and the name the report gives it.
type build struct{ name, bin string }

// qpcThreads is the workload's threads in the cache measurements; each
// posts to its share of the QPs in turn.
const qpcThreads = 4

// qpcPerThread is the QPs per thread measured.
var qpcPerThread = []int{1, 4, 16, 64}

// qpcShapes names the caches of bpf/bench/qpcache.bpf.c, in the order of
// its qpc_counts. sqscope keeps two ways of 2 << SQ_QPN_SET_BITS
// entries (bpf/qpn_cache.bpf.h).
var qpcShapes = []string{
	"1 entry (the QP last posted to)",
	"2-way, 4 entries", "2-way, 8 entries", "2-way, 16 entries", "2-way, 32 entries", "2-way, 64 entries", "2-way, 128 entries",
	"direct-mapped, 4 entries", "direct-mapped, 8 entries", "direct-mapped, 16 entries", "direct-mapped, 32 entries", "direct-mapped, 64 entries", "direct-mapped, 128 entries",
}

// qpcHitRow is the hit rate of every cache shape at one number of QPs per
// thread.
type qpcHitRow struct {
	PerThread int
	Posts     uint64    // posts looked up
	Hit       []float64 // per shape, share of the posts
}

// qpcTimeRow is one build's run time per hit of the program that reads
// the QP number, at one number of QPs per thread.
type qpcTimeRow struct {
	Build     string
	Mode      string
	Prog      string
	PerThread int
	NS        summary
	Ratio     summary // to the baseline build in the same round (N 0: none)
}

// qpcFlags is the workload of the cache measurements: qpcThreads threads
// of perThread QPs each, posts WRs per thread (post_list 1).
func qpcFlags(perThread int, posts uint64) []string {
	n := posts / uint64(perThread)
	return []string{"-s", "64", "-I", "64", "-Q", "16", "-l", "1", "-n", strconv.FormatUint(n, 10), "--sim-deterministic",
		"--qps", strconv.Itoa(qpcThreads * perThread), "--threads", strconv.Itoa(qpcThreads)}
}

// qpcShown is the workload's flags as the report shows them, with K QPs
// per thread and n WRs per QP.
func qpcShown(n string) string {
	return fmt.Sprintf("-s 64 -I 64 -Q 16 -l 1 -n %s --sim-deterministic --qps %d*K --threads %d", n, qpcThreads, qpcThreads)
}

// qpCache measures the per-thread cache of QP numbers: the hit rate of
// each shape (bpf/bench/qpcache.bpf.c), then the run time per hit of the
// programs that look the number up (post_send's return in the events
// mode, its entry in the counters mode) in this build and in those of
// -baseline and -build, rounds alternating them.
func qpCache(ctx context.Context, c *config, r *report) error {
	dir, err := os.MkdirTemp("", "sqbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, k := range qpcPerThread {
		fmt.Fprintf(c.log, "qpcache: hit rate, %d QPs per thread\n", k)
		row, err := qpcHits(ctx, c, qpcFlags(k, 50000), dir)
		if err != nil {
			return err
		}
		row.PerThread = k
		r.qpcHits = append(r.qpcHits, row)
	}
	r.commands = append(r.commands, fmt.Sprintf("%s workload %s --wait-signal --ready-file R --json-out F (K QPs per thread, K in %v, N = 50000/K); qpcache_entry of bpf/bench/qpcache.bpf.c attached to sim_post_send's entry",
		c.show(), qpcShown("50000/K"), qpcPerThread))

	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return fmt.Errorf("enabling BPF run-time statistics: %w", err)
	}
	defer st.Close()
	builds := []build{{"this build", c.sqscope}}
	if c.baseline != "" {
		builds = append(builds, build{"baseline", c.baseline})
	}
	builds = append(builds, c.builds...)
	type variant struct {
		b         build
		mode      string
		prog      string
		perThread int
	}
	var vs []variant
	for _, k := range []int{1, 64} {
		for _, m := range []struct{ mode, prog string }{{"events", "post_send_ret"}, {"counters", "post_send_entry"}} {
			for _, b := range builds {
				vs = append(vs, variant{b, m.mode, m.prog, k})
			}
		}
	}
	ns := make([][]float64, len(vs))
	for round := 0; round < c.runs; round++ {
		for j := range vs {
			i := (j + round) % len(vs) // the order rotated each round
			v := vs[i]
			fmt.Fprintf(c.log, "qpcache: round %d, %s %s, %d QPs per thread\n", round+1, v.b.name, v.mode, v.perThread)
			row, err := tracedStatsOf(ctx, v.b.bin, v.b.name, v.mode, qpcFlags(v.perThread, 200000), dir)
			if err != nil {
				return err
			}
			if row.Runs[v.prog] == 0 {
				return fmt.Errorf("%s %s: no runs of %s", v.b.name, v.mode, v.prog)
			}
			ns[i] = append(ns[i], row.NS[v.prog])
			fmt.Fprintf(c.log, "qpcache: %s %.0f ns per hit\n", v.prog, row.NS[v.prog])
		}
	}
	for i, v := range vs {
		row := qpcTimeRow{Build: v.b.name, Mode: v.mode, Prog: v.prog, PerThread: v.perThread, NS: summarize(ns[i])}
		// the ratio to the baseline's run of the same round
		for j, b := range vs {
			if b.b.name == "baseline" && b.mode == v.mode && b.perThread == v.perThread && j != i {
				ratios := make([]float64, len(ns[i]))
				for k := range ratios {
					ratios[k] = ns[i][k] / ns[j][k]
				}
				row.Ratio = summarize(ratios)
			}
		}
		r.qpcTimes = append(r.qpcTimes, row)
	}
	r.commands = append(r.commands, fmt.Sprintf("%s trace --mode M --workload -- %s --json-out F (M events and counters, K in [1 64], N = 200000/K), BPF_ENABLE_STATS on, rounds alternating this build, the -baseline one and each -build",
		c.show(), qpcShown("200000/K")))
	return nil
}

// qpcHits runs the workload wl with qpcache_entry attached and returns
// each shape's hit rate.
func qpcHits(ctx context.Context, c *config, wl []string, dir string) (qpcHitRow, error) {
	spec, err := bench.LoadQPCache()
	if err != nil {
		return qpcHitRow{}, err
	}
	var objs bench.QPCacheObjects
	up, err := loadForUprobes(spec, &objs)
	if err != nil {
		return qpcHitRow{}, fmt.Errorf("loading the qpcache program: %w", err)
	}
	defer objs.Close()
	w, err := runAttached(ctx, c, wl, dir, up, [4]*ebpf.Program{objs.QpcacheEntry, nil, nil, nil})
	if err != nil {
		return qpcHitRow{}, err
	}
	var unslotted uint64
	if err := objs.QpcUnslotted.Get(&unslotted); err != nil {
		return qpcHitRow{}, err
	}
	if unslotted > 0 {
		return qpcHitRow{}, fmt.Errorf("%d posts of threads that found their slot taken: not counted", unslotted)
	}
	row := qpcHitRow{Hit: make([]float64, len(qpcShapes))}
	for i := range qpcShapes {
		var per []bench.QPCacheQpcCount
		if err := objs.QpcCounts.Lookup(uint32(i), &per); err != nil {
			return row, fmt.Errorf("reading qpc_counts: %w", err)
		}
		var hits, misses uint64
		for _, p := range per {
			hits += p.Hits
			misses += p.Misses
		}
		if hits+misses != w.PostCalls {
			return row, fmt.Errorf("%s: %d posts looked up, the workload made %d", qpcShapes[i], hits+misses, w.PostCalls)
		}
		row.Posts = hits + misses
		row.Hit[i] = float64(hits) / float64(hits+misses)
	}
	return row, nil
}

func (r *report) qpcHitTable() *table {
	t := &table{head: []string{"cache"}}
	for _, h := range r.qpcHits {
		t.head = append(t.head, fmt.Sprintf("%d QP/thread", h.PerThread))
	}
	for i, s := range qpcShapes {
		row := []string{s}
		for _, h := range r.qpcHits {
			row = append(row, fmt.Sprintf("%.1f%%", 100*h.Hit[i]))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func (r *report) qpcTimeTable() *table {
	t := &table{head: []string{"QPs per thread", "mode", "program", "build", "ns per hit, median [min–max]", "ratio to baseline in the round, median [min–max]"}}
	for _, q := range r.qpcTimes {
		ratio := "-"
		if q.Ratio.N > 0 {
			ratio = fmtRatio(q.Ratio)
		}
		t.rows = append(t.rows, []string{fmt.Sprint(q.PerThread), q.Mode, q.Prog, q.Build, fmtNS(q.NS), ratio})
	}
	return t
}

const qpcMethod = `A thread keeps the numbers of the QPs it posted to (` + "`bpf/qpn_cache.bpf.h`" + `): a post that finds
its QP's there saves a ` + "`bpf_probe_read_user`" + `. The built-in workload runs 4 threads, each posting to
its QPs in turn (` + "`--qps 4K --threads 4`" + `); ` + "`bpf/bench/qpcache.bpf.c`" + `, attached to the simulated
post_send, looks every post's QP up in caches of several shapes at once, with the hash sqscope uses, and
counts the hits. Then the programs that look the number up run with the kernel's BPF statistics on,
this build and the ` + "`-baseline`" + ` one alternating in each round (order rotated): median [min–max] of
the rounds.
`
