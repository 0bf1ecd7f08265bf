package probe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf/link"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// Processes joining the trace (bpf/follow.bpf.h): the processes a target
// forks, followed (Options.Follow), and every process of a host-wide trace
// (Options.All). The kernel adds a forked process to the programs' filter
// itself, at its fork, before it runs; what user space adds is the probes
// on the files its new program brings (hookProcess), placed while the
// process waits stopped at its exec.

var procRecSize = int(unsafe.Sizeof(bpf.VerbsSqProcRec{}))

// attachProcTracepoints places the fork (follow mode) and exec tracepoints.
func (t *Tracer) attachProcTracepoints() error {
	tps := []struct {
		name string
		on   bool
	}{{"sched_process_fork", t.following()}, {"sched_process_exec", t.opts.PID != 0}}
	for _, tp := range tps {
		if !tp.on {
			continue
		}
		prog := t.objs.ProcExec
		if tp.name == "sched_process_fork" {
			prog = t.objs.ProcFork
		}
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp.name, Program: prog})
		if err != nil {
			return fmt.Errorf("attaching to %s: %w", tp.name, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

// following reports whether the target's children are traced too.
func (t *Tracer) following() bool { return t.opts.Follow && t.opts.PID != 0 }

// procRecord handles a process joining: its probes, then its event.
func (t *Tracer) procRecord(raw []byte, fn func(trace.Event)) error {
	if err := checkSize("process", len(raw), procRecSize); err != nil {
		return err
	}
	var r bpf.VerbsSqProcRec
	decodeInto(&r, raw)
	pid := r.Hdr.Pid
	ev := &trace.Proc{Header: header(&r.Hdr), Parent: r.Parent, Comm: commString(r.Comm[:])}
	switch bpf.VerbsSqProcOp(r.Op) {
	case bpf.VerbsSqProcOpSQ_PROC_FORK:
		ev.How = trace.ProcFork
		t.members[pid] = true
	case bpf.VerbsSqProcOpSQ_PROC_EXEC:
		ev.How = trace.ProcExec
		if t.following() || (int(pid) == t.opts.PID && t.opts.Child == nil) {
			t.hookProcess(int(pid))
		}
	case bpf.VerbsSqProcOpSQ_PROC_FIRST:
		ev.How = trace.ProcFirst
		// the libibverbs it maps may not be the one hooked (a
		// container's own copy): hooked now, for its next calls
		t.hostSeen[int(pid)] = true
		t.hookProcess(int(pid))
	default:
		return fmt.Errorf("process record of unknown op %d", r.Op)
	}
	if r.Stopped != 0 {
		t.markStopped(int(pid), int(r.Hdr.Tid), r.Hdr.Ts)
	}
	fn(ev)
	return nil
}

// commString is a kernel comm: up to 16 bytes, NUL-terminated.
func commString(c []int8) string {
	b := make([]byte, 0, len(c))
	for _, v := range c {
		if v == 0 {
			break
		}
		b = append(b, byte(v))
	}
	return string(b)
}

// hookProcess places the discovery probes on what process pid's program
// brings: the simulated HCA in its executable, and the libibverbs it maps
// or, right after its exec, will load. Each file is hooked once; the
// probes fire for every process and the programs keep to the traced ones.
func (t *Tracer) hookProcess(pid int) {
	exe := ProcDir(pid) + "/exe"
	if path, err := os.Readlink(exe); err == nil {
		if id, err := fileIDOf(exe); err == nil && !t.exeHooked[id] {
			t.exeHooked[id] = true
			if _, err := ResolveSymbol(exe, "sqsim_create_qp"); err == nil {
				t.attachDiscovery(path, exe, true)
			}
		}
	}
	lib, open := libibverbsOf(pid)
	if lib == "" {
		return
	}
	if id, err := fileIDOf(open); err == nil && !t.ibvHooked[id] {
		t.ibvHooked[id] = true
		t.attachDiscovery(lib, open, false)
	}
}

// libibverbsOf is the libibverbs process pid maps, or the one its loader
// will find (its LD_LIBRARY_PATH, its executable's RUNPATH, the standard
// directories), and a path this process can open it by.
func libibverbsOf(pid int) (path, open string) {
	if path, open := libibverbsMapped(pid); path != "" {
		return path, open
	}
	root := ProcDir(pid) + "/root"
	var dirs []string
	if b, err := os.ReadFile(ProcDir(pid) + "/environ"); err == nil {
		for _, e := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(e, "LD_LIBRARY_PATH="); ok {
				dirs = append(dirs, filepath.SplitList(v)...)
			}
		}
	}
	if exe, err := os.Readlink(ProcDir(pid) + "/exe"); err == nil {
		dirs = append(dirs, runpath(exe)...)
	}
	for _, dir := range append(dirs, libDirs...) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "libibverbs.so.1")
		if _, err := os.Stat(root + p); err == nil {
			return p, root + p
		}
	}
	return "", ""
}
