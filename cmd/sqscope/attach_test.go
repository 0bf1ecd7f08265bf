package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// strippedCopy is the sqscope binary without its symbol table, so the
// simulated HCA's data path (static functions) can be found only through
// its ops table in memory or a debug file; and that debug file.
func strippedCopy(t *testing.T, dir string) (stripped, debug string) {
	t.Helper()
	bin := sqscopeBin(t)
	stripped, debug = filepath.Join(dir, "sqscope-stripped"), filepath.Join(dir, "sqscope.debug")
	for _, args := range [][]string{
		{"--only-keep-debug", bin, debug},
		{"--strip-all", bin, stripped},
	} {
		if out, err := exec.Command("objcopy", args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %v: %v\n%s", args, err, out)
		}
	}
	f, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".symtab") != nil {
		t.Fatal("the stripped copy still has .symtab")
	}
	return stripped, debug
}

type attachReport struct {
	Lost   uint64           `json:"lost_events"`
	QPs    []map[string]any `json:"qps"`
	Probes []struct {
		Func, Path, How, Err, DebugFile string
	} `json:"probes"`
	Scans []struct {
		PID                                                uint32
		Bytes, Mappings, DurationNS, Contexts, QPs, StopNS uint64
		Cut, Err                                           string
	} `json:"memory_scans"`
}

// TestTraceStrippedRunning attaches to a running workload of a stripped
// binary after its QPs exist: every QP is listed, with its number and
// type, before any of its posts; the counts over the traced window have
// the workload's WRs per post and signal interval; no QP shows more
// outstanding than its depth. Without debug files the data path comes
// from the ops table in memory; with one (by build ID, or by
// .gnu_debuglink) from the debug file's symbols.
func TestTraceStrippedRunning(t *testing.T) {
	bpftest.RequireHost(t, probe.Preflight) // one case traces the whole host
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir, stripped, debug string) (exe, debugDir string)
		how     string
		flags   []string // more workload flags
		fns     []string // the data-path functions found that way
		all     bool     // traced with -a, not -p
	}{
		{"ops table in memory", func(t *testing.T, dir, stripped, debug string) (string, string) {
			return stripped, mkdir(t, dir, "no-debug")
		}, "memory", nil, []string{"post_send", "poll_cq"}, false},
		{"ops table in memory, host-wide", func(t *testing.T, dir, stripped, debug string) (string, string) {
			return stripped, mkdir(t, dir, "no-debug")
		}, "memory", nil, []string{"post_send", "poll_cq"}, true},
		// threads start and exit while the probes are placed and the
		// memory is scanned
		{"ops table in memory, threads coming and going", func(t *testing.T, dir, stripped, debug string) (string, string) {
			return stripped, mkdir(t, dir, "no-debug")
		}, "memory", []string{"--thread-churn"}, []string{"post_send", "poll_cq"}, false},
		{"wr API and extended CQ in memory", func(t *testing.T, dir, stripped, debug string) (string, string) {
			return stripped, mkdir(t, dir, "no-debug")
		}, "memory", []string{"--api", "wr", "--cq-ex"}, []string{"wr_start", "wr_complete", "wr_send", "start_poll", "next_poll", "end_poll"}, false},
		{"debug file by build id", func(t *testing.T, dir, stripped, debug string) (string, string) {
			f, err := elf.Open(stripped)
			if err != nil {
				t.Fatal(err)
			}
			id := noteBuildID(t, f)
			f.Close()
			dd := mkdir(t, dir, "debug")
			sub := mkdir(t, dd, ".build-id/"+id[:2])
			if err := os.Rename(debug, filepath.Join(sub, id[2:]+".debug")); err != nil {
				t.Fatal(err)
			}
			return stripped, dd
		}, "debug-file", nil, []string{"post_send", "poll_cq"}, false},
		{"debug file by debuglink", func(t *testing.T, dir, stripped, debug string) (string, string) {
			linked := filepath.Join(dir, "sqscope-linked")
			// objcopy runs in dir so the link names the file alone
			cmd := exec.Command("objcopy", "--add-gnu-debuglink="+filepath.Base(debug), stripped, linked)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("objcopy: %v\n%s", err, out)
			}
			return linked, mkdir(t, dir, "no-debug") // found next to the binary
		}, "debug-file", nil, []string{"post_send", "poll_cq"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			stripped, debug := strippedCopy(t, dir)
			exe, debugDir := c.prepare(t, dir, stripped, debug)
			testStrippedRunning(t, exe, debugDir, c.how, c.flags, c.fns, c.all)
		})
	}
}

func testStrippedRunning(t *testing.T, exe, debugDir, how string, flags, fns []string, all bool) {
	const depth, perPost, sigEvery, qps = 128, 4, 16, 2
	dir := t.TempDir()
	ready, truthFile, rec := filepath.Join(dir, "ready"), filepath.Join(dir, "truth.json"), filepath.Join(dir, "run.sqscope")
	// The workload runs until it is told to stop (SIGINT), a while after
	// the trace has begun: however long the attach takes on this host.
	wl := exec.Command(exe, append([]string{"workload", "-q", fmt.Sprint(qps), "-t", fmt.Sprint(depth), "-l", fmt.Sprint(perPost),
		"-Q", fmt.Sprint(sigEvery), "--rate", "20000", "-D", "600", "--ready-file", ready, "--json-out", truthFile}, flags...)...)
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	waitFile(t, ready)
	time.Sleep(500 * time.Millisecond) // posting for a while: WRs outstanding at the attach
	pid := wl.Process.Pid
	// traced for 2 s from the attach (with -a, from when every process is
	// traced), up to one cut, the workload running on; then it is stopped
	target := []string{"-p", fmt.Sprint(pid)}
	if all {
		target = []string{"-a"}
	}
	out, err := exec.Command(sqscopeBin(t), append([]string{"record", "-o", rec, "-D", "2s", "--debug-dir", debugDir}, target...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	if _, found, _ := strings.Cut(string(out), "tracing every process that uses verbs"); all && !strings.Contains(found, fmt.Sprint(pid)) {
		t.Fatalf("the running workload %d is not among those found: %s", pid, out)
	}
	stopWorkload(t, wl)
	truth := readTruth(t, truthFile)
	var r attachReport
	reportInto(t, rec, &r)

	scans := 0
	for _, sc := range r.Scans {
		if sc.PID != uint32(pid) {
			continue // -a: other verbs processes of the host
		}
		scans++
		if sc.Bytes == 0 || sc.Contexts != 1 || sc.QPs != qps || sc.Err != "" || sc.Cut != "" {
			t.Fatalf("scan of process %d: %+v", pid, sc)
		}
	}
	if r.Lost != 0 || scans != 1 {
		t.Fatalf("lost %d, %d scans of process %d: %+v", r.Lost, scans, pid, r.Scans)
	}
	r.QPs = qpsByPID(r.QPs)[uint32(pid)]
	for _, fn := range fns {
		found := false
		for _, p := range r.Probes {
			if p.Func == fn && p.Err == "" && p.How == how && (how != "debug-file" || p.DebugFile != "") {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s probe found by %s: %+v", fn, how, r.Probes)
		}
	}
	if len(r.QPs) != qps || len(truth) != qps {
		t.Fatalf("QPs: trace %d, truth %d", len(r.QPs), len(truth))
	}
	nums := map[float64]bool{}
	for _, w := range truth {
		nums[w["qp_num"].(float64)] = true
	}
	for _, q := range r.QPs {
		num := q["qp_num"].(float64)
		wrs, posts := q["wrs"].(float64), q["post_calls"].(float64)
		peak, p99 := q["peak_outstanding"].(float64), q["occupancy"].(map[string]any)["p99_after_post"].(float64)
		if !nums[num] || q["qp_type"] != "RC" || q["found"] != "memory" || q["state_found"] != "RTS" {
			t.Errorf("QP %v: type %v, found %v, state %v; the workload's QPs are %v", num, q["qp_type"], q["found"], q["state_found"], nums)
		}
		if posts < 100 || wrs != perPost*posts || q["signal_interval_typical"] != float64(sigEvery) {
			t.Errorf("QP %#x: %v WRs in %v posts, signal interval %v; want %d per post, every %d", uint32(num), wrs, posts, q["signal_interval_typical"], perPost, sigEvery)
		}
		if peak > depth || p99 > depth || q["outstanding"].(float64) > depth {
			t.Errorf("QP %#x: peak %v, p99 %v, now %v: more than the depth %d", uint32(num), peak, p99, q["outstanding"], depth)
		}
		if q["outstanding_lower_bound"] != false || q["exact_since_ns"] == nil {
			t.Errorf("QP %#x: still a lower bound (exact since %v) after seconds of signaled completions", uint32(num), q["exact_since_ns"])
		}
	}
	listedBeforePosts(t, rec, uint32(pid))
}

// stopWorkload ends a running workload as Ctrl-C would; it writes its
// truth and exits 0.
func stopWorkload(t *testing.T, wl *exec.Cmd) {
	t.Helper()
	if err := wl.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := wl.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
}

// listedBeforePosts requires every QP of process pid in the recording to
// be listed (a QPCreate found in memory) before its first post.
func listedBeforePosts(t *testing.T, rec string, pid uint32) {
	t.Helper()
	r, err := trace.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	listed, posted := map[uint32]bool{}, map[uint32]bool{}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Hdr().PID != pid {
			continue
		}
		switch e := ev.(type) {
		case *trace.QPCreate:
			if e.Via == trace.ViaMemory {
				listed[e.QPNum] = true
			}
		case *trace.Post:
			if !listed[e.QPNum] && !posted[e.QPNum] {
				t.Errorf("QP %#x posted before it was listed", e.QPNum)
			}
			posted[e.QPNum] = true
		}
	}
	if len(posted) == 0 {
		t.Error("no post recorded")
	}
}

func mkdir(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// noteBuildID reads the GNU build ID note: name size, desc size, type,
// "GNU\0", then the ID.
func noteBuildID(t *testing.T, f *elf.File) string {
	t.Helper()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		t.Fatal("no build-id note")
	}
	b, err := s.Data()
	if err != nil || len(b) < 17 {
		t.Fatalf("build-id note: %v", err)
	}
	return fmt.Sprintf("%x", b[16:])
}

// Bad targets of -p: one clear line each, a non-zero status, and no
// recording left behind.
func TestAttachBadInput(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	dir := t.TempDir()
	stripped, _ := strippedCopy(t, dir)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	ready := filepath.Join(dir, "ready")
	wl := exec.Command(stripped, "workload", "--rate", "1000", "-D", "30", "--ready-file", ready)
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	waitFile(t, ready)
	cases := []struct {
		name string
		args []string
		want string
		// kept: the trace ran and its recording ends saying why, as
		// every trace's does; else nothing may be left
		kept bool
	}{
		{"not a verbs process", []string{"-p", fmt.Sprint(sleeper.Process.Pid), "--verbs-timeout", "1s"},
			fmt.Sprintf("process %d has not loaded a verbs library after 1s", sleeper.Process.Pid), true},
		{"scan bound before any context", []string{"-p", fmt.Sprint(wl.Process.Pid), "--scan-mib", "1", "--debug-dir", dir},
			"memory scan bound reached: the byte bound 1 MiB (--scan-mib)", false},
		{"process gone", []string{"-p", "999999"}, "process 999999 does not exist", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "run.sqscope")
			args := append([]string{"record", "-o", rec}, c.args...)
			_, _, code, err := sqscope(args...)
			if code != 1 || err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("exit %d, error %v; want 1 and one line with %q", code, err, c.want)
			}
			_, serr := os.Stat(rec)
			if !c.kept && !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("a recording was left: %v", serr)
			}
			if c.kept {
				var r attachReport
				reportInto(t, rec, &r) // whole, and readable
			}
		})
	}
}
