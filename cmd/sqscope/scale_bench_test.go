package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/tui"
)

// scaleRecording writes a recording of qps QPs posting and polling once
// every 2 s for 70 s of trace time: every QP's occupancy history is as
// long as the analyzer's budget lets it be.
func scaleRecording(b *testing.B, qps int) string {
	path := filepath.Join(b.TempDir(), "scale.sqscope")
	w, err := trace.Create(path, trace.FileInfo{Target: fmt.Sprintf("synthetic: %d QPs", qps), StartWall: time.Now(), StartMonoNS: 1})
	if err != nil {
		b.Fatal(err)
	}
	analyzertest.SteadyEvents(qps, 36, 2_000_000_000, func(evs []trace.Event) {
		for _, ev := range evs {
			if err == nil {
				err = w.Write(ev)
			}
		}
	})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	return path
}

// statCPU is the CPU time (user and system) a /proc stat file gives.
func statCPU(path string) (time.Duration, error) {
	stat, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseUint(f[11], 10, 64) // utime, field 14
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ
}

// tmuxRun runs cmd in a detached 200×60 tmux session on a tmux server of
// its own, and returns the pane's process id (kill-server ends it).
func tmuxRun(b *testing.B, name, cmd string) (int, tmux) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skipf("no tmux for the live view: %v", err)
	}
	m := tmux{b, name}
	m.run("new-session", "-d", "-s", name, "-x", "200", "-y", "60", cmd)
	pid, err := strconv.Atoi(strings.TrimSpace(m.run("list-panes", "-t", name, "-F", "#{pane_pid}")))
	if err != nil {
		m.run("kill-server")
		b.Fatal(err)
	}
	return pid, m
}

// procStat is a process's CPU time and its peak resident memory, from
// /proc.
func procStat(pid int) (cpu time.Duration, hwmKiB int, err error) {
	if cpu, err = statCPU(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
		return 0, 0, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwmKiB, _ = strconv.Atoi(strings.Fields(v)[0])
		}
	}
	return cpu, hwmKiB, nil
}

// BenchmarkScale measures sqscope itself on recordings of 64 and 4,096
// QPs: the peak resident memory of `sqscope report`, and of `sqscope
// replay` in a real terminal (tmux, 200×60) together with the CPU its
// live view takes at 10 Hz once the whole recording is in (10 s, the
// analyzer's work done: only the view refreshes, drawing to the terminal).
func BenchmarkScale(b *testing.B) {
	for _, qps := range []int{64, 4096} {
		b.Run(fmt.Sprintf("qps=%d", qps), func(b *testing.B) { benchScale(b, qps) })
	}
}

func benchScale(b *testing.B, qps int) {
	bin := sqscopeBin(b)
	rec := scaleRecording(b, qps)
	for b.Loop() {
		cmd := exec.Command(bin, "report", rec)
		cmd.Stdout, cmd.Stderr = nil, nil
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("report: %v\n%s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		b.ReportMetric(float64(ru.Maxrss)/1024, "report-rss-MiB")

		pid, m := tmuxRun(b, fmt.Sprintf("sqscale%d", os.Getpid()), "exec "+bin+" replay --speed 1000 "+rec)
		// the 70 s recording is in after 0.07 s at this speed; give it 3 s
		time.Sleep(3 * time.Second)
		if screen := m.capture(); !strings.Contains(screen, "0x100 ") {
			b.Fatalf("the live view does not show the QPs:\n%s", screen)
		}
		cpu0, _, err := procStat(pid)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		time.Sleep(10 * time.Second)
		cpu1, hwm, err := procStat(pid)
		wall := time.Since(start)
		m.run("kill-server")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(100*(cpu1-cpu0).Seconds()/wall.Seconds(), "top-%cpu@10Hz")
		b.ReportMetric(float64(hwm)/1024, "top-rss-MiB")
	}
}

// viewCPU is the CPU time of the threads a process's live view runs on
// (named tui.ViewThread).
func viewCPU(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var cpu time.Duration
	for _, t := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s", pid, t.Name())
		if comm, err := os.ReadFile(dir + "/comm"); err != nil || strings.TrimSpace(string(comm)) != tui.ViewThread {
			continue
		}
		if c, err := statCPU(dir + "/stat"); err == nil { // else the thread ended
			cpu += c
		}
	}
	return cpu, nil
}

// BenchmarkLiveView measures `sqscope top` in a real terminal (tmux,
// 200×60) at 10 Hz on a live workload of 4,096 QPs over 16 threads, each
// QP posting 20 WRs a second: the CPU of the view's own threads (its
// ticker and the terminal application: snapshots, rows, drawing,
// writing to the terminal) and of the whole process, over 10 s.
func BenchmarkLiveView(b *testing.B) {
	bpftest.Require(b, probe.Preflight)
	bin := sqscopeBin(b)
	for b.Loop() {
		pid, m := tmuxRun(b, fmt.Sprintf("sqlive%d", os.Getpid()),
			"exec "+bin+" top --workload -- --qps 4096 --threads 16 -s 64 -I 64 -Q 16 --rate 20 -D 40")
		time.Sleep(12 * time.Second) // the QPs are made and posting
		if screen := m.capture(); !strings.Contains(screen, "send queues") {
			m.run("kill-server")
			b.Fatalf("the live view is not up:\n%s", screen)
		}
		view0, err := viewCPU(pid)
		cpu0, _, err2 := procStat(pid)
		start := time.Now()
		time.Sleep(10 * time.Second)
		view1, err3 := viewCPU(pid)
		cpu1, _, err4 := procStat(pid)
		wall := time.Since(start)
		m.run("kill-server")
		if err := errors.Join(err, err2, err3, err4); err != nil {
			b.Fatal(err)
		}
		if view1 <= view0 {
			b.Fatal("no CPU time on the view's threads: are they named?")
		}
		b.ReportMetric(100*(view1-view0).Seconds()/wall.Seconds(), "view-%cpu@10Hz")
		b.ReportMetric(100*(cpu1-cpu0).Seconds()/wall.Seconds(), "process-%cpu")
	}
}
