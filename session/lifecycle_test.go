package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// simProgram is a C program in testdata/ built on the simulated HCA once
// per test run.
type simProgram struct {
	name string
	once sync.Once
	bin  string
	err  error
}

var (
	lifecycleProg = &simProgram{name: "lifecycle"}
	recvsideProg  = &simProgram{name: "recvside"}
)

// path builds the program on first use and returns its binary.
func (p *simProgram) path(t *testing.T) string {
	t.Helper()
	p.once.Do(func() {
		dir, err := os.MkdirTemp("", "sqscope-"+p.name+"-")
		if err != nil {
			p.err = err
			return
		}
		p.bin = filepath.Join(dir, p.name)
		src := "testdata/" + p.name + ".c"
		// the simulated HCA is every verbs/sim*.c
		sim, _ := filepath.Glob("../verbs/sim*.c")
		args := append([]string{"-O2", "-g", "-Wall", "-pthread", "-I../verbs", "-o", p.bin, src}, sim...)
		out, err := exec.Command("cc", append(args, "-libverbs")...).CombinedOutput()
		if err != nil {
			p.err = fmt.Errorf("building %s: %v\n%s", src, err, out)
		}
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.bin
}

// simTruth is one line testdata/lifecycle.c prints: what the simulated
// HCA counted for one QP and its CQ.
type simTruth struct {
	Round      int    `json:"round"`
	QP         uint64 `json:"qp"`
	CQ         uint64 `json:"cq"`
	QPNum      uint32 `json:"qp_num"`
	WRs        uint64 `json:"wrs"`
	PostCalls  uint64 `json:"post_calls"`
	Inline     uint64 `json:"inline"`
	Signaled   uint64 `json:"signaled"`
	Doorbells  uint64 `json:"doorbells"`
	CQEsPolled uint64 `json:"cqes_polled"`
	CQPolls    uint64 `json:"cq_polls"`
	CQEmpty    uint64 `json:"cq_empty"`
	CQCQEs     uint64 `json:"cq_cqes"`
}

// lifeRun is one traced run of testdata/lifecycle.c.
type lifeRun struct {
	snap   analyzer.Snapshot
	truth  []simTruth
	out    string
	err    error // what Run returned
	check  string
	file   string
	events int64         // written to the recording
	ran    time.Duration // from Run's call to its return
	exitAt time.Duration // from Run's call to the target's exit record (0: none)
	ready  time.Duration // exit-at: how long the target took to be ready to exit
}

// traceLifecycle traces testdata/lifecycle.c with args in mode, recording
// it, until it ends.
func traceLifecycle(t *testing.T, mode string, timeout time.Duration, args ...string) lifeRun {
	t.Helper()
	var out, warnings bytes.Buffer
	r := lifeRun{file: filepath.Join(t.TempDir(), "run.sqscope")}
	s, err := Start(Config{Argv: append([]string{lifecycleProg.path(t)}, args...), Mode: mode, VerbsTimeout: timeout,
		ChildOut: &out, Warnings: &warnings, RecordTo: r.file, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := s.Recorder()
	var exitNS uint64
	s.AddSink(func(ev trace.Event) {
		if e, ok := ev.(*trace.Exit); ok && exitNS == 0 {
			exitNS = e.TimeNS
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), bpftest.Timeout(t, time.Minute))
	defer cancel()
	began, beganNS := time.Now(), trace.MonotonicNS()
	r.err = s.Run(ctx)
	r.ran = time.Since(began)
	if exitNS > beganNS {
		r.exitAt = time.Duration(exitNS - beganNS)
	}
	r.check = s.checked
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	r.snap, r.out, r.events = analyzertest.Snapshot(t, s.Analyzer()), out.String(), rec.Events()
	sc := bufio.NewScanner(strings.NewReader(r.out))
	for sc.Scan() {
		var l simTruth
		if strings.HasPrefix(sc.Text(), "{\"qps\"") {
			var ready struct {
				MS int64 `json:"ready_ms"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ready); err != nil {
				t.Fatalf("target line %q: %v", sc.Text(), err)
			}
			r.ready = time.Duration(ready.MS) * time.Millisecond
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("target line %q: %v", sc.Text(), err)
		}
		r.truth = append(r.truth, l)
	}
	if w := warnings.String(); w != "" {
		t.Logf("warnings:\n%s", w)
	}
	return r
}

// readBack reads a run's recording; it must be complete.
func (r *lifeRun) readBack(t *testing.T) (analyzer.Snapshot, trace.Event) {
	t.Helper()
	f, err := OpenRecording(r.file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// the model the live trace used: the target's BlueFlame knobs
	an := analyzer.New(analyzer.Options{BF: analyzer.BFFromEnv(f.Info().Env), Mode: f.Info().ProbeMode})
	var last trace.Event
	res, err := ReadAll(context.Background(), f, func(ev trace.Event) {
		an.Ingest(ev)
		last = ev
	})
	if err != nil || res.Truncated != nil || res.Corrupt != nil || res.Events != r.events {
		t.Fatalf("read back %d of %d events: %v %+v", res.Events, r.events, err, res)
	}
	return analyzertest.Snapshot(t, an), last
}

// A thousand QPs and CQs created and destroyed in a loop, posted to and
// polled in between, at the few addresses malloc gives back: in both
// modes every QP and every CQ is an object of its own, with exactly the
// simulator's counts, and the two modes agree on every per-QP field the
// counters mode has.
func TestChurnPerObjectExact(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	const rounds = 1000
	runs := map[string]lifeRun{}
	for _, mode := range []string{ModeEvents, ModeCounters} {
		t.Run(mode, func(t *testing.T) {
			r := traceLifecycle(t, mode, 10*time.Second, "churn", fmt.Sprint(rounds))
			runs[mode] = r
			if r.err != nil || len(r.truth) != rounds {
				t.Fatalf("run: %v; %d rounds said (%q...)", r.err, len(r.truth), r.out[:min(len(r.out), 200)])
			}
			s := r.snap
			qpAddrs, cqAddrs := map[uint64]bool{}, map[uint64]bool{}
			for _, w := range r.truth {
				qpAddrs[w.QP], cqAddrs[w.CQ] = true, true
			}
			t.Logf("%d QPs at %d addresses, %d CQs at %d addresses; %d events, %d lost",
				rounds, len(qpAddrs), rounds, len(cqAddrs), s.Events, s.Lost)
			if len(qpAddrs) == rounds || len(cqAddrs) == rounds {
				t.Fatal("no address was used again: the test shows nothing")
			}
			if s.Lost != 0 || len(s.QPs) != rounds || len(s.CQs) != rounds {
				t.Fatalf("%d lost, %d QPs, %d CQs; want 0, %d, %d", s.Lost, len(s.QPs), len(s.CQs), rounds, rounds)
			}
			if !strings.Contains(s.Ended, "the target exited with status 0") || s.EndedOnError {
				t.Errorf("ended %q (on error %v)", s.Ended, s.EndedOnError)
			}
			byNum := map[uint32]analyzer.QP{}
			gens := map[uint64]bool{}
			for _, q := range s.QPs {
				byNum[q.QPNum] = q
				gens[q.Gen] = true
			}
			cqByGen := map[uint64]analyzer.CQ{}
			for _, c := range s.CQs {
				cqByGen[c.Gen] = c
				gens[c.Gen] = true
			}
			if len(gens) != 2*rounds || gens[0] {
				t.Errorf("%d distinct generations (0 among them: %v), want %d", len(gens), gens[0], 2*rounds)
			}
			bad := 0
			for _, w := range r.truth {
				q, ok := byNum[w.QPNum]
				c := cqByGen[q.SendCQGen]
				got := simTruth{Round: w.Round, QP: w.QP, CQ: w.CQ, QPNum: q.QPNum, WRs: q.WRs, PostCalls: q.PostCalls,
					Inline: q.Inline, Signaled: q.Signaled, Doorbells: q.Doorbells, CQEsPolled: w.CQEsPolled,
					CQPolls: q.Polls, CQEmpty: q.EmptyPolls, CQCQEs: c.CQEs}
				if mode == ModeEvents {
					got.CQEsPolled = q.CQEsPolled
				}
				if !ok || got != w || !q.Destroyed || c.Polls != w.CQPolls || c.EmptyPolls != w.CQEmpty || c.CQ != w.CQ {
					if bad++; bad <= 5 {
						t.Errorf("round %d: traced %+v (destroyed %v, CQ %+v)\n the simulator counted %+v", w.Round, got, q.Destroyed, c, w)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d QPs differ from the simulator's counts", bad, rounds)
			}
			back, _ := r.readBack(t)
			// as JSON: fmt would print a QP as its cuts (Cuts.String) and
			// snapshots hold pointers
			if jsonOf(t, back.QPs) != jsonOf(t, s.QPs) || jsonOf(t, back.CQs) != jsonOf(t, s.CQs) {
				t.Error("the recording read back gives other QPs or CQs than the live trace")
				for i := range min(len(back.QPs), len(s.QPs)) {
					if a, b := jsonOf(t, back.QPs[i]), jsonOf(t, s.QPs[i]); a != b {
						t.Logf("QP %d:\nback %s\nlive %s", i, a, b)
						break
					}
				}
				for i := range min(len(back.CQs), len(s.CQs)) {
					if a, b := jsonOf(t, back.CQs[i]), jsonOf(t, s.CQs[i]); a != b {
						t.Logf("CQ %d:\nback %s\nlive %s", i, a, b)
						break
					}
				}
			}
		})
	}
	ev, ctr := runs[ModeEvents], runs[ModeCounters]
	if len(ev.snap.QPs) != rounds || len(ctr.snap.QPs) != rounds {
		return
	}
	// the per-QP fields the counters mode has agree with the events mode's
	analyzertest.CheckModes(t, ev.snap, ctr.snap)
}

// jsonOf is v as JSON, which compares what snapshots point to (fmt
// would print the pointers).
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A main thread that leaves with pthread_exit while workers post for
// seconds does not end the trace: the process ends with its last thread,
// and every post is traced. (The workers pause 20 ms between bursts: the
// reader then finds the ring empty and looks whether the target ended.)
func TestMainThreadExitsFirst(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	const ms, threads = 3000, 3
	for _, mode := range []string{ModeEvents, ModeCounters} {
		t.Run(mode, func(t *testing.T) {
			r := traceLifecycle(t, mode, 10*time.Second, "main-exit", fmt.Sprint(ms), fmt.Sprint(threads), "20")
			s := r.snap
			if r.err != nil || len(r.truth) != threads {
				t.Fatalf("run: %v; %d QPs said (%q)", r.err, len(r.truth), r.out)
			}
			span := time.Duration(s.LastNS - s.FirstNS)
			var posts uint64
			for _, w := range r.truth {
				posts += w.PostCalls
			}
			t.Logf("traced %v of a %v run, %d posts, %d events, %d lost; ended: %s", span, ms*time.Millisecond, posts, s.Events, s.Lost, s.Ended)
			if span < ms*time.Millisecond*9/10 || !s.Exited || s.ExitCode != 0 || s.Lost != 0 ||
				!strings.Contains(s.Ended, "the target exited with status 0") {
				t.Fatalf("traced %v, exited %v (code %d), %d lost, ended %q", span, s.Exited, s.ExitCode, s.Lost, s.Ended)
			}
			if len(s.QPs) != threads {
				t.Fatalf("%d QPs traced, want %d", len(s.QPs), threads)
			}
			for _, w := range r.truth {
				found := false
				for _, q := range s.QPs {
					if q.QPNum == w.QPNum {
						found = true
						if q.WRs != w.WRs || q.PostCalls != w.PostCalls || q.Polls != w.CQPolls || q.EmptyPolls != w.CQEmpty {
							t.Errorf("QP %#x: traced %d WRs in %d calls, %d polls (%d empty); the simulator counted %d in %d, %d (%d)",
								w.QPNum, q.WRs, q.PostCalls, q.Polls, q.EmptyPolls, w.WRs, w.PostCalls, w.CQPolls, w.CQEmpty)
						}
					}
				}
				if !found {
					t.Errorf("QP %#x not traced", w.QPNum)
				}
			}
		})
	}
}

// A target that exits just as the verbs check runs, the check swept
// across its exit: the trace is always kept, whole, and ends with the
// target's exit, never with a verdict that it has no verbs library,
// whether its 1,000 QPs were seen or nothing of verbs was. (Its exit
// takes a while: it unmaps the memory it touched, and /proc/PID/maps is
// empty from the start of that. Checks that fall there are counted.)
// Where the exit falls after Run's start depends on the machine (how long
// the target takes to start and touch its memory under its probes, how
// long its exit takes), so nothing is placed by a fixed window: a first
// run measures how long the target needs to be ready, the exit is set
// past that, and every check is placed from the exits measured so
// far (each run's exit record, on the clock of Run's start).
func TestExitAtTheVerbsCheck(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	for _, tc := range []struct {
		name string
		qps  int
	}{{"1000 QPs", 1000}, {"no QP", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			x := exitCheck{t: t, qps: tc.qps, mib: 128, found: map[string]int{}}
			// never checked: it ends by the exit, and says how long the
			// target took to be ready to exit
			first := x.run(400, time.Minute)
			x.exitMS = int(first.ready*3/2/time.Millisecond) + 200
			if tc.qps > 0 {
				// the checks find the QPs' verbs whenever they fall: swept
				// across the exit for the trace to stay whole around it
				exit := x.run(x.exitMS, time.Minute).exitAt
				for off := -40 * time.Millisecond; off <= 10*time.Millisecond; off += 5 * time.Millisecond {
					x.run(x.exitMS, exit+off)
				}
				t.Logf("exit at %v after Run's start; what the checks found: %v", exit, x.found)
				return
			}
			if !x.search() {
				t.Errorf("no check fell on the target's exit: %s", x.tried)
			}
			t.Logf("what the checks found: %v (%s)", x.found, x.tried)
		})
	}
}

// exitCheck runs the exit-at target of testdata/lifecycle.c with the
// verbs check at chosen moments and holds each trace to being whole.
type exitCheck struct {
	t      *testing.T
	qps    int
	mib    int // the target touches this much, so its exit takes a while
	exitMS int
	found  map[string]int // what the checks found
	tried  string         // the moments tried and what each found
}

// run traces one target that exits exitMS after its start, with the
// check at timeout.
func (x *exitCheck) run(exitMS int, timeout time.Duration) lifeRun {
	t := x.t
	t.Helper()
	r := traceLifecycle(t, ModeEvents, timeout, "exit-at", fmt.Sprint(exitMS), fmt.Sprint(x.qps), fmt.Sprint(x.mib))
	s := r.snap
	check := r.check
	if strings.HasPrefix(check, "unknown") {
		check = "exiting"
	} else if check == "" {
		check = "ended before the check"
	}
	x.found[check]++
	x.tried += fmt.Sprintf(" check %v, exit %v, end %v: %s;", timeout.Round(100*time.Microsecond),
		r.exitAt.Round(100*time.Microsecond), r.ran.Round(100*time.Microsecond), check)
	desc := fmt.Sprintf("check at %v found %q: %d events, %d QPs, ended %q", timeout, r.check, s.Events, len(s.QPs), s.Ended)
	var wrs uint64
	for _, q := range s.QPs {
		wrs += q.WRs
	}
	if r.err != nil || !s.Exited || s.ExitCode != 0 || !strings.Contains(s.Ended, "the target exited with status 0") ||
		len(s.QPs) != x.qps || wrs != uint64(x.qps) || s.Lost != 0 || r.exitAt == 0 {
		t.Fatalf("%s: Run said %v, %d WRs, %d lost, exit record at %v", desc, r.err, wrs, s.Lost, r.exitAt)
	}
	back, last := r.readBack(t)
	if end, ok := last.(*trace.End); !ok || end.Reason != s.Ended || len(back.QPs) != x.qps {
		t.Fatalf("%s: the recording ends with %#v and holds %d QPs", desc, last, len(back.QPs))
	}
	return r
}

// search places checks until one falls on the target's exit: between its
// exit record and the end of the trace, where the target has unmapped its
// memory, or is gone and not yet reaped. Each check is placed a third
// into that span as the runs so far measured it, from the median of their
// exits, so what varies from run to run (the target's start under its
// probes) moves the next check with it. It reports whether one fell there.
func (x *exitCheck) search() bool {
	var exits, spans []time.Duration
	r := x.run(x.exitMS, time.Minute)
	exits, spans = append(exits, r.exitAt), append(spans, r.ran-r.exitAt)
	for try := 0; try < 24; try++ {
		at := median(exits) + median(spans)/3
		r := x.run(x.exitMS, at)
		if x.found["exiting"]+x.found["target ended"] > 0 {
			return true
		}
		exits = append(exits, r.exitAt)
		if r.check == "" { // the check did not run: the span is as measured
			spans = append(spans, r.ran-r.exitAt)
		}
	}
	return false
}

// median of ds, which it sorts.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// A trace that ends on an error of sqscope's (here a sink that panics)
// still ends the same way: Run returns the error after the analyzer and
// the recording got what was read and the end, which says why.
func TestErrorEndingKeepsTheTrace(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	var out, warnings bytes.Buffer
	r := lifeRun{file: filepath.Join(t.TempDir(), "run.sqscope")}
	s, err := Start(Config{Argv: []string{lifecycleProg.path(t), "churn", "1000"}, ChildOut: &out, Warnings: &warnings,
		RecordTo: r.file, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := s.Recorder()
	const at = 2000
	n := 0
	s.AddSink(func(trace.Event) {
		if n++; n == at {
			panic("a sink's own bug")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), bpftest.Timeout(t, time.Minute))
	defer cancel()
	r.err = s.Run(ctx)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	r.events = rec.Events()
	snap := analyzertest.Snapshot(t, s.Analyzer())
	if r.err == nil || !strings.Contains(r.err.Error(), "internal error while reading events: a sink's own bug") {
		t.Fatalf("Run returned %v", r.err)
	}
	if !snap.EndedOnError || !strings.Contains(snap.Ended, "a sink's own bug") || snap.Events < at-1 {
		t.Fatalf("snapshot of %d events ended %q (on error %v)", snap.Events, snap.Ended, snap.EndedOnError)
	}
	back, last := r.readBack(t)
	if end, ok := last.(*trace.End); !ok || !end.Err || end.Reason != snap.Ended || r.events < at || back.Events != snap.Events {
		t.Fatalf("the recording of %d events (%d read back, %d live) ends with %#v", r.events, back.Events, snap.Events, last)
	}
	if !strings.Contains(warnings.String(), "internal error") {
		t.Errorf("no stack for the panic in the warnings: %q", warnings.String())
	}
}
