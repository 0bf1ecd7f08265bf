package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/trace"
)

// cutQP is what a cut trace showed of one QP, from its events: the wr_ids
// it saw posted and completed, in order.
type cutQP struct {
	posted    []uint64
	completed []uint64
}

// cutSink keeps the wr_ids of every post and completion (events are reused:
// only numbers are kept), by QP number.
type cutSink struct {
	qps   map[uint32]*cutQP
	cqQP  map[uint64]uint32 // send CQ -> QP number, for extended polls
	end   *trace.End
	polls int
}

func (c *cutSink) qp(n uint32) *cutQP {
	if c.qps[n] == nil {
		c.qps[n] = &cutQP{}
	}
	return c.qps[n]
}

func (c *cutSink) add(ev trace.Event) {
	switch e := ev.(type) {
	case *trace.QPCreate:
		c.cqQP[e.SendCQ] = e.QPNum
	case *trace.Post:
		q := c.qp(e.QPNum)
		for _, w := range e.WRs[:min(int(e.Accepted), len(e.WRs))] {
			q.posted = append(q.posted, w.ID)
		}
	case *trace.Poll:
		c.polls++
		for _, wc := range e.WCs {
			n := wc.QPNum
			if e.Ex {
				n = c.cqQP[e.CQ]
			}
			c.qp(n).completed = append(c.qp(n).completed, wc.ID)
		}
	case *trace.End:
		end := *e
		c.end = &end
	}
}

// A trace stopped while its target runs on, at many moments (past the
// moment both its QPs have posted), in both modes,
// through post_send and the wr API, ibv_poll_cq and extended polling, on a
// command it started (--keep-target) and on a process it attached to (-p):
// every probe stops at one cut. No post is recorded after the polls
// stopped (the WRs posted past the last completion seen never exceed the
// depth), no completion is recorded whose post was not (or it is counted
// and said), no post is missing before the cut, and the occupancy never
// exceeds the depth.
func TestCutMidRun(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	const depth, sig = 128, 16
	tests := []struct {
		name   string
		mode   string
		attach bool // -p on a running process, else a started command kept running
		after  time.Duration
		args   []string
	}{
		{"events post_send early", ModeEvents, false, 150 * time.Millisecond, nil},
		{"events post_send", ModeEvents, false, 420 * time.Millisecond, nil},
		{"events post lists", ModeEvents, false, 700 * time.Millisecond, []string{"-l", "4"}},
		{"events wr api", ModeEvents, false, 330 * time.Millisecond, []string{"--api", "wr", "-l", "8"}},
		{"events wr api late", ModeEvents, false, 1100 * time.Millisecond, []string{"--api", "wr"}},
		{"events extended polls", ModeEvents, false, 510 * time.Millisecond, []string{"--cq-ex"}},
		{"events attached", ModeEvents, true, 260 * time.Millisecond, nil},
		{"events attached later", ModeEvents, true, 830 * time.Millisecond, []string{"-l", "2"}},
		{"counters post_send early", ModeCounters, false, 170 * time.Millisecond, nil},
		{"counters post_send", ModeCounters, false, 610 * time.Millisecond, nil},
		{"counters post lists", ModeCounters, false, 380 * time.Millisecond, []string{"-l", "4"}},
		{"counters wr api", ModeCounters, false, 900 * time.Millisecond, []string{"--api", "wr", "-l", "8"}},
		{"counters extended polls", ModeCounters, false, 450 * time.Millisecond, []string{"--cq-ex"}},
		{"counters attached", ModeCounters, true, 540 * time.Millisecond, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{bin, "workload", "--qps", "2", "-s", "64", "-I", "64",
				"-Q", fmt.Sprint(sig), "-t", fmt.Sprint(depth), "-D", "60"}, tc.args...)
			var childOut, warnings bytes.Buffer
			cfg := Config{Mode: tc.mode, ChildOut: &childOut, Warnings: &warnings}
			var target *exec.Cmd
			if tc.attach {
				ready := filepath.Join(t.TempDir(), "ready")
				target = exec.Command(args[0], append(args[1:], "--wait-signal", "--ready-file", ready)...)
				target.Stdout, target.Stderr = &childOut, &childOut
				if err := target.Start(); err != nil {
					t.Fatal(err)
				}
				defer func() {
					target.Process.Kill()
					target.Wait()
				}()
				waitFile(t, ready)
				cfg.PID = target.Process.Pid
			} else {
				cfg.Argv, cfg.KeepTarget = args, true
			}
			s, err := Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !tc.attach {
				defer syscall.Kill(s.PID(), syscall.SIGKILL) // kept running: ours to end
			} else if err := target.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			sink := &cutSink{qps: map[uint32]*cutQP{}, cqQP: map[uint64]uint32{}}
			s.AddSink(sink.add)
			// The cut falls tc.after past the moment both QPs have posted,
			// as a time limit would: how long the workload takes to start
			// under its probes depends on the machine.
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			posting := map[uint32]bool{}
			s.AddSink(func(ev trace.Event) {
				var qpn uint32
				switch e := ev.(type) {
				case *trace.Post:
					qpn = e.QPNum
				case *trace.QPCounters: // counters mode: a flush of its totals
					if e.WRs == 0 {
						return
					}
					qpn = e.QPNum
				default:
					return
				}
				if !posting[qpn] {
					if posting[qpn] = true; len(posting) == 2 {
						time.AfterFunc(tc.after, func() { cancel(context.DeadlineExceeded) })
					}
				}
			})
			time.AfterFunc(50*time.Second, func() { cancel(context.DeadlineExceeded) }) // the workload's 60 s bound it
			if err := s.Run(ctx); err != nil {
				t.Fatalf("run: %v (target said %q)", err, childOut.String())
			}
			if syscall.Kill(s.PID(), 0) != nil {
				t.Fatalf("the target did not run on after the trace: %q", childOut.String())
			}
			snap := s.Analyzer().Snapshot()
			if c, ok := s.tracer.CutInfo(); ok {
				t.Logf("cut %.3f s after the start; posts in flight waited for %v, %d not back by then",
					float64(c.AtNS-snap.FirstNS)/1e9, c.Waited, c.InFlightUnseen)
			}
			if w := warnings.String(); w != "" {
				t.Logf("warnings:\n%s", w)
			}
			checkCutRun(t, tc.mode, snap, sink, depth, sig)
		})
	}
}

// checkCutRun checks one cut trace of the workload (2 QPs, one thread
// each, signaling every sig-th WR, at most depth outstanding).
func checkCutRun(t *testing.T, mode string, snap analyzer.Snapshot, sink *cutSink, depth, sig uint64) {
	t.Helper()
	if snap.Lost != 0 {
		t.Fatalf("%d events lost: nothing can be said of the cut", snap.Lost)
	}
	if sink.end == nil || sink.end.CutNS == 0 || snap.Cut == nil || snap.Cut.AtNS != sink.end.CutNS {
		t.Fatalf("the trace does not say it was cut: end %+v, snapshot cut %+v", sink.end, snap.Cut)
	}
	if !strings.Contains(snap.Ended, "time limit") {
		t.Errorf("ended %q, want the time limit", snap.Ended)
	}
	if len(snap.QPs) != 2 {
		t.Fatalf("%d QPs traced, want 2", len(snap.QPs))
	}
	var text bytes.Buffer
	if err := report.WriteText(&text, snap); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "trace cut ") {
		t.Errorf("the text does not say where the trace was cut:\n%s", text.String())
	}
	if mode == ModeCounters {
		checkCutCounters(t, snap, depth, sig)
		return
	}
	if snap.Total.UnmatchedCQEs != 0 {
		t.Errorf("%d completions matched no post seen", snap.Total.UnmatchedCQEs)
	}
	if !strings.Contains(text.String(), "completions that matched no post seen: 0") {
		t.Errorf("the text does not say the completions matched:\n%s", text.String())
	}
	var outstanding uint64
	for _, q := range snap.QPs {
		outstanding += q.Outstanding
		if q.PeakOutstanding > depth || q.Outstanding > depth {
			t.Errorf("QP %#x: outstanding %d, peak %d, above the depth %d", q.QPNum, q.Outstanding, q.PeakOutstanding, depth)
		}
		if q.MaxSendWR != 0 && q.PeakOutstanding > uint64(q.MaxSendWR) {
			t.Errorf("QP %#x: peak %d above max_send_wr %d", q.QPNum, q.PeakOutstanding, q.MaxSendWR)
		}
		ev := sink.qps[q.QPNum]
		if ev == nil || len(ev.posted) == 0 || len(ev.completed) == 0 {
			t.Fatalf("QP %#x: no posts or completions traced", q.QPNum)
		}
		// every post from the first to the cut: consecutive wr_ids
		for i, id := range ev.posted {
			if id != uint64(i) {
				t.Fatalf("QP %#x: post %d has wr_id %d: a post before the cut is missing", q.QPNum, i, id)
			}
		}
		last := uint64(len(ev.posted)) - 1
		for i, id := range ev.completed {
			if id > last {
				t.Fatalf("QP %#x: completion of wr_id %d recorded, the last post recorded is %d", q.QPNum, id, last)
			}
			if id%sig != sig-1 || (i > 0 && id != ev.completed[i-1]+sig) {
				t.Fatalf("QP %#x: completion %d is of wr_id %d: completions are not every %d-th WR in order", q.QPNum, i, id, sig)
			}
		}
		// no post after the polls stopped: past the last completion seen,
		// at most a queue's depth of WRs
		if after := last - ev.completed[len(ev.completed)-1]; after > depth {
			t.Errorf("QP %#x: %d WRs posted after the last completion recorded, depth %d", q.QPNum, after, depth)
		}
	}
	if w := snap.Cut.WRsOutstanding; w == nil || *w != outstanding {
		t.Errorf("cut: WRs outstanding %v, the QPs have %d", w, outstanding)
	}
}

// checkCutCounters checks a counters-mode cut: per QP, completions never
// outnumber the signaled WRs counted, and the WRs they do not retire fit
// in the queue.
func checkCutCounters(t *testing.T, snap analyzer.Snapshot, depth, sig uint64) {
	t.Helper()
	cqes := map[uint64]uint64{}
	for _, c := range snap.CQs {
		cqes[c.CQ] += c.CQEs
	}
	var wrs, signaled, total uint64
	for _, q := range snap.QPs {
		wrs += q.WRs
		signaled += q.Signaled
		if q.WRs == 0 {
			t.Errorf("QP %#x: no WRs counted", q.QPNum)
		}
		n, ok := cqes[q.SendCQ]
		if q.SendCQ == 0 || !ok {
			continue // attached: its CQ is known only in the total
		}
		total += n
		checkCounted(t, fmt.Sprintf("QP %#x", q.QPNum), 1, q.WRs, q.Signaled, n, depth, sig)
	}
	if total == 0 { // no QP's CQ known: the totals
		for _, n := range cqes {
			total += n
		}
		checkCounted(t, "all QPs", uint64(len(snap.QPs)), wrs, signaled, total, depth, sig)
	}
}

// checkCounted checks the counts of qps QPs together.
func checkCounted(t *testing.T, what string, qps, wrs, signaled, cqes, depth, sig uint64) {
	t.Helper()
	if cqes > signaled || cqes*sig > wrs {
		t.Errorf("%s: %d completions counted for %d signaled of %d WRs: completions of posts not counted", what, cqes, signaled, wrs)
	} else if wrs-cqes*sig > qps*depth {
		t.Errorf("%s: %d WRs counted, %d retired by the %d completions counted: %d outstanding, above the depth %d",
			what, wrs, cqes*sig, cqes, wrs-cqes*sig, qps*depth)
	}
	// every sig-th WR of each QP is signaled, from its first
	if signaled*sig > wrs || wrs >= (signaled+qps)*sig {
		t.Errorf("%s: %d signaled of %d WRs, want every %d-th", what, signaled, wrs, sig)
	}
}

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(bpftest.Timeout(t, 30*time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s was not written", path)
}
