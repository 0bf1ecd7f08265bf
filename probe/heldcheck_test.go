package probe

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/trace"
)

func TestPendingMask(t *testing.T) {
	status := "Name:\tx\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000040000\nSigBlk:\tzz\n"
	for _, tc := range []struct {
		key  string
		want uint64
	}{
		{"ShdPnd:", stopMask},
		{"SigPnd:", 0},
		{"SigBlk:", 0}, // unreadable
		{"SigCgt:", 0}, // absent
	} {
		if got := pendingMask(status, tc.key); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.key, got, tc.want)
		}
	}
}

// TestHeldThread stops and continues a child as a tracer and another
// process would: a stop continued by anyone is no longer a hold, and a
// process gone is an end, not a continue.
func TestHeldThread(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	for _, tc := range []struct {
		name string
		sig  syscall.Signal // sent before the check, 0 for none
		want threadHold
	}{
		{"running, never stopped", 0, threadRunning},
		{"stopped", syscall.SIGSTOP, threadHeld},
		{"continued by another", syscall.SIGCONT, threadRunning},
	} {
		if tc.sig != 0 {
			if err := syscall.Kill(pid, tc.sig); err != nil {
				t.Fatal(err)
			}
		}
		if tc.sig == syscall.SIGSTOP && !waitGroupStopped(pid, 5*time.Second) {
			t.Fatalf("%s: child %d did not stop", tc.name, pid)
		}
		if tc.sig == syscall.SIGCONT {
			waitState(t, pid, 'S')
		}
		if got := heldThread(pid, pid); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	waitGroupStopped(pid, 5*time.Second)
	cmd.Process.Kill() // killed while stopped
	cmd.Wait()
	if got := heldThread(pid, pid); got != threadEnded {
		t.Errorf("a process killed while stopped, reaped: %v, want ended", got)
	}
}

// What is said of a hold that did not last is what the trace shows, and
// nothing when the process ended without running again.
func TestHeldWarning(t *testing.T) {
	private := errors.New("no bpffs")
	for _, tc := range []struct {
		name string
		f    heldFacts
		want []string // "" : nothing said
		no   []string
	}{
		{"exited while its stop was pending", heldFacts{ended: true}, nil, nil},
		{"killed while stopped", heldFacts{ended: true, exitSig: 9},
			[]string{"process 42 ended while stopped for its probes (killed by signal 9, killed)", "nothing it called was missed"},
			[]string{"another", "continued"}},
		{"ran, then ended", heldFacts{ran: true, ended: true},
			[]string{"process 42 was continued while stopped", "SIGCONT from another process", "may be missing"}, []string{"ended"}},
		{"continued, holds shared", heldFacts{},
			[]string{"process 42 was continued while stopped for its probes by a SIGCONT from another process (not a tracer sharing this one's holds"},
			[]string{"another tracer?", "ended", "watchdog"}},
		{"continued, holds private", heldFacts{private: private},
			[]string{"another tracer? the holds of the tracers of this host are not shared: no bpffs"}, []string{"ended", "watchdog"}},
		{"its hold gone: the bound", heldFacts{ran: true, holdGone: true, private: private},
			[]string{"once held for the 5s a hold may last", "sqscope-hold"}, []string{"another tracer", "SIGCONT from another"}},
		{"held past the bound", heldFacts{heldNS: uint64(holdMax)},
			[]string{"once held for the 5s a hold may last"}, []string{"another"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := heldWarning(42, tc.f)
			if len(tc.want) == 0 {
				if got != "" {
					t.Fatalf("said %q, want nothing", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, w := range tc.no {
				if strings.Contains(got, w) {
					t.Errorf("%q says %q", got, w)
				}
			}
			if !strings.Contains(got, "while stopped") {
				t.Errorf("%q: the tests of shared holds look for \"while stopped\"", got)
			}
		})
	}
}

// hdrRecord is a record of kind from thread tid of pid, as the ring buffer
// hands it over (an exit record's exit code after the header).
func hdrRecord(kind bpf.VerbsSqRecKind, pid, tid uint32, exitCode uint32) []byte {
	r := bpf.VerbsSqExitRec{Hdr: bpf.VerbsSqHdr{Ts: trace.MonotonicNS(), Pid: pid, Tid: tid, Kind: uint8(kind)}, ExitCode: exitCode}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&r)), unsafe.Sizeof(r))...)
}

// Only a record that shows the stopping thread ran after its stop is
// taken as a continue: not a process's join the same probe made after the
// stop (tracing every process, a main thread's first verbs call), not
// another thread's record, not the process's exit, nor a record of a
// process this tracer itself continued already.
func TestRanWhileHeld(t *testing.T) {
	const pid, tid = 4242, 4242
	for _, tc := range []struct {
		name string
		rec  []byte
		late bool
		want bool // said to be continued
	}{
		{"its join, made after the stop", hdrRecord(bpf.VerbsSqRecKindSQ_REC_PROC, pid, tid, 0), false, false},
		{"another thread's post", hdrRecord(bpf.VerbsSqRecKindSQ_REC_POST, pid, tid+1, 0), false, false},
		{"its exit", hdrRecord(bpf.VerbsSqRecKindSQ_REC_EXIT, pid, tid+1, 9), false, false},
		{"another process's post", hdrRecord(bpf.VerbsSqRecKindSQ_REC_POST, pid+1, tid, 0), false, false},
		{"its post", hdrRecord(bpf.VerbsSqRecKindSQ_REC_POST, pid, tid, 0), false, true},
		{"its poll", hdrRecord(bpf.VerbsSqRecKindSQ_REC_POLL, pid, tid, 0), false, true},
		{"its post, after this tracer continued it", hdrRecord(bpf.VerbsSqRecKindSQ_REC_POST, pid, tid, 0), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Tracer{stopped: map[int]stopHold{pid: {since: time.Now(), tid: tid, stopNS: trace.MonotonicNS(), late: tc.late}},
				contByOther: map[int]bool{}}
			tr.ranWhileHeld(tc.rec)
			w := tr.Warnings()
			if got := len(w) > 0; got != tc.want {
				t.Fatalf("warnings %q, want a continue said: %v", w, tc.want)
			}
			if tc.want && !strings.Contains(w[0], "process 4242 was continued while stopped") {
				t.Errorf("warning %q", w[0])
			}
		})
	}
	// the exit record's signal is kept for the release, which then finds
	// the process gone
	tr := &Tracer{stopped: map[int]stopHold{pid: {tid: tid}}, contByOther: map[int]bool{}}
	tr.ranWhileHeld(hdrRecord(bpf.VerbsSqRecKindSQ_REC_EXIT, pid, tid, 9))
	if s := tr.stopped[pid]; !s.exited || s.exitSig != 9 {
		t.Errorf("after its exit record: %+v, want exited by signal 9", s)
	}
}

// At its release a hold is checked: a process continued by someone else
// is said, one this tracer continued itself (a record read after its
// continue, said then) is not said again, and a process killed while
// stopped is said to have ended, with nothing missed.
func TestCheckHold(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	for _, tc := range []struct {
		name string
		s    stopHold
		want string
	}{
		{"running, continued by another", stopHold{tid: pid, stopNS: trace.MonotonicNS()}, "was continued while stopped for its probes by a SIGCONT from another process"},
		{"running, continued by this tracer", stopHold{tid: pid, stopNS: trace.MonotonicNS(), late: true}, ""},
		{"running, held past the bound", stopHold{tid: pid, stopNS: trace.MonotonicNS() - uint64(holdMax)}, "once held for the 5s a hold may last"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Tracer{stopped: map[int]stopHold{}, contByOther: map[int]bool{}}
			tr.checkHold(pid, tc.s)
			w := tr.Warnings()
			if tc.want == "" && len(w) != 0 || tc.want != "" && (len(w) != 1 || !strings.Contains(w[0], tc.want)) {
				t.Errorf("warnings %q, want %q", w, tc.want)
			}
		})
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	waitGroupStopped(pid, 5*time.Second)
	tr := &Tracer{stopped: map[int]stopHold{}, contByOther: map[int]bool{}}
	tr.checkHold(pid, stopHold{tid: pid})
	if w := tr.Warnings(); len(w) != 0 {
		t.Errorf("a process still stopped: warnings %q", w)
	}
	cmd.Process.Kill()
	cmd.Wait()
	tr.checkHold(pid, stopHold{tid: pid, exited: true, exitSig: 9})
	if w := tr.Warnings(); len(w) != 1 || !strings.Contains(w[0], "ended while stopped") {
		t.Errorf("killed while stopped: warnings %q", w)
	}
	tr = &Tracer{stopped: map[int]stopHold{}, contByOther: map[int]bool{}}
	tr.checkHold(pid, stopHold{tid: pid, exited: true})
	if w := tr.Warnings(); len(w) != 0 {
		t.Errorf("exited while its stop was pending: warnings %q", w)
	}
}

// waitState waits until pid's state is st.
func waitState(t *testing.T, pid int, st byte) {
	t.Helper()
	deadline := time.Now().Add(bpftest.Timeout(t, 5*time.Second))
	for {
		got, err := statState(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && got == st {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d in state %c, want %c", pid, got, st)
		}
		time.Sleep(time.Millisecond)
	}
}
