package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/sqscope/sqscope/bpf/bench"
	"github.com/sqscope/sqscope/probe"
)

// wlApp is what the workload measured itself, per QP (--json-out).
type wlApp struct {
	WRs       uint64  `json:"wrs"`
	PostCalls uint64  `json:"post_calls"`
	Polls     uint64  `json:"polls"`
	AvgPostNS float64 `json:"avg_post_ns"`
	Seconds   float64 `json:"seconds"`
	// CPUSeconds is the thread's CPU time over Seconds; absent (0) from
	// builds before it was reported
	CPUSeconds float64 `json:"cpu_seconds"`
}

// wlQP is one QP of the workload's --json-out: the simulated HCA's
// ground truth at the top level, the application's view under "app".
type wlQP struct {
	App      wlApp  `json:"app"`
	WRs      uint64 `json:"wrs"`
	Inline   uint64 `json:"inline"`
	Signaled uint64 `json:"signaled"`
}

// wlRun is one workload run, summed over its QPs.
type wlRun struct {
	WRs, PostCalls, Polls uint64
	Seconds               float64 // the longest QP's traffic time
	CPUSeconds            float64 // the CPU time of that QP's thread
	PostNS                float64 // mean time inside one post call
	// the simulated HCA's truth, summed over the QPs
	Truth counts
	// traced runs
	Lost     uint64
	TracedWR uint64 // WRs the tracer saw
	Traced   bool
	// Sampled: the tracer saw the calls of sample windows only (the
	// sentinel mode), so TracedWR is a part of WRs by design
	Sampled bool
}

// counts are WRs and how many of them were inline and signaled.
type counts struct{ WRs, Inline, Signaled uint64 }

func (n *counts) add(wrs, inline, signaled uint64) {
	n.WRs += wrs
	n.Inline += inline
	n.Signaled += signaled
}

// nsPerCall is the CPU time the traffic loop's thread took per post call
// (one QP): the post, its poll, the probes they hit and the application's
// own work. Unlike the wall time, other processes' load does not inflate
// it: a round preempted by another process costs the thread nothing.
func (w wlRun) nsPerCall() float64 {
	if w.PostCalls == 0 {
		return 0
	}
	return w.CPUSeconds * 1e9 / float64(w.PostCalls)
}

// wallNSPerCall is the traffic loop's wall time per post call, as the
// application sees it.
func (w wlRun) wallNSPerCall() float64 {
	if w.PostCalls == 0 {
		return 0
	}
	return w.Seconds * 1e9 / float64(w.PostCalls)
}

// wrsPerSec is the workload's own rate: its WRs over its traffic time.
func (w wlRun) wrsPerSec() float64 {
	if w.Seconds == 0 {
		return 0
	}
	return float64(w.WRs) / w.Seconds
}

func readWorkloadJSON(path string) (wlRun, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return wlRun{}, err
	}
	var qps []wlQP
	if err := json.Unmarshal(b, &qps); err != nil {
		return wlRun{}, fmt.Errorf("workload JSON: %w", err)
	}
	if len(qps) == 0 {
		return wlRun{}, errors.New("workload JSON: no QPs")
	}
	var r wlRun
	var postNS float64
	for _, q := range qps {
		r.WRs += q.App.WRs
		r.PostCalls += q.App.PostCalls
		r.Polls += q.App.Polls
		r.Truth.add(q.WRs, q.Inline, q.Signaled)
		if q.App.Seconds >= r.Seconds {
			r.Seconds, r.CPUSeconds = q.App.Seconds, q.App.CPUSeconds
		}
		postNS += q.App.AvgPostNS * float64(q.App.PostCalls)
	}
	if r.PostCalls > 0 {
		r.PostNS = postNS / float64(r.PostCalls)
	}
	if r.CPUSeconds <= 0 {
		return wlRun{}, errors.New("workload JSON: no cpu_seconds (a workload built before it reported its thread's CPU time)")
	}
	return r, nil
}

// variant is one way of running the workload.
type variant struct {
	name string
	desc string
	// command shows how it is run; wl is the workload's flags.
	command func(c *config, wl []string) string
	run     func(ctx context.Context, c *config, wl []string, dir string) (wlRun, error)
}

func (c *config) show() string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, c.sqscope); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return c.sqscope
}

var untraced = variant{
	name: "untraced",
	desc: "no probes",
	command: func(c *config, wl []string) string {
		return fmt.Sprintf("%s workload %s --json-out F", c.show(), strings.Join(wl, " "))
	},
	run: func(ctx context.Context, c *config, wl []string, dir string) (wlRun, error) {
		js := filepath.Join(dir, "wl.json")
		cmd := exec.CommandContext(ctx, c.sqscope, append(append([]string{"workload"}, wl...), "--json-out", js)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return wlRun{}, fmt.Errorf("%v: %s", err, lastLine(out))
		}
		return readWorkloadJSON(js)
	},
}

var floorVariant = variant{
	name: "floor",
	desc: "empty BPF programs at post_send and poll_cq, entry and return (bpf/bench/floor.bpf.c)",
	command: func(c *config, wl []string) string {
		return fmt.Sprintf("%s workload %s --wait-signal --ready-file R --json-out F; empty programs attached to sim_post_send and sim_poll_cq (entry, return) of that PID, then SIGUSR1",
			c.show(), strings.Join(wl, " "))
	},
	run: runFloor,
}

func sqscopeVariant(mode string) variant {
	return tracedVariant("sqscope "+mode, mode, "", "")
}

// tracedVariant traces with `sqscope trace --mode mode`; bin, when set,
// is another sqscope executable (a baseline build) to trace with.
func tracedVariant(name, mode, bin, desc string) variant {
	if desc == "" {
		desc = map[string]string{
			"events":   "every post and poll recorded (per-call records with every WR and CQE)",
			"counters": "per-QP and per-CQ totals kept in the kernel (--mode counters)",
			"sentinel": "probes on the provider's error sites only while healthy, and sample windows at their defaults (--mode sentinel)",
		}[mode]
	}
	return variant{
		name: name,
		desc: desc,
		command: func(c *config, wl []string) string {
			b := c.show()
			if bin != "" {
				b = bin
			}
			return fmt.Sprintf("%s trace --json --mode %s --workload -- %s --json-out F", b, mode, strings.Join(wl, " "))
		},
		run: func(ctx context.Context, c *config, wl []string, dir string) (wlRun, error) {
			cc := *c
			if bin != "" {
				cc.sqscope = bin
			}
			return runTraced(ctx, &cc, append([]string{"--mode", mode}, "--workload", "--"), wl, dir)
		},
	}
}

var bpftraceVariant = variant{
	name: "bpftrace",
	desc: "bpftrace 0.17 script with the same per-WR and per-CQE fields in maps (cmd/sqbench/perwr.bt)",
	command: func(c *config, wl []string) string {
		return fmt.Sprintf("BPFTRACE_MAP_KEYS_MAX=N %s -c '%s workload %s --json-out F' perwr.bt", c.bpftrace, c.show(), strings.Join(wl, " "))
	},
	run: runBpftrace,
}

// runTraced runs `sqscope trace --json FLAGS WL --json-out F`.
func runTraced(ctx context.Context, c *config, flags, wl []string, dir string) (wlRun, error) {
	r, _, err := runTracedJSON(ctx, c, flags, wl, dir)
	return r, err
}

// runTracedJSON is runTraced that also returns the tracer's summary.
func runTracedJSON(ctx context.Context, c *config, flags, wl []string, dir string) (wlRun, traceJSON, error) {
	js := filepath.Join(dir, "wl.json")
	args := append([]string{"trace", "--json"}, flags...)
	args = append(append(args, wl...), "--json-out", js)
	cmd := exec.CommandContext(ctx, c.sqscope, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return wlRun{}, traceJSON{}, fmt.Errorf("sqscope %s: %v: %s", strings.Join(args, " "), err, lastLine(stderr.Bytes()))
	}
	r, err := readWorkloadJSON(js)
	if err != nil {
		return r, traceJSON{}, err
	}
	tr, err := parseTraceJSON(stdout.Bytes())
	if err != nil {
		return r, tr, err
	}
	r.Traced = true
	r.Lost = tr.Lost
	for _, q := range tr.QPs {
		r.TracedWR += q.WRs
		r.Sampled = r.Sampled || q.Sentinel
	}
	return r, tr, nil
}

// traceJSON is what sqbench reads of `sqscope trace --json`.
type traceJSON struct {
	Events uint64    `json:"events"`
	Lost   uint64    `json:"lost_events"`
	QPs    []traceQP `json:"qps"`
	Self   struct {
		Cores      float64 `json:"cores"`
		NSPerEvent float64 `json:"cpu_ns_per_event"`
	} `json:"sqscope_cpu"`
	Sentinel *struct {
		Sampling *sampling `json:"sampling"`
	} `json:"sentinel"`
}

// sampling is the sentinel's sample windows and what they cost
// (sentinel.sampling).
type sampling struct {
	Windows     uint64      `json:"windows"`
	TracedS     float64     `json:"traced_s"`
	NotMeasured string      `json:"cost_not_measured"`
	BudgetPct   float64     `json:"budget_pct"`
	Cost        *sampleCost `json:"probe_cost"`
	Shares      *struct {
		Inline   shareEstimate `json:"inline_pct"`
		Signaled shareEstimate `json:"signaled_pct"`
	} `json:"shares"`
}

// shareEstimate is a share sqscope estimated from its windows, with its
// 95% interval when it gives one.
type shareEstimate struct {
	Pct  float64  `json:"value"`
	Low  *float64 `json:"ci95_low"`
	High *float64 `json:"ci95_high"`
}

type sampleCost struct {
	ProbeCPUS  float64 `json:"probe_cpu_s"`
	TargetCPUS float64 `json:"target_cpu_s"`
	SharePct   float64 `json:"share_pct"`
	Traps      uint64  `json:"traps"`
}

// traceQP is one QP of the trace; a sentinel-mode QP's counts are of
// the sample windows only.
type traceQP struct {
	WRs      uint64 `json:"wrs"`
	Inline   uint64 `json:"inline"`
	Signaled uint64 `json:"signaled"`
	Sentinel bool   `json:"sentinel"`
	Rates    struct {
		WhileTraced bool `json:"while_traced"`
	} `json:"rates"`
	// Memory is the QP's send-queue counters read from the target's
	// memory; WRPerS absent (0) with fewer than two reads
	Memory *struct {
		WRPerS float64 `json:"wrs_per_s"`
	} `json:"memory"`
}

// parseTraceJSON reads the tracer's summary, which follows the workload's
// own text output.
func parseTraceJSON(out []byte) (traceJSON, error) {
	var tr traceJSON
	i := bytes.Index(out, []byte("\n{")) + 1 // after the workload's text, if it wrote any
	if i == 0 && !bytes.HasPrefix(out, []byte("{")) {
		return tr, fmt.Errorf("no JSON summary in sqscope's output: %s", lastLine(out))
	}
	if err := json.Unmarshal(out[i:], &tr); err != nil {
		return tr, fmt.Errorf("sqscope's JSON summary: %w", err)
	}
	return tr, nil
}

// startWaiting starts the workload blocked before its traffic and returns
// once its QPs exist.
func startWaiting(ctx context.Context, c *config, wl []string, dir string) (*exec.Cmd, string, error) {
	js := filepath.Join(dir, "wl.json")
	ready := filepath.Join(dir, "ready")
	// a former run's: the signal must wait for this run's
	if err := os.Remove(ready); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	args := append(append([]string{"workload"}, wl...), "--wait-signal", "--ready-file", ready, "--json-out", js)
	cmd := exec.CommandContext(ctx, c.sqscope, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return cmd, js, nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, "", fmt.Errorf("the workload did not get ready: %s", lastLine(out.Bytes()))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func runFloor(ctx context.Context, c *config, wl []string, dir string) (wlRun, error) {
	return runFloorWith(ctx, c, wl, dir, nil)
}

// runFloorWith runs the floor variant and calls after, if not nil, with
// its programs once the workload has exited.
func runFloorWith(ctx context.Context, c *config, wl []string, dir string, after func(entry, ret *ebpf.Program)) (wlRun, error) {
	spec, err := bench.LoadFloor()
	if err != nil {
		return wlRun{}, err
	}
	var objs bench.FloorObjects
	up, err := loadForUprobes(spec, &objs)
	if err != nil {
		return wlRun{}, fmt.Errorf("loading the floor programs: %w", err)
	}
	defer objs.Close()
	probes := [4]*ebpf.Program{objs.FloorEntry, objs.FloorRet, objs.FloorEntry, objs.FloorRet}
	w, err := runAttached(ctx, c, wl, dir, up, probes)
	if err == nil && after != nil {
		after(objs.FloorEntry, objs.FloorRet)
	}
	return w, err
}

var leastEvents = variant{
	name: "least events",
	desc: "less than a full-event tracer must do (bpf/bench/least.bpf.c): per-thread state, every WR of the list and its first SGE read (a one-WR list in two small reads, a longer one in one read of the WRs and one of their SGEs), a timestamped record per post and per completion, a reader draining the ring every 10 ms",
	command: func(c *config, wl []string) string {
		return fmt.Sprintf("%s workload %s --wait-signal --ready-file R --json-out F; least_post_* and least_poll_* of bpf/bench/least.bpf.c attached to sim_post_send and sim_poll_cq (entry, return) of that PID and their ring read every 10 ms, then SIGUSR1",
			c.show(), strings.Join(wl, " "))
	},
	run: func(ctx context.Context, c *config, wl []string, dir string) (wlRun, error) {
		return runLeast(ctx, c, wl, dir, true, nil)
	},
}

var leastCounters = variant{
	name: "least counters",
	desc: "less than a counting tracer must do (bpf/bench/least.bpf.c): per-thread state at three probes, every WR of the list and its first SGE read as the events one does, per-thread totals",
	command: func(c *config, wl []string) string {
		return fmt.Sprintf("%s workload %s --wait-signal --ready-file R --json-out F; least_cpost_* and least_cpoll_* of bpf/bench/least.bpf.c attached to sim_post_send and sim_poll_cq (entry, return) of that PID, then SIGUSR1",
			c.show(), strings.Join(wl, " "))
	},
	run: func(ctx context.Context, c *config, wl []string, dir string) (wlRun, error) {
		return runLeast(ctx, c, wl, dir, false, nil)
	},
}

// runLeast runs the programs of bpf/bench/least.bpf.c for full events (with a
// reader draining their ring) or for counters; after, if not nil, is given
// the four programs (post_send entry and return, poll_cq entry and return)
// once the workload has run.
func runLeast(ctx context.Context, c *config, wl []string, dir string, events bool, after func([4]*ebpf.Program)) (wlRun, error) {
	spec, err := bench.LoadLeast()
	if err != nil {
		return wlRun{}, err
	}
	var objs bench.LeastObjects
	up, err := loadForUprobes(spec, &objs)
	if err != nil {
		return wlRun{}, fmt.Errorf("loading the least programs: %w", err)
	}
	defer objs.Close()
	probes := [4]*ebpf.Program{objs.LeastCpostEntry, objs.LeastCpostRet, objs.LeastCpollEntry, objs.LeastCpollRet}
	if !events {
		w, err := runAttached(ctx, c, wl, dir, up, probes)
		if err == nil && after != nil {
			after(probes)
		}
		return w, err
	}
	probes = [4]*ebpf.Program{objs.LeastPostEntry, objs.LeastPostRet, objs.LeastPollEntry, objs.LeastPollRet}
	rd, err := ringbuf.NewReader(objs.LeastRing)
	if err != nil {
		return wlRun{}, err
	}
	defer rd.Close()
	done := make(chan struct{})
	drained := make(chan struct{})
	var seen uint64 // WRs in the records
	go func() {     // as sqscope's reader: poll every 10 ms
		defer close(drained)
		var rec ringbuf.Record
		for {
			rd.SetDeadline(time.Now().Add(10 * time.Millisecond))
			err := rd.ReadInto(&rec)
			if err == nil {
				seen += leastWRs(rec.RawSample)
				continue
			}
			select {
			case <-done:
				return
			default:
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
		}
	}()
	w, err := runAttached(ctx, c, wl, dir, up, probes)
	close(done)
	<-drained
	if err != nil {
		return w, err
	}
	if after != nil {
		after(probes)
	}
	var lost uint64
	if err := objs.LeastLost.Get(&lost); err != nil {
		return w, err
	}
	if lost != 0 {
		return w, fmt.Errorf("the least programs lost %d records: the reader did not keep up", lost)
	}
	w.Traced, w.TracedWR = true, seen
	return w, nil
}

// The least programs' records (bpf/bench/least.bpf.c) told apart by size.
var (
	leastPostSize = int(unsafe.Sizeof(bench.LeastLeastPost{})) // one WR
	leastListSize = int(unsafe.Sizeof(bench.LeastLeastList{})) // N WRs
	leastListN    = int(unsafe.Offsetof(bench.LeastLeastList{}.N))
)

// leastWRs is the number of WRs a record of the least programs holds.
func leastWRs(rec []byte) uint64 {
	switch len(rec) {
	case leastPostSize:
		return 1
	case leastListSize:
		return uint64(binary.LittleEndian.Uint32(rec[leastListN:]))
	}
	return 0
}

// loadForUprobes loads spec into objs for the uprobe links sqscope uses on
// this kernel, and returns what attaches them.
func loadForUprobes(spec *ebpf.CollectionSpec, objs any) (*probe.Uprobes, error) {
	up := &probe.Uprobes{}
	return up, up.Load(spec, func() error { return spec.LoadAndAssign(objs, nil) })
}

// runAttached starts the workload held, attaches probes (sim_post_send
// entry and return, then sim_poll_cq entry and return; nil ones are left
// out) to it with up, and runs it.
func runAttached(ctx context.Context, c *config, wl []string, dir string, up *probe.Uprobes, probes [4]*ebpf.Program) (wlRun, error) {
	cmd, js, err := startWaiting(ctx, c, wl, dir)
	if err != nil {
		return wlRun{}, err
	}
	pid := cmd.Process.Pid
	fail := func(err error) (wlRun, error) {
		cmd.Process.Kill()
		cmd.Wait()
		return wlRun{}, err
	}
	ex, err := link.OpenExecutable(c.sqscope)
	if err != nil {
		return fail(err)
	}
	var links []link.Link
	defer func() {
		for _, l := range links {
			l.Close()
		}
	}()
	for f, fn := range []string{"sim_post_send", "sim_poll_cq"} {
		sym, err := probe.ResolveSymbol(c.sqscope, fn)
		if err != nil {
			return fail(err)
		}
		// the return probe first, as sqscope places them
		for _, p := range []struct {
			prog *ebpf.Program
			ret  bool
		}{{probes[2*f+1], true}, {probes[2*f], false}} {
			if p.prog == nil {
				continue
			}
			l, err := up.Attach(ex, p.prog, sym.Offset, 0, pid, p.ret)
			if err != nil {
				return fail(fmt.Errorf("attaching to %s: %w", fn, err))
			}
			links = append(links, l)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return fail(err)
	}
	if err := cmd.Wait(); err != nil {
		return wlRun{}, fmt.Errorf("workload: %v", err)
	}
	return readWorkloadJSON(js)
}

func runBpftrace(ctx context.Context, c *config, wl []string, dir string) (wlRun, error) {
	script := filepath.Join(dir, "perwr.bt")
	if err := os.WriteFile(script, []byte(strings.ReplaceAll(perWRScript, "BINARY", c.sqscope)), 0o600); err != nil {
		return wlRun{}, err
	}
	js := filepath.Join(dir, "wl.json")
	target := strings.Join(append(append([]string{c.sqscope, "workload"}, wl...), "--json-out", js), " ")
	cmd := exec.CommandContext(ctx, c.bpftrace, "-c", target, script)
	// every WR and CQE of the run gets a key
	cmd.Env = append(os.Environ(), fmt.Sprintf("BPFTRACE_MAP_KEYS_MAX=%d", wlIters(wl)+4096))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return wlRun{}, fmt.Errorf("bpftrace: %v: %s", err, lastLine(out.Bytes()))
	}
	return readWorkloadJSON(js)
}

// wlIters is the -n of workload flags.
func wlIters(wl []string) uint64 {
	for i, a := range wl {
		if a == "-n" && i+1 < len(wl) {
			var n uint64
			fmt.Sscan(wl[i+1], &n)
			return n
		}
	}
	return 0
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
