package probe

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
)

// TestUprobes loads a uprobe program and a tracepoint program with
// Uprobes, checks the attach types Load chose, then attaches the uprobe
// program to the test target as an entry and a return probe and checks
// the kind of link.
func TestUprobes(t *testing.T) {
	requireBPF(t)
	haveMulti := features.HaveBPFLinkUprobeMulti() == nil
	bin := buildTarget(t)
	sym, err := ResolveSymbol(bin, "fake_post_send")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := link.OpenExecutable(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		perfEvent bool
		wantMulti bool
	}{
		{"kernel's choice", false, haveMulti},
		{"perf-event uprobes forced", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ret0 := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
			spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{
				"up": {Name: "up", Type: ebpf.Kprobe, License: "GPL", Instructions: ret0},
				"tp": {Name: "tp", Type: ebpf.RawTracepoint, License: "GPL", Instructions: ret0},
			}}
			u := Uprobes{perfEvent: c.perfEvent}
			var coll *ebpf.Collection
			loads := 0
			err := u.Load(spec, func() (err error) {
				loads++
				coll, err = ebpf.NewCollection(spec)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer coll.Close()
			if u.multi != c.wantMulti || loads != 1 {
				t.Errorf("loaded for uprobe_multi: %v after %d loads, want %v after 1", u.multi, loads, c.wantMulti)
			}
			wantType := ebpf.AttachNone
			wantLink := link.PerfEventType
			if c.wantMulti {
				wantType, wantLink = ebpf.AttachTraceUprobeMulti, link.UprobeMultiType
			}
			if got := spec.Programs["up"].AttachType; got != wantType {
				t.Errorf("uprobe program attach type %v, want %v", got, wantType)
			}
			if got := spec.Programs["tp"].AttachType; got != ebpf.AttachNone {
				t.Errorf("tracepoint program attach type %v, want it untouched", got)
			}
			for _, ret := range []bool{false, true} {
				l, err := u.Attach(ex, coll.Programs["up"], sym.Offset, 7, os.Getpid(), ret)
				if err != nil {
					t.Fatalf("attach (return probe %v): %v", ret, err)
				}
				info, err := l.Info()
				l.Close()
				if err != nil {
					t.Fatal(err)
				}
				if info.Type != wantLink {
					t.Errorf("return probe %v: link type %v, want %v", ret, info.Type, wantLink)
				}
			}
		})
	}
}

// TestUprobesLoadFallback: programs a load refuses with the uprobe_multi
// attach type are loaded again for perf-event uprobes.
func TestUprobesLoadFallback(t *testing.T) {
	haveMulti := features.HaveBPFLinkUprobeMulti() == nil
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{
		"up": {Name: "up", Type: ebpf.Kprobe},
	}}
	var u Uprobes
	var types []ebpf.AttachType
	err := u.Load(spec, func() error {
		at := spec.Programs["up"].AttachType
		types = append(types, at)
		if at == ebpf.AttachTraceUprobeMulti {
			return errors.New("refused")
		}
		return nil
	})
	want := []ebpf.AttachType{ebpf.AttachNone}
	if haveMulti {
		want = []ebpf.AttachType{ebpf.AttachTraceUprobeMulti, ebpf.AttachNone}
	}
	if err != nil || u.multi || !slices.Equal(types, want) {
		t.Errorf("Load: error %v, multi %v, attach types tried %v; want no error, false, %v", err, u.multi, types, want)
	}
}
