package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/sqscope/sqscope/bpf/bench"
)

// slowTraps makes the host's uprobe traps dearer by delay until ctx is
// done, as a concurrent tracer would (bpf/bench/slowtrap.bpf.c): every
// few milliseconds it looks at the host's uprobe links and places, at the
// file and offset of each one it has not yet, a probe of its own that
// spins for delay (on an entry or a return, as the other is); it removes
// its probe once the other is gone. Every trap at a probed place then
// costs delay more, whoever placed the probe there, so sqscope's tests
// and timings can be checked as on a host whose traps cost several times
// this one's. It ends saying how many probe runs it slowed.
func slowTraps(ctx context.Context, delay time.Duration, stdout, stderr io.Writer) error {
	if delay <= 0 || delay > 100*time.Microsecond {
		return fmt.Errorf("-slow-traps %v: want a delay above 0 and at most 100µs", delay)
	}
	spec, err := bench.LoadSlowTrap()
	if err != nil {
		return err
	}
	if err := spec.Variables[bench.SlowTrapVarDelayNs].Set(uint64(delay.Nanoseconds())); err != nil {
		return err
	}
	var objs bench.SlowTrapObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return fmt.Errorf("loading the trap slowdown: %w", err)
	}
	defer objs.Close()
	own := map[ebpf.ProgramID]bool{}
	for _, p := range []*ebpf.Program{objs.SlowEntry, objs.SlowRet} {
		info, err := p.Info()
		if err != nil {
			return err
		}
		id, _ := info.ID()
		own[id] = true
	}
	placed := map[uprobeAt]link.Link{}
	defer func() {
		for _, l := range placed {
			l.Close()
		}
	}()
	fmt.Fprintf(stdout, "every uprobe trap of this host now costs %v more; Ctrl-C ends it\n", delay)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	failed := map[uprobeAt]bool{}
	for {
		seen := otherUprobes(own)
		for at := range seen {
			if placed[at] != nil || failed[at] {
				continue
			}
			prog := objs.SlowEntry
			if at.ret {
				prog = objs.SlowRet
			}
			l, err := attachAt(at, prog)
			if err != nil {
				// the file may be gone already (a test's temporary binary)
				failed[at] = true
				fmt.Fprintf(stderr, "sqbench: not slowed: %s+%#x: %v\n", at.file, at.off, err)
				continue
			}
			placed[at] = l
		}
		for at, l := range placed {
			if !seen[at] {
				l.Close()
				delete(placed, at)
			}
		}
		for at := range failed {
			if !seen[at] {
				delete(failed, at)
			}
		}
		select {
		case <-ctx.Done():
			var runs, spun uint64
			if err := objs.Runs.Get(&runs); err != nil {
				return err
			}
			if err := objs.SpunNs.Get(&spun); err != nil {
				return err
			}
			per := time.Duration(0)
			if runs > 0 {
				per = time.Duration(spun / runs)
			}
			fmt.Fprintf(stdout, "slowed %d probe runs by %v each on average (%v in all)\n", runs, per, time.Duration(spun))
			return nil
		case <-tick.C:
		}
	}
}

// uprobeAt is where a uprobe is: a file, an offset in it, entry or return.
type uprobeAt struct {
	file string
	off  uint64
	ret  bool
}

// otherUprobes lists where the host's uprobe links are, but those of the
// programs in own.
func otherUprobes(own map[ebpf.ProgramID]bool) map[uprobeAt]bool {
	seen := map[uprobeAt]bool{}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		l := it.Take()
		info, err := l.Info()
		l.Close()
		if err != nil || own[info.Program] {
			continue
		}
		if m := info.UprobeMulti(); m != nil {
			offs, ok := m.Offsets()
			if !ok || m.File == "" {
				continue
			}
			for _, o := range offs {
				seen[uprobeAt{m.File, o.Offset, m.Flags&1 != 0}] = true // BPF_F_UPROBE_MULTI_RETURN
			}
		} else if pe := info.PerfEvent(); pe != nil {
			if u := pe.Uprobe(); u != nil && u.File != "" {
				seen[uprobeAt{u.File, uint64(u.Offset), pe.Type == link.PerfEventUretprobe}] = true
			}
		}
	}
	return seen
}

// attachAt places prog where at says, for every process.
func attachAt(at uprobeAt, prog *ebpf.Program) (link.Link, error) {
	ex, err := link.OpenExecutable(at.file)
	if err != nil {
		return nil, err
	}
	uo := &link.UprobeOptions{Address: at.off}
	if at.ret {
		return ex.Uretprobe("", prog, uo)
	}
	return ex.Uprobe("", prog, uo)
}
