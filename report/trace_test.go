package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

// Where a trace that ended was cut, what the cut left outstanding or
// could not know, and the completions that matched no post seen.
func TestEndingText(t *testing.T) {
	var out bytes.Buffer
	for _, c := range streamtest.Endings {
		out.WriteString("== " + c.Name + "\n")
		if err := WriteText(&out, snapshotOf(t, analyzer.Options{}, c.Build)); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "ending.txt.golden", out.Bytes())
}

// The processes of a trace that has more than its target are listed, each
// with how it joined and how it ended; a QP names its process.
func TestProcessesText(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name       string
		snap       analyzer.Snapshot
		textHas    []string
		textHasNot []string
	}{{
		name: "children followed",
		snap: analyzer.Snapshot{
			Processes: []analyzer.Process{
				{PID: 100, Comm: "sh", Joined: trace.ProcTarget},
				{PID: 101, Parent: 100, Comm: "sqscope", Joined: trace.ProcFork, Exited: true, ExitCode: i32(0)},
				{PID: 102, Parent: 100, Comm: "sh", Joined: trace.ProcFork, Exited: true, ExitCode: i32(-1), ExitSignal: 9},
			},
			QPs: []analyzer.QP{{PID: 101, Comm: "sqscope", QPNum: 7, Type: "RC"}},
		},
		textHas: []string{"3 process(es)", "pid 101 (sqscope): forked by 100, exited with code 0",
			"pid 102 (sh): forked by 100, killed by signal 9 (killed)", "QP 0x7 (qpn 7, pid 101 sqscope, RC"},
	}, {
		name: "the target alone is not listed",
		snap: analyzer.Snapshot{
			Processes: []analyzer.Process{{PID: 100, Comm: "app", Joined: trace.ProcTarget, Exited: true, ExitCode: i32(3)}},
			Exited:    true, ExitCode: 3,
		},
		textHas:    []string{"target exited with code 3"},
		textHasNot: []string{"process(es)"},
	}, {
		name: "host-wide",
		snap: analyzer.Snapshot{
			Processes: []analyzer.Process{
				{PID: 200, Comm: "server", Joined: trace.ProcRunning},
				{PID: 300, Comm: "client", Joined: trace.ProcFirst, Exited: true, ExitCode: i32(0)},
				{PID: 400, Comm: "in-container", Joined: trace.ProcFound},
				{PID: 500, Joined: trace.ProcFirst},
			},
		},
		textHas: []string{"pid 200 (server): running when tracing began, running", "pid 300 (client): started while tracing, exited with code 0",
			"pid 400 (in-container): found mapping a verbs library while tracing, running", "pid 500 (name unknown)"},
	}, {
		name:       "a recording that names no process",
		snap:       analyzer.Snapshot{Exited: true, ExitCode: 1},
		textHasNot: []string{"process(es)", "pid "},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			checkText(t, text(t, tc.snap), tc.textHas, tc.textHasNot)
		})
	}
}

// The text says how many probes were placed and lists only those that
// failed, unless verbose; each probe once however many windows placed
// it, and a window's marks never as a probe that failed.
func TestProbeLines(t *testing.T) {
	lib := "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so"
	var attach []trace.Attach
	attach = append(attach,
		trace.Attach{Func: "create_qp", Path: lib, Offset: 0x100, How: "symbol"},
		trace.Attach{Func: "post_send", Path: lib, Offset: 0x200, How: trace.HowErrorSite},
		trace.Attach{Func: "poll_cq", Path: lib, Offset: 0x300, How: "symbol", Err: "attaching uprobe: permission denied"},
		trace.Attach{Header: trace.Header{PID: 7}, Func: trace.FuncMemoryRead, Path: lib, Err: "the provider states no layout of its send queue"})
	for range 3 { // three sample windows
		for _, e := range []string{trace.WindowOpening, "", trace.WindowClosing, trace.SampleEnded} {
			attach = append(attach, trace.Attach{Func: "post_send", Path: lib, Offset: 0x400, How: trace.HowSample, Err: e})
		}
	}
	s := analyzer.Snapshot{Attach: attach}
	memNote := "memory reads: the QPs of pid 7 on " + lib + " are not read: the provider states no layout of its send queue; their occupancy is seen only in windows"
	for _, c := range []struct {
		verbose     bool
		lines       int
		has, hasNot []string
	}{
		{false, 2, []string{"probes: 3 placed (-v lists where", "poll_cq            NOT ATTACHED", memNote}, []string{"(symbol)", "window begins", "window ends", "window ended"}},
		{true, 4, []string{"create_qp          " + lib + "+0x100 (symbol)", "+0x400 (sample window)", "poll_cq            NOT ATTACHED", memNote}, []string{"probes: ", "window begins", "window ends", "window ended"}},
	} {
		var out bytes.Buffer
		if err := (Text{Verbose: c.verbose}).Write(&out, s); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		got := strings.Count(text, "\n  probe")
		for _, h := range c.has {
			if !strings.Contains(text, h) {
				t.Errorf("verbose %v: the text lacks %q:\n%s", c.verbose, h, text)
			}
		}
		for _, h := range c.hasNot {
			if strings.Contains(text, h) {
				t.Errorf("verbose %v: the text has %q:\n%s", c.verbose, h, text)
			}
		}
		if got != c.lines {
			t.Errorf("verbose %v: %d probe lines, want %d:\n%s", c.verbose, got, c.lines, text)
		}
	}
}
