package analyzer

import (
	"reflect"
	"testing"

	"github.com/sqscope/sqscope/trace"
)

func TestProcesses(t *testing.T) {
	h := func(ns uint64, pid uint32) trace.Header { return trace.Header{TimeNS: ns, PID: pid, TID: pid} }
	i32 := func(v int32) *int32 { return &v }
	qp := func(ns uint64, pid, num uint32) *trace.QPCreate {
		return &trace.QPCreate{Header: h(ns, pid), QP: 0x1000, QPNum: num, Type: trace.QPTypeRC,
			Caps: trace.Caps{MaxSendWR: 64, MaxSendSGE: 1}, Via: "ibv_create_qp"}
	}
	cases := []struct {
		name       string
		events     []trace.Event
		procs      []Process
		comms      map[uint32]string // QP number -> its comm
		exited     bool
		code       int32
		textHas    []string
		textHasNot []string
	}{{
		name: "children followed: a child's exit is not the target's",
		events: []trace.Event{
			&trace.Proc{Header: h(1, 100), How: trace.ProcTarget, Comm: "sh"},
			&trace.Proc{Header: h(2, 101), How: trace.ProcFork, Parent: 100, Comm: "sh"},
			&trace.Proc{Header: h(3, 101), How: trace.ProcExec, Comm: "sqscope"},
			&trace.Proc{Header: h(4, 102), How: trace.ProcFork, Parent: 100, Comm: "sh"},
			qp(5, 101, 7), qp(6, 102, 8),
			&trace.Exit{Header: h(7, 101), Code: 0},
			&trace.Exit{Header: h(8, 102), Code: -1, Signal: 9},
		},
		procs: []Process{
			{PID: 100, Comm: "sh", Joined: trace.ProcTarget},
			{PID: 101, Parent: 100, Comm: "sqscope", Joined: trace.ProcFork, Exited: true, ExitCode: i32(0)},
			{PID: 102, Parent: 100, Comm: "sh", Joined: trace.ProcFork, Exited: true, ExitCode: i32(-1), ExitSignal: 9},
		},
		comms:   map[uint32]string{7: "sqscope", 8: "sh"},
		textHas: []string{"3 process(es)", "pid 101 (sqscope): forked by 100, exited with code 0", "pid 102 (sh): forked by 100, killed by signal 9", "QP 0x7 (qpn 7, pid 101 sqscope, RC"},
	}, {
		name: "the target's exit ends it",
		events: []trace.Event{
			&trace.Proc{Header: h(1, 100), How: trace.ProcTarget, Comm: "app"},
			qp(2, 100, 7),
			&trace.Exit{Header: h(3, 100), Code: 3},
		},
		procs:      []Process{{PID: 100, Comm: "app", Joined: trace.ProcTarget, Exited: true, ExitCode: i32(3)}},
		comms:      map[uint32]string{7: "app"},
		exited:     true,
		code:       3,
		textHasNot: []string{"process(es)"},
	}, {
		name: "host-wide: no target, exits are the processes'",
		events: []trace.Event{
			&trace.Proc{Header: h(1, 200), How: trace.ProcRunning, Comm: "server"},
			&trace.Proc{Header: h(2, 300), How: trace.ProcFirst, Comm: "client"},
			qp(3, 300, 9),
			&trace.Exit{Header: h(4, 300), Code: 0},
			&trace.Proc{Header: h(5, 400), How: trace.ProcFound, Comm: "in-container"},
		},
		procs: []Process{
			{PID: 200, Comm: "server", Joined: trace.ProcRunning},
			{PID: 300, Comm: "client", Joined: trace.ProcFirst, Exited: true, ExitCode: i32(0)},
			{PID: 400, Comm: "in-container", Joined: trace.ProcFound},
		},
		comms: map[uint32]string{9: "client"},
		textHas: []string{"pid 200 (server): running when tracing began, running", "pid 300 (client): started while tracing, exited with code 0",
			"pid 400 (in-container): found mapping a verbs library while tracing, running"},
	}, {
		name: "a recording that names no process: its exit is the target's",
		events: []trace.Event{
			qp(1, 100, 7),
			&trace.Exit{Header: h(2, 100), Code: 1},
		},
		procs:  []Process{},
		comms:  map[uint32]string{7: ""},
		exited: true,
		code:   1,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(Options{})
			for _, ev := range c.events {
				a.Ingest(ev)
			}
			s := checked(t, a)
			if !reflect.DeepEqual(s.Processes, c.procs) {
				t.Errorf("processes:\n got %+v\nwant %+v", s.Processes, c.procs)
			}
			for _, q := range s.QPs {
				if want, ok := c.comms[q.QPNum]; !ok || q.Comm != want {
					t.Errorf("QP %#x comm %q, want %q", q.QPNum, q.Comm, want)
				}
			}
			if s.Exited != c.exited || s.ExitCode != c.code {
				t.Errorf("target exited %v code %d, want %v %d", s.Exited, s.ExitCode, c.exited, c.code)
			}
		})
	}
}
