package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// dataPathProgs are the programs at the places the floor measures.
var dataPathProgs = []string{"post_send_entry", "post_send_ret", "poll_cq_entry", "poll_cq_ret"}

// bdRow is the kernel's own accounting of one variant's programs: mean
// run time per hit (BPF_ENABLE_STATS), which includes the ~tens of ns the
// accounting itself adds to every run (the floor's empty programs show it).
type bdRow struct {
	List    int
	Variant string
	NS      map[string]float64 // program -> ns per run
	Runs    map[string]uint64
	Calls   uint64 // post calls of the workload, to check the runs against
}

// put takes a program's run time per hit from its statistics, if it ran.
func (b bdRow) put(name string, s *ebpf.ProgramStats) {
	if s.RunCount == 0 {
		return
	}
	b.NS[name] = float64(s.Runtime.Nanoseconds()) / float64(s.RunCount)
	b.Runs[name] = s.RunCount
}

func (b bdRow) sum() float64 {
	var s float64
	for _, p := range dataPathProgs {
		s += b.NS[p]
	}
	return s
}

// breakdown runs each variant once more with the kernel's BPF run-time
// statistics on, and reads the time spent in each data-path program.
func breakdown(ctx context.Context, c *config, r *report) error {
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return fmt.Errorf("enabling BPF run-time statistics: %w", err)
	}
	defer st.Close()
	dir, err := os.MkdirTemp("", "sqbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, list := range []int{1, 16} {
		wl := c.flags(list)
		fmt.Fprintf(c.log, "breakdown post_list=%d: floor\n", list)
		fl, err := floorStats(ctx, c, wl, dir)
		if err != nil {
			return err
		}
		fl.List = list
		r.breakdown = append(r.breakdown, fl)
		for _, v := range []struct {
			name  string
			stats func(ctx context.Context, c *config, mode string, wl []string, dir string) (bdRow, error)
		}{{"least", leastStats}, {"sqscope", tracedStats}, {"baseline", baselineStats}} {
			if v.name == "baseline" && c.baseline == "" {
				continue
			}
			for _, mode := range []string{"events", "counters"} {
				fmt.Fprintf(c.log, "breakdown post_list=%d: %s %s\n", list, v.name, mode)
				row, err := v.stats(ctx, c, mode, wl, dir)
				if err != nil {
					return err
				}
				row.List = list
				r.breakdown = append(r.breakdown, row)
			}
		}
	}
	r.commands = append(r.commands, "per-program run time: the same runs with BPF_ENABLE_STATS (run_time_ns / run_cnt of each program, read through its ID)")
	return nil
}

// baselineStats is tracedStats of the -baseline build.
func baselineStats(ctx context.Context, c *config, mode string, wl []string, dir string) (bdRow, error) {
	return tracedStatsOf(ctx, c.baseline, "baseline "+mode, mode, wl, dir)
}

func floorStats(ctx context.Context, c *config, wl []string, dir string) (bdRow, error) {
	row := bdRow{Variant: "floor", NS: map[string]float64{}, Runs: map[string]uint64{}}
	var stats [2]*ebpf.ProgramStats
	w, err := runFloorWith(ctx, c, wl, dir, func(entry, ret *ebpf.Program) {
		stats[0], _ = entry.Stats()
		stats[1], _ = ret.Stats()
	})
	if err != nil {
		return row, err
	}
	row.Calls = w.PostCalls
	if stats[0] == nil || stats[1] == nil {
		return row, fmt.Errorf("no run-time statistics for the floor programs")
	}
	// One program each for entry and return, at both functions: split
	// evenly (both run once per post and once per poll).
	for i, names := range [][2]string{{"post_send_entry", "poll_cq_entry"}, {"post_send_ret", "poll_cq_ret"}} {
		for _, n := range names {
			row.put(n, stats[i])
			row.Runs[n] /= 2
		}
	}
	return row, nil
}

// leastStats runs the least programs of mode (bpf/bench/least.bpf.c) and
// reads their run time per hit.
func leastStats(ctx context.Context, c *config, mode string, wl []string, dir string) (bdRow, error) {
	row := bdRow{Variant: "least " + mode, NS: map[string]float64{}, Runs: map[string]uint64{}}
	var stats [4]*ebpf.ProgramStats
	w, err := runLeast(ctx, c, wl, dir, mode == "events", func(progs [4]*ebpf.Program) {
		for i, p := range progs {
			stats[i], _ = p.Stats()
		}
	})
	if err != nil {
		return row, err
	}
	row.Calls = w.PostCalls
	for i, name := range dataPathProgs {
		if stats[i] == nil {
			return row, fmt.Errorf("no run-time statistics for the least %s programs", mode)
		}
		row.put(name, stats[i])
	}
	return row, nil
}

func tracedStats(ctx context.Context, c *config, mode string, wl []string, dir string) (bdRow, error) {
	return tracedStatsOf(ctx, c.sqscope, "sqscope "+mode, mode, wl, dir)
}

// tracedStatsOf runs the sqscope executable bin in mode over the workload
// wl and reads its data-path programs' run time per hit.
func tracedStatsOf(ctx context.Context, bin, variant, mode string, wl []string, dir string) (bdRow, error) {
	row := bdRow{Variant: variant, NS: map[string]float64{}, Runs: map[string]uint64{}}
	js := filepath.Join(dir, "wl.json")
	args := append(append([]string{"trace", "--mode", mode, "--workload", "--"}, wl...), "--json-out", js)
	cmd := exec.CommandContext(ctx, bin, args...)
	if err := cmd.Start(); err != nil {
		return row, err
	}
	// Hold the programs sqscope loaded (found through its own file
	// descriptors): their statistics outlive its exit that way.
	progs := map[string]*ebpf.Program{}
	defer func() {
		for _, p := range progs {
			p.Close()
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(progs) < len(dataPathProgs) && time.Now().Before(deadline) {
		for _, id := range progIDs(cmd.Process.Pid) {
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				continue
			}
			info, err := p.Info()
			if err != nil || progs[info.Name] != nil || !isDataPath(info.Name) {
				p.Close()
				continue
			}
			progs[info.Name] = p
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Wait(); err != nil {
		return row, fmt.Errorf("sqscope %s: %v", strings.Join(args, " "), err)
	}
	w, err := readWorkloadJSON(js)
	if err != nil {
		return row, err
	}
	row.Calls = w.PostCalls
	for name, p := range progs {
		if s, err := p.Stats(); err == nil {
			row.put(name, s)
		}
	}
	return row, nil
}

func isDataPath(name string) bool {
	for _, p := range dataPathProgs {
		if p == name {
			return true
		}
	}
	return false
}

// progIDs lists the BPF programs a process holds file descriptors of.
func progIDs(pid int) []ebpf.ProgramID {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var ids []ebpf.ProgramID
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "prog_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					ids = append(ids, ebpf.ProgramID(id))
				}
			}
		}
		f.Close()
	}
	return ids
}
