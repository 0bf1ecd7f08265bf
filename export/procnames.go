package export

import (
	"strconv"

	"github.com/sqscope/sqscope/trace"
)

// procNames are the command names the recording gave its processes
// (trace.Proc), by pid: a followed child or a process of a host-wide
// trace is drawn under its name rather than the target's.
type procNames map[uint32]string

// note takes a process's name from its trace.Proc.
func (n procNames) note(e *trace.Proc) {
	if e.Comm != "" {
		n[e.PID] = e.Comm
	}
}

// name is how a process's track is named: the recording's target for the
// target's pid, else its command name, else its pid alone; with its pid
// (withPID) for formats that do not show it.
func (n procNames) name(fi *trace.FileInfo, pid uint32, withPID bool) string {
	p := "pid " + strconv.FormatUint(uint64(pid), 10)
	name := n[pid]
	if fi.Target != "" && (fi.TargetPID == 0 || fi.TargetPID == pid) {
		name = fi.Target
	}
	switch {
	case name == "":
		return p
	case withPID:
		return name + " (" + p + ")"
	}
	return name
}
