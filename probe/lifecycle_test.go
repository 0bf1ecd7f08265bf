package probe

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sqscope/sqscope/trace"
)

// CQs and SRQs get a generation each, a new one at a reused address; an
// SRQ's destroy names the generation it ends, and a failed destroy ends
// none (testdata/objects_target.c).
func TestObjectGenerations(t *testing.T) {
	requireBPF(t)
	bin := filepath.Join(t.TempDir(), "objects_target")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-o", bin, "testdata/objects_target.c").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/objects_target.c: %v\n%s", err, out)
	}
	for _, mode := range []Mode{ModeEvents, ModeCounters} {
		out, evs, _ := traceCmd(t, Options{Mode: mode}, exec.Command(bin))
		var did struct {
			CQ1, CQ2, SRQ1, SRQ2 uint64
			Rets                 []int32
		}
		if err := json.Unmarshal(out, &did); err != nil || did.CQ1 != did.CQ2 || did.SRQ1 != did.SRQ2 {
			t.Fatalf("target said %q (%v): want each address used twice", out, err)
		}
		var got []trace.Event
		for _, e := range evs {
			switch e := e.(type) {
			case *trace.CQCreate, *trace.SRQCreate, *trace.SRQDestroy:
				e.Hdr().TimeNS, e.Hdr().PID, e.Hdr().TID = 0, 0, 0
				got = append(got, e)
			}
		}
		// one creation sequence: CQ 1, CQ 2, SRQ 3, SRQ 4
		want := []trace.Event{
			&trace.CQCreate{CQ: did.CQ1, Gen: 1, CQE: 64},
			&trace.CQCreate{CQ: did.CQ2, Gen: 2, CQE: 128},
			&trace.SRQCreate{SRQ: did.SRQ1, Gen: 3, MaxWR: 128},
			&trace.SRQDestroy{SRQ: did.SRQ1, Gen: 3, Ret: did.Rets[0]},
			&trace.SRQCreate{SRQ: did.SRQ2, Gen: 4, MaxWR: 16},
			&trace.SRQDestroy{SRQ: did.SRQ2, Gen: 4, Ret: did.Rets[1]},
			&trace.SRQDestroy{SRQ: did.SRQ2, Gen: 4, Ret: did.Rets[2]},
		}
		if len(got) != len(want) {
			t.Fatalf("mode %d: %d lifecycle events, want %d: %+v", mode, len(got), len(want), got)
		}
		for i := range want {
			if g, w := got[i], want[i]; !sameEvent(g, w) {
				t.Errorf("mode %d, event %d: %+v, want %+v", mode, i, g, w)
			}
		}
	}
}

func sameEvent(a, b trace.Event) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return a.Kind() == b.Kind() && string(ja) == string(jb)
}

// Polls a thread keeps pending of a CQ stay that CQ's when another thread
// destroys it and creates the next CQ at its address before they are
// handed over: the new CQ gets only its own (testdata/cq_handover.c).
func TestPendingPollsStayWithTheirCQ(t *testing.T) {
	requireBPF(t)
	bin := filepath.Join(t.TempDir(), "cq_handover")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-pthread", "-o", bin, "testdata/cq_handover.c").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/cq_handover.c: %v\n%s", err, out)
	}
	const before, after = 5, 3 // both fewer than a thread keeps pending
	for _, mode := range []Mode{ModeEvents, ModeCounters} {
		out, evs, _ := traceCmd(t, Options{Mode: mode}, exec.Command(bin, strconv.Itoa(before), strconv.Itoa(after)))
		var did struct{ CQ1, CQ2 uint64 }
		if err := json.Unmarshal(out, &did); err != nil || did.CQ1 != did.CQ2 {
			t.Fatalf("target said %q (%v): want one address for both CQs", out, err)
		}
		var gens []uint64
		empty := map[uint64]uint64{}
		polls := map[uint64]uint64{}
		for _, e := range evs {
			switch e := e.(type) {
			case *trace.CQCreate:
				gens = append(gens, e.Gen)
			case *trace.EmptyPolls:
				empty[e.Gen] += e.Count
			case *trace.CQCounters: // totals: the last one counts
				empty[e.Gen], polls[e.Gen] = e.Empty, e.Polls
			}
		}
		if len(gens) != 2 || gens[0] == 0 || gens[1] <= gens[0] {
			t.Fatalf("mode %d: CQ generations %v, want two", mode, gens)
		}
		if empty[gens[0]] != before || empty[gens[1]] != after || empty[0] != 0 {
			t.Errorf("mode %d: empty polls by generation %v, want %d of %d and %d of %d", mode, empty, before, gens[0], after, gens[1])
		}
		if mode == ModeCounters && (polls[gens[0]] != before || polls[gens[1]] != after) {
			t.Errorf("mode %d: polls by generation %v, want %d and %d", mode, polls, before, after)
		}
	}
}
