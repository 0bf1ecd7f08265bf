package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/sqscope/sqscope/bpf/bench"
	"github.com/sqscope/sqscope/probe"
)

// costReps is COST_REPS of bpf/bench/cost.bpf.c.
const costReps = 10

// costOp is one operation of bpf/bench/cost.bpf.c: its program and how many
// times the program does it.
type costOp struct {
	prog string
	what string
	reps int
}

var costOps = []costOp{
	{"cost_read_wr", "bpf_probe_read_user of a WR header (40 B)", 1},
	{"cost_read_wr_sge", "the same, then of its SGE (16 B): a one-WR post", 1},
	{"cost_read2k", "bpf_probe_read_user of 2 KiB (a window of 16 WRs)", 1},
	{"cost_ktime", "bpf_ktime_get_ns", 1},
	{"cost_thread_slot", "thread-id slot lookup (per-thread state)", 1},
	{"cost_task_storage", "task storage lookup (per-thread state when the slot is taken)", 1},
	{"cost_hash_lookup", "hash map lookup", 1},
	{"cost_lru_update", "LRU hash update (the per-call argument maps before)", 1},
	{"cost_ringbuf_output", "bpf_ringbuf_output of 104 B (a one-WR post record), reader draining", 1},
	{"cost_bpf_loop", "bpf_loop iteration", costReps},
}

// costRow is the time one operation takes, above the empty program.
type costRow struct {
	op costOp
	ns float64
}

// helperCosts attaches the programs of bpf/bench/cost.bpf.c to the simulated
// post_send of a workload and reads their run times.
func helperCosts(ctx context.Context, c *config, r *report) error {
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return fmt.Errorf("enabling BPF run-time statistics: %w", err)
	}
	defer st.Close()
	spec, err := bench.LoadCost()
	if err != nil {
		return err
	}
	var up probe.Uprobes
	var coll *ebpf.Collection
	if err := up.Load(spec, func() (err error) {
		coll, err = ebpf.NewCollection(spec)
		return err
	}); err != nil {
		return fmt.Errorf("loading bpf/bench/cost.bpf.c: %w", err)
	}
	defer coll.Close()
	rd, err := ringbuf.NewReader(coll.Maps["cost_ring"])
	if err != nil {
		return err
	}
	defer rd.Close()
	// drain the ring as sqscope's reader does: records do not wake it,
	// it looks every 10 ms
	done := make(chan struct{})
	defer close(done)
	go func() {
		var rec ringbuf.Record
		for {
			select {
			case <-done:
				return
			default:
			}
			rd.SetDeadline(time.Now().Add(10 * time.Millisecond))
			if err := rd.ReadInto(&rec); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
		}
	}()

	dir, err := os.MkdirTemp("", "sqbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	wl := overheadFlags(1, c.iters1)
	cmd, js, err := startWaiting(ctx, c, wl, dir)
	if err != nil {
		return err
	}
	pid := cmd.Process.Pid
	fail := func(err error) error {
		cmd.Process.Kill()
		cmd.Wait()
		return err
	}
	sym, err := probe.ResolveSymbol(c.sqscope, "sim_post_send")
	if err != nil {
		return fail(err)
	}
	ex, err := link.OpenExecutable(c.sqscope)
	if err != nil {
		return fail(err)
	}
	names := append([]string{"cost_empty"}, func() []string {
		var n []string
		for _, o := range costOps {
			n = append(n, o.prog)
		}
		return n
	}()...)
	for _, name := range names {
		prog := coll.Programs[name]
		if prog == nil {
			return fail(fmt.Errorf("bpf/bench/cost.bpf.c has no program %s", name))
		}
		l, err := up.Attach(ex, prog, sym.Offset, 0, pid, false)
		if err != nil {
			return fail(fmt.Errorf("attaching %s: %w", name, err))
		}
		defer l.Close()
	}
	fmt.Fprintf(c.log, "helper costs: %d programs on sim_post_send\n", len(names))
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return fail(err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("workload: %v", err)
	}
	if _, err := readWorkloadJSON(js); err != nil {
		return err
	}
	perRun := func(name string) (float64, error) {
		s, err := coll.Programs[name].Stats()
		if err != nil {
			return 0, err
		}
		if s.RunCount == 0 {
			return 0, errors.New(name + " never ran")
		}
		return float64(s.Runtime.Nanoseconds()) / float64(s.RunCount), nil
	}
	var lost uint64
	if v := coll.Variables["cost_lost"]; v != nil {
		v.Get(&lost)
	}
	if lost > 0 {
		r.notes = append(r.notes, fmt.Sprintf("helper costs: %d ring-buffer records did not fit; bpf_ringbuf_output's cost is partly that of a failure", lost))
	}
	empty, err := perRun("cost_empty")
	if err != nil {
		return err
	}
	r.costEmpty = empty
	for _, o := range costOps {
		ns, err := perRun(o.prog)
		if err != nil {
			return err
		}
		r.costs = append(r.costs, costRow{op: o, ns: (ns - empty) / float64(o.reps)})
	}
	r.commands = append(r.commands, fmt.Sprintf("helper costs: the programs of bpf/bench/cost.bpf.c on sim_post_send of `%s workload %s`, BPF_ENABLE_STATS",
		c.show(), joinArgs(wl)))
	return nil
}

func joinArgs(a []string) string { return strings.Join(a, " ") }

func (r *report) cost(prog string) float64 {
	for _, c := range r.costs {
		if c.op.prog == prog {
			return c.ns
		}
	}
	return 0
}

func (r *report) costTable() *table {
	t := &table{head: []string{"operation", "ns"}}
	t.rows = append(t.rows, []string{"an empty program (the statistics' own cost)", fmt.Sprintf("%.0f", r.costEmpty)})
	for _, c := range r.costs {
		t.rows = append(t.rows, []string{c.op.what, fmt.Sprintf("%.0f", c.ns)})
	}
	return t
}

// minimum is the least a loop iteration of the post_list 1 workload (a
// post of one WR, then one poll, empty 15 times out of 16) can cost above
// the floor in each mode, from the measured operations: the two user reads
// of the WR; per-thread state at the four probes (events) or three (the
// counters mode's successful post returns without it); and in the events
// mode the post record's timestamp and the record. The one poll in 16
// that returns a completion is left out.
func (r *report) minimum() (events, counters float64) {
	task, reads, ktime, out := r.cost("cost_thread_slot"), r.cost("cost_read_wr_sge"), r.cost("cost_ktime"), r.cost("cost_ringbuf_output")
	counters = 3*task + reads
	events = 4*task + reads + ktime + out
	return events, counters
}

// minimum16 is minimum for the post_list 16 workload, where every poll
// returns a completion: the WR and SGE arrays take a 2 KiB window read
// each, and the events mode adds the poll's record (its timestamp, a read
// of the completion, the record).
func (r *report) minimum16() (events, counters float64) {
	task, read2k, read40 := r.cost("cost_thread_slot"), r.cost("cost_read2k"), r.cost("cost_read_wr")
	ktime, out := r.cost("cost_ktime"), r.cost("cost_ringbuf_output")
	counters = 3*task + 2*read2k
	events = 4*task + 2*read2k + 2*(ktime+out) + read40
	return events, counters
}
