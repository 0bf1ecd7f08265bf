package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/probe"
)

// lossRow is one traced run at full speed.
type lossRow struct {
	Case      string
	RingMiB   int
	QPs       int
	Threads   int // the workload's threads (--threads), QPs spread over them
	List      int
	Stall     time.Duration // the reader was stopped this long
	WRsPerS   float64
	CallsPerS float64
	Lost      uint64 // lost records sqscope reported
	Unseen    uint64 // WRs the workload posted that the trace lacks
	// sqscope's own CPU (reader, decoder, analyzer) once attached
	Cores      float64
	NSPerEvent float64
	Message    string // sqscope's own line about it
	Command    string
}

func (l lossRow) cells() []string {
	stall := "-"
	if l.Stall > 0 {
		stall = l.Stall.String()
	}
	return []string{l.Case, l.ring(), fmt.Sprint(l.QPs), fmt.Sprint(l.Threads), fmt.Sprint(l.List), stall,
		fmtNum(l.WRsPerS), fmtNum(l.CallsPerS), fmt.Sprint(l.Lost), fmt.Sprint(l.Unseen),
		fmt.Sprintf("%.0f%%", 100*l.Cores), fmt.Sprintf("%.0f", l.NSPerEvent)}
}

var summaryLine = regexp.MustCompile(`(?m)^sqscope: \d+ events over .*$`)

// loss runs the built-in workload as fast as it goes under the tracer
// (events mode), with one QP per core and one and 16 WRs per call: the
// highest post rate a traced workload reaches here, and whether the reader
// keeps up with the default ring; then applications' shapes, 256 QPs over
// 8 threads and 1,024 over 16, each thread polling one CQ its QPs share.
// Then it stalls the reader (SIGSTOP for a second) to show what sqscope
// reports when records are lost.
func loss(ctx context.Context, c *config, r *report) error {
	dir, err := os.MkdirTemp("", "sqbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	type lc struct {
		name         string
		ring         int
		qps, threads int
		list         int
		stall        time.Duration
	}
	cases := []lc{
		{"full speed", 0, 1, 1, 1, 0},
		{"full speed", 0, 1, 1, 16, 0},
		{"full speed", 0, 2, 2, 1, 0},
		{"full speed", 0, 2, 2, 16, 0},
		{"full speed, shared CQs", 0, 256, 8, 1, 0},
		{"full speed, shared CQs", 0, 256, 8, 16, 0},
		{"full speed, shared CQs", 0, 1024, 16, 1, 0},
		{"full speed, shared CQs", 0, 1024, 16, 16, 0},
		{"reader stalled", 0, 1, 1, 1, time.Second},
		{"reader stalled", 1, 1, 1, 1, time.Second},
	}
	for _, k := range cases {
		fmt.Fprintf(c.log, "loss: %s, ring %s, %d QP(s) over %d thread(s), post_list %d\n", k.name, lossRow{RingMiB: k.ring}.ring(), k.qps, k.threads, k.list)
		row, err := lossRun(ctx, c, dir, k.ring, k.qps, k.threads, k.list, k.stall)
		if err != nil {
			return err
		}
		row.Case = k.name
		r.loss = append(r.loss, row)
	}
	return nil
}

func lossRun(ctx context.Context, c *config, dir string, ring, qps, threads, list int, stall time.Duration) (lossRow, error) {
	row := lossRow{RingMiB: ring, QPs: qps, Threads: threads, List: list, Stall: stall}
	js := filepath.Join(dir, "wl.json")
	wl := []string{"-s", "64", "-I", "64", "-Q", "16", "-l", strconv.Itoa(list), "--qps", strconv.Itoa(qps), "-D", "3", "--sim-deterministic"}
	if threads < qps {
		wl = append(wl, "--threads", strconv.Itoa(threads), "--shared-cq")
	}
	args := []string{"trace", "--json"}
	if ring > 0 { // else the size sqscope picks
		args = append(args, "--ring-mib", strconv.Itoa(ring))
	}
	args = append(append(args, "--workload", "--"), wl...)
	row.Command = fmt.Sprintf("%s %s --json-out F", c.show(), strings.Join(args, " "))
	if stall > 0 {
		row.Command += fmt.Sprintf("; after 1 s: kill -STOP <sqscope>; %s later: kill -CONT", stall)
	}
	cmd := exec.CommandContext(ctx, c.sqscope, append(args, "--json-out", js)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return row, err
	}
	if stall > 0 {
		time.Sleep(time.Second)
		cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(stall)
		cmd.Process.Signal(syscall.SIGCONT)
	}
	if err := cmd.Wait(); err != nil {
		return row, fmt.Errorf("sqscope %s: %v: %s", strings.Join(args, " "), err, lastLine(stderr.Bytes()))
	}
	w, err := readWorkloadJSON(js)
	if err != nil {
		return row, err
	}
	tr, err := parseTraceJSON(stdout.Bytes())
	if err != nil {
		return row, err
	}
	var seen uint64
	for _, q := range tr.QPs {
		seen += q.WRs
	}
	row.WRsPerS = w.wrsPerSec()
	row.CallsPerS = float64(w.PostCalls) / w.Seconds
	row.Lost = tr.Lost
	row.Cores, row.NSPerEvent = tr.Self.Cores, tr.Self.NSPerEvent
	if w.WRs > seen {
		row.Unseen = w.WRs - seen
	}
	if m := summaryLine.Find(stdout.Bytes()); m != nil {
		row.Message = string(m)
	} else if m := summaryLine.Find(stderr.Bytes()); m != nil {
		row.Message = string(m)
	}
	return row, nil
}

// ring is the row's ring size, as the table shows it.
func (l lossRow) ring() string {
	if l.RingMiB == 0 {
		return fmt.Sprintf("%d MiB (default)", probe.DefaultRingBytes>>20)
	}
	return fmt.Sprintf("%d MiB", l.RingMiB)
}
