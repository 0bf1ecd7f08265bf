package probe

import (
	"debug/elf"
	"slices"
	"strings"

	"github.com/sqscope/sqscope/trace"
)

// Direct verbs: an application on mlx5's direct verbs (mlx5dv: UCX's
// rc_mlx5 and dc_mlx5 transports, DPDK's mlx5 driver) builds its WQEs and
// rings the doorbell itself, never calling ibv_post_send, and often polls
// its CQs itself too: no probe can see those posts. The tracer looks, once
// per process with a QP, at the objects it maps for imports of mlx5dv's
// functions (directImports), and says what it finds as a record of a
// probe that could not be placed (Func trace.FuncDirectVerbs, How
// trace.HowImports, Err what it imports and what that hides), so that
// every report of the trace carries it.

// isDirectVerbsFunc says whether name is one of mlx5dv's functions
// (infiniband/mlx5dv.h) that hand an application a QP's queues to write
// WQEs into itself, or build its WQEs: an object that imports one drives
// QPs without ibv_post_send (UCX's rc_mlx5 and dc_mlx5, DPDK's mlx5).
func isDirectVerbsFunc(name string) bool {
	return name == "mlx5dv_init_obj" || name == "mlx5dv_create_qp" || name == "mlx5dv_qp_ex_from_ibv_qp_ex" ||
		strings.HasPrefix(name, "mlx5dv_wr_")
}

// directImport is an object a process maps and the direct-verbs
// functions it imports.
type directImport struct {
	path  string
	funcs []string
}

// mappedFile is a mapped file as /proc/PID/maps names it.
type mappedFile struct {
	dev string
	ino uint64
}

// directImports are the direct-verbs functions each file imports (none:
// nil), each file's dynamic symbols read once: the objects processes
// share (libc, libibverbs) are not read again for every process.
type directImports map[mappedFile][]string

// of lists the objects process pid maps that import direct-verbs
// functions; none when its mappings cannot be read (it ended).
func (c directImports) of(pid int) []directImport {
	maps, err := readMaps(pid)
	if err != nil {
		return nil
	}
	var out []directImport
	seen := map[mappedFile]bool{}
	for _, m := range maps {
		k := mappedFile{m.Dev, m.Inode}
		if !strings.HasPrefix(m.Path, "/") || seen[k] {
			continue
		}
		seen[k] = true
		fns, ok := c[k]
		if !ok {
			fns = importedDirectVerbs(ProcDir(pid) + "/root" + m.Path)
			c[k] = fns
		}
		if len(fns) > 0 {
			out = append(out, directImport{m.Path, fns})
		}
	}
	return out
}

// importedDirectVerbs are the direct-verbs functions the ELF file at
// path imports (none for a file that is not ELF).
func importedDirectVerbs(path string) []string {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	syms, _ := f.DynamicSymbols()
	var fns []string
	for _, sym := range syms {
		if sym.Section == elf.SHN_UNDEF && isDirectVerbsFunc(sym.Name) && !slices.Contains(fns, sym.Name) {
			fns = append(fns, sym.Name)
		}
	}
	return fns
}

// directWatch checks each process once.
type directWatch struct {
	t       *Tracer
	seen    map[uint32]bool
	imports directImports
}

func newDirectWatch(t *Tracer) *directWatch {
	return &directWatch{t: t, seen: map[uint32]bool{}, imports: directImports{}}
}

// note checks the process of a QP's create or scan, while it runs (once
// per process: its maps, and the dynamic symbols of the files it maps
// that no process checked before). It is called from Run's goroutine
// only.
func (d *directWatch) note(ev trace.Event) {
	var pid uint32
	switch e := ev.(type) {
	case *trace.QPCreate:
		pid = e.PID
	case *trace.Scan:
		if e.QPs == 0 {
			return
		}
		pid = e.PID
	default:
		return
	}
	if d.seen[pid] {
		return
	}
	d.seen[pid] = true
	for _, imp := range d.imports.of(int(pid)) {
		d.t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid}, Func: trace.FuncDirectVerbs,
			Path: imp.path, How: trace.HowImports,
			Err: "imports mlx5dv's " + strings.Join(imp.funcs, ", ") + ": the QPs it drives through them post without ibv_post_send (direct verbs), and no probe sees their posts"})
	}
}
