package probe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/trace"
)

// TestAttachRunningProcess: -p PID on a process that created its QPs
// before the tracer attached. Its QPs are learned from their next modify,
// which also reveals post_send/poll_cq; from then on nothing is missed.
func TestAttachRunningProcess(t *testing.T) {
	requireBPF(t)
	bin := buildTarget(t)
	cmd := exec.Command(bin, "late")
	stdin, _ := cmd.StdinPipe()
	stdoutPipe, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdoutPipe)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("target said %q, %v", line, err)
	}

	tr, err := Open(Options{PID: cmd.Process.Pid, FlushInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	warned := false
	for _, w := range tr.Warnings() {
		if contains(w, "was running before sqscope attached") && contains(w, "--probe post_send=") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning about QPs created before attach: %q", tr.Warnings())
	}

	var evs []trace.Event
	ctx, cancel := context.WithTimeout(context.Background(), bpftest.Timeout(t, 30*time.Second))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, func(e trace.Event) { evs = append(evs, e) }) }()
	io.WriteString(stdin, "go\n")
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := parseStats(t, rest)
	got := tallyEvents(evs)
	if got.QPs != 2 || got.Exits != 1 {
		t.Errorf("traced %d QPs created after attach and %d exits, want 2 and 1", got.QPs, got.Exits)
	}
	checkCounts(t, got, want, "modifies", "post calls", "post WRs", "non-empty polls", "empty polls", "wr batches")
}

// TestExplicitProbe places post_send by hand at the fake provider's static
// function; discovery later finds the same place and does not attach twice.
func TestExplicitProbe(t *testing.T) {
	requireBPF(t)
	bin := buildTarget(t)
	sym, err := ResolveSymbol(bin, "fake_post_send")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProbe("post_send=" + bin + ":0x" + strconv.FormatUint(sym.Offset, 16))
	if err != nil {
		t.Fatal(err)
	}
	out, evs, _ := traceRun(t, Options{Probes: []ExplicitProbe{p}}, "run")
	want := parseStats(t, out)
	got := tallyEvents(evs)
	if got.Attached["post_send/explicit"] != 1 || got.Attached["post_send/ops-table"] != 0 {
		t.Errorf("post_send attachments: %v", got.Attached)
	}
	if got.PostCalls != want.PostCalls || got.PostWRs != want.PostWRs {
		t.Errorf("posts %d (%d WRs), target did %d (%d)", got.PostCalls, got.PostWRs, want.PostCalls, want.PostWRs)
	}
}

// TestOpenErrors: bad options give one-line errors.
func TestOpenErrors(t *testing.T) {
	requireBPF(t)
	bin := buildTarget(t)
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"no such process", Options{PID: 1 << 30}, "process 1073741824 does not exist"},
		{"ring not a power of two", Options{RingBytes: 10000}, "want a power of two"},
		{"ring too small", Options{RingBytes: 1024}, "want a power of two of at least 4096"},
		{"bound too large", Options{MaxWRs: 65}, "MaxWRs 65"},
		{"probe outside the file's code", Options{Probes: []ExplicitProbe{{"post_send", bin, 0x10}}}, "outside the executable segments"},
		{"probe in a missing file", Options{Probes: []ExplicitProbe{{"poll_cq", "/nonexistent/libx.so", 0x1000}}}, "/nonexistent/libx.so"},
		{"nothing to probe", Options{Exe: "/bin/true", Libibverbs: "/bin/true"}, "found no verbs functions to probe"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := Open(c.opts)
			if err == nil {
				tr.Close()
				t.Fatalf("no error, want %q", c.want)
			}
			if !contains(err.Error(), c.want) || contains(err.Error(), "\n") {
				t.Errorf("err = %q, want one line with %q", err, c.want)
			}
		})
	}
}

func TestStartHeldErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		argv []string
		want string
	}{
		{"empty", nil, "no command"},
		{"not found", []string{"sqscope-no-such-command"}, "command not found: sqscope-no-such-command"},
		{"missing path", []string{"/nonexistent/cmd"}, "/nonexistent/cmd"},
		{"directory", []string{"/"}, "not an executable file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch, err := StartHeld(c.argv, nil)
			if err == nil {
				ch.Kill()
				t.Fatalf("no error, want %q", c.want)
			}
			if !contains(err.Error(), c.want) {
				t.Errorf("err = %q, want %q", err, c.want)
			}
		})
	}
}

// TestStartHeld: the child keeps its PID across the exec and runs nothing
// before Release; a killed held child never runs the command.
func TestStartHeld(t *testing.T) {
	dir := t.TempDir()
	mark := dir + "/ran"
	cmd := exec.Command("/bin/sh", "-c", "echo $$ > "+mark)
	ch, err := StartHeldCmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the command ran before Release")
	}
	if err := ch.Release(); err != nil {
		t.Fatal(err)
	}
	st, err := ch.Wait()
	if err != nil || !st.Success() {
		t.Fatalf("wait: %v %v", st, err)
	}
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(ch.Pid()) {
		t.Errorf("command ran as pid %s, held child was %d", got, ch.Pid())
	}

	mark2 := dir + "/ran2"
	ch, err = StartHeldCmd(exec.Command("/bin/sh", "-c", "touch "+mark2))
	if err != nil {
		t.Fatal(err)
	}
	ch.Kill()
	ch.Wait()
	if _, err := os.Stat(mark2); err == nil {
		t.Error("a killed held child ran its command")
	}
}

// TestTraceAllProcesses: PID 0 traces every process; Run ends when its
// context is cancelled and still delivers what was already recorded.
func TestTraceAllProcesses(t *testing.T) {
	requireBPF(t)
	bin := buildTarget(t)
	tr, err := Open(Options{Exe: bin, FlushInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	var evs []trace.Event
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, func(e trace.Event) { evs = append(evs, e) }) }()

	if err := tr.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	cmd := exec.Command(bin, "run")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bpftest.Timeout(t, 10*time.Second)):
		t.Fatal("Run did not return after cancel")
	}
	var mine []trace.Event
	for _, e := range evs {
		if int(e.Hdr().PID) == cmd.Process.Pid {
			mine = append(mine, e)
		}
	}
	want := parseStats(t, out)
	got := tallyEvents(mine)
	if got.PostCalls != want.PostCalls || got.WRBatches != want.WRBatches || got.CQEs != want.CQEs ||
		got.EmptyPolls != want.EmptyPolls || got.Exits != 1 {
		t.Errorf("traced posts %d batches %d cqes %d empty %d exits %d; target did %d %d %d %d 1",
			got.PostCalls, got.WRBatches, got.CQEs, got.EmptyPolls, got.Exits,
			want.PostCalls, want.WRBatches, want.CQEs, want.EmptyPolls)
	}
}

// TestLostEventsCounted: with a tiny ring buffer and a reader that stalls,
// records are dropped, and every drop is reported: delivered + lost equals
// what the target did.
func TestLostEventsCounted(t *testing.T) {
	requireBPF(t)
	const n = 20000
	stalled := false
	var evs []trace.Event
	bin := buildTarget(t)
	cmd := exec.Command(bin, "bench", strconv.Itoa(n))
	ch, err := StartHeldCmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Open(Options{Child: ch, RingBytes: 4096, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	done := make(chan error, 1)
	go func() {
		done <- tr.Run(context.Background(), func(e trace.Event) {
			if _, ok := e.(*trace.Post); ok && !stalled {
				stalled = true
				time.Sleep(100 * time.Millisecond)
			}
			evs = append(evs, e)
		})
	}()
	ch.Release()
	ch.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(bpftest.Timeout(t, 20*time.Second)):
		t.Fatal("Run did not end")
	}
	var delivered, lost uint64
	for _, e := range evs {
		switch e := e.(type) {
		case *trace.Lost:
			lost += e.Count
		case *trace.QPCreate, *trace.QPModify, *trace.Post, *trace.Poll, *trace.Exit:
			delivered++
		}
	}
	if lost == 0 || lost != tr.Lost() {
		t.Errorf("Lost events sum to %d, Lost() is %d; want equal and > 0", lost, tr.Lost())
	}
	// create + 3 modifies + n posts + n polls + exit
	if want := uint64(5 + 2*n); delivered+lost != want {
		t.Errorf("delivered %d + lost %d = %d records, the target made %d", delivered, lost, delivered+lost, want)
	}
	t.Logf("delivered %d, lost %d", delivered, lost)
}

func TestOpenWithoutUprobes(t *testing.T) {
	saved := uprobePMU
	uprobePMU = "/nonexistent/uprobe"
	defer func() { uprobePMU = saved }()
	_, err := Open(Options{})
	if err == nil || !contains(err.Error(), "this kernel has no uprobes") {
		t.Errorf("err = %v", err)
	}
}

// TestOpenUnprivileged runs Open as an unprivileged user (a copy of this
// test binary under uid 65534) and checks the error says what to do.
func TestOpenUnprivileged(t *testing.T) {
	if os.Getenv("SQSCOPE_TEST_UNPRIVILEGED") == "1" {
		_, err := Open(Options{})
		if err == nil {
			t.Fatal("Open succeeded without privileges")
		}
		os.Stdout.WriteString("ERR: " + err.Error() + "\n")
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged user")
	}
	dir, err := os.MkdirTemp("", "sqscope-unpriv")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	self, _ := os.Executable()
	bin := dir + "/probe.test"
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestOpenUnprivileged$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SQSCOPE_TEST_UNPRIVILEGED=1")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !contains(string(out), "ERR: loading BPF needs root or CAP_BPF and CAP_PERFMON") {
		t.Errorf("unprivileged Open said %s", out)
	}
}

// Detaching from a target that keeps running hands every thread's pending
// counts over: the totals equal what the target did, though its last
// calls (fewer than a hand-over's worth) were still counted per thread.
func TestDetachHandsOverPendingCounts(t *testing.T) {
	requireBPF(t)
	bin := buildTarget(t)
	// 32 handed over by the thread itself, 10 pending; the last two polls
	// are empty (every 4th WR is signaled), pending in the events mode too
	const posts = 42
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"counters", Options{Mode: ModeCounters}},
		{"counters, thread state in task storage", Options{Mode: ModeCounters, noThreadSlots: true}},
		{"counters, one thread slot", Options{Mode: ModeCounters, oneThreadSlot: true}},
		{"counters, thread state by tid", Options{Mode: ModeCounters, noTaskStorage: true, noThreadSlots: true}},
		{"events", Options{}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			cmd := exec.Command(bin, "idle", strconv.Itoa(posts))
			stdin, _ := cmd.StdinPipe()
			stdoutPipe, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			child, err := StartHeldCmd(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close()
				child.Wait()
			}()
			opts := c.opts
			opts.Child = child
			opts.FlushInterval = 20 * time.Millisecond
			tr, err := Open(opts)
			if err != nil {
				child.Kill()
				t.Fatal(err)
			}
			defer tr.Close()
			var evs []trace.Event
			ctx, cancel := context.WithTimeout(context.Background(), bpftest.Timeout(t, 30*time.Second))
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tr.Run(ctx, func(e trace.Event) { evs = append(evs, e) }) }()
			if err := child.Release(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdoutPipe).ReadString('\n')
			if err != nil || line != fmt.Sprintf("posted %d\n", posts) {
				t.Fatalf("target said %q, %v", line, err)
			}
			time.Sleep(100 * time.Millisecond) // several flushes: what they show is not all
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// the target is still running, idle
			if Ended(cmd.Process.Pid) {
				t.Fatal("the target exited before the tracer detached")
			}
			var calls, wrs, polls, empty uint64
			for _, e := range evs {
				switch e := e.(type) {
				case *trace.QPCounters:
					calls, wrs = e.PostCalls, e.WRs // totals
				case *trace.CQCounters:
					polls, empty = e.Polls, e.Empty
				case *trace.Post:
					calls++
					wrs += uint64(len(e.WRs))
				case *trace.Poll:
					polls++
					empty += e.EmptyBefore
				case *trace.EmptyPolls:
					empty += e.Count
				}
			}
			if opts.Mode == ModeEvents {
				polls += empty // Poll events are the non-empty polls
			}
			if calls != posts || wrs != posts || polls != posts || empty != posts-posts/4 {
				t.Errorf("post calls %d, WRs %d, polls %d (%d empty); want %d, %d, %d (%d)",
					calls, wrs, polls, empty, posts, posts, posts, posts-posts/4)
			}
		})
	}
}

// What is said of a running target in whose memory no QP was found: that
// it ended, when it ended during the attach (not that its QPs are learned
// later), and otherwise how its QPs are learned.
func TestRunningNote(t *testing.T) {
	for _, tc := range []struct {
		name              string
		bySym, byMem, qps int
		ended             bool
		want, no          string
	}{
		{"no context found, running", 0, 0, 0, false, "its existing QPs are seen from their next ibv_modify_qp", "ended"},
		{"no context found, ended", 0, 0, 0, true, "process 42 ended while sqscope attached: its memory scan found no verbs context", "next ibv_modify_qp"},
		{"functions, no QP, running", 2, 0, 0, false, "found by symbol, and QPs it created earlier are learned from their first post or poll", "ended"},
		{"functions from memory, no QP, running", 0, 3, 0, false, "found in its memory", "ended"},
		{"functions, no QP, ended", 0, 3, 0, true, "its memory scan found no QP (destroyed on its way out)", "learned"},
		{"QPs but no function placed, ended", 0, 0, 2, true, "process 42 ended while sqscope attached: nothing of it is traced", "found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runningNote(42, tc.bySym, tc.byMem, tc.qps, tc.ended)
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.no) {
				t.Errorf("%q: want %q, not %q", got, tc.want, tc.no)
			}
		})
	}
}
