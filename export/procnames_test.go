package export

import (
	"testing"

	"github.com/sqscope/sqscope/trace"
)

func TestProcNames(t *testing.T) {
	n := procNames{}
	n.note(&trace.Proc{Header: trace.Header{PID: 101}, How: trace.ProcFork, Comm: "sh"})
	n.note(&trace.Proc{Header: trace.Header{PID: 101}, How: trace.ProcExec, Comm: "ib_write_bw"})
	n.note(&trace.Proc{Header: trace.Header{PID: 102}, How: trace.ProcFork}) // no name: keeps none
	target := &trace.FileInfo{Target: "sh -c 'a & b & wait'", TargetPID: 100}
	hostWide := &trace.FileInfo{}
	for _, tc := range []struct {
		name    string
		fi      *trace.FileInfo
		pid     uint32
		withPID bool
		want    string
	}{
		{"the target by its command line", target, 100, false, "sh -c 'a & b & wait'"},
		{"a child by its latest name", target, 101, false, "ib_write_bw"},
		{"a child by its latest name, with its pid", target, 101, true, "ib_write_bw (pid 101)"},
		{"a process without a name", target, 102, true, "pid 102"},
		{"host-wide", hostWide, 101, false, "ib_write_bw"},
		{"an old recording names every pid by its target", &trace.FileInfo{Target: "app"}, 7, true, "app (pid 7)"},
	} {
		if got := n.name(tc.fi, tc.pid, tc.withPID); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
