package probe

import (
	"errors"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
)

// Uprobes loads uprobe programs and attaches them the one way this kernel
// allows. uprobe_multi links (Linux 6.6) detach without the ~0.1 s grace
// period per probe that perf-event uprobes serialise on, which adds up to
// seconds at exit, so they are used where the kernel has them; perf-event
// uprobes everywhere else. A program loaded for one kind of link cannot be
// attached with the other: Load decides, and Attach follows. The zero value
// is ready to use.
type Uprobes struct {
	multi bool // the programs were loaded for uprobe_multi links
	// perfEvent chooses perf-event uprobes even where uprobe_multi links
	// exist (tests of the fallback).
	perfEvent bool
}

// Load sets the attach type of spec's uprobe programs and calls load, which
// loads spec (into a collection or objects). The programs are set for
// uprobe_multi links when the kernel has them; when it does not, or load
// fails with them, they are set for perf-event uprobes and load is called
// again. It returns load's last error.
func (u *Uprobes) Load(spec *ebpf.CollectionSpec, load func() error) error {
	var uprobes []*ebpf.ProgramSpec
	for _, p := range spec.Programs {
		if p.Type == ebpf.Kprobe {
			uprobes = append(uprobes, p)
		}
	}
	setType := func(t ebpf.AttachType) {
		for _, p := range uprobes {
			p.AttachType = t
		}
	}
	// Kernels before 6.6 load a program with the uprobe_multi attach type
	// and only refuse the link, so ask the kernel for the link itself.
	err := error(errors.ErrUnsupported)
	if !u.perfEvent && features.HaveBPFLinkUprobeMulti() == nil {
		setType(ebpf.AttachTraceUprobeMulti)
		err = load()
	}
	u.multi = err == nil
	if err != nil {
		setType(ebpf.AttachNone)
		err = load()
	}
	return err
}

// Attach places prog, loaded by Load, at file offset off of ex: an entry
// probe, or a return probe when ret is set. cookie is what
// bpf_get_attach_cookie returns there; pid limits the probe to one process
// (0: every process).
func (u *Uprobes) Attach(ex *link.Executable, prog *ebpf.Program, off, cookie uint64, pid int, ret bool) (link.Link, error) {
	if u.multi {
		mo := &link.UprobeMultiOptions{Addresses: []uint64{off}, Cookies: []uint64{cookie}, PID: uint32(pid)}
		if ret {
			return ex.UretprobeMulti(nil, prog, mo)
		}
		return ex.UprobeMulti(nil, prog, mo)
	}
	uo := &link.UprobeOptions{Address: off, PID: pid, Cookie: cookie}
	if ret {
		return ex.Uretprobe("", prog, uo)
	}
	return ex.Uprobe("", prog, uo)
}
