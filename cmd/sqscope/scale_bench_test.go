package main

import (
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
	"github.com/sqscope/sqscope/trace"
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

// procStat is a process's CPU time and its peak resident memory, from
// /proc.
func procStat(pid int) (cpu time.Duration, hwmKiB int, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseUint(f[11], 10, 64) // utime, field 14
	st, _ := strconv.ParseUint(f[12], 10, 64)
	cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ
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

		if _, err := exec.LookPath("tmux"); err != nil {
			b.Skipf("no tmux for the live view: %v", err)
		}
		name := fmt.Sprintf("sqscale%d", os.Getpid())
		tm := func(args ...string) string {
			out, err := exec.Command("tmux", append([]string{"-L", name}, args...)...).CombinedOutput()
			if err != nil {
				b.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return strings.TrimSpace(string(out))
		}
		tm("new-session", "-d", "-s", name, "-x", "200", "-y", "60", "exec "+bin+" replay --speed 1000 "+rec)
		pid, err := strconv.Atoi(tm("list-panes", "-t", name, "-F", "#{pane_pid}"))
		if err != nil {
			b.Fatal(err)
		}
		// the 70 s recording is in after 0.07 s at this speed; give it 3 s
		time.Sleep(3 * time.Second)
		if screen := tm("capture-pane", "-p", "-t", name); !strings.Contains(screen, "0x100 ") {
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
		tm("kill-server")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(100*(cpu1-cpu0).Seconds()/wall.Seconds(), "top-%cpu@10Hz")
		b.ReportMetric(float64(hwm)/1024, "top-rss-MiB")
	}
}
