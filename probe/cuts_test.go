package probe

import (
	"testing"

	"github.com/sqscope/sqscope/trace"
)

// TestCutLists traces lists and SGE lists past the BPF side's bounds (a
// list walk of SQ_MAX_WALK 1024 WRs, SQ_MAX_SGES 16 SGEs summed per WR):
// the events say what was cut, and nothing more.
func TestCutLists(t *testing.T) {
	requireBPF(t)
	out, evs, tr := traceRun(t, Options{}, "cut")
	want := parseStats(t, out)
	got := tallyEvents(evs)
	if got.Lost != 0 || tr.Lost() != 0 {
		t.Fatalf("lost %d events", got.Lost)
	}
	checkCounts(t, got, want, "qps", "post calls", "post errors", "truncated lists", "wr batches", "wr WRs", "wr inline")

	var posts, batches []*trace.Post
	var capped, sgeCut uint64
	for _, e := range evs {
		p, ok := e.(*trace.Post)
		if !ok {
			continue
		}
		if p.API == trace.APIWR {
			batches = append(batches, p)
		} else {
			posts = append(posts, p)
		}
		if p.WalkCapped {
			capped++
		}
		for _, w := range p.WRs {
			if w.SGEsNotSummed > 0 {
				sgeCut++
			}
		}
	}
	if capped != want.WalkCappedLists || sgeCut != want.SGEOverWRs {
		t.Errorf("traced %d capped walks and %d WRs with SGEs not summed; target posted %d lists past the walk bound and %d WRs past the SGE bound",
			capped, sgeCut, want.WalkCappedLists, want.SGEOverWRs)
	}
	if len(posts) != 3 || len(batches) != 1 {
		t.Fatalf("%d posts and %d wr batches traced, want 3 and 1", len(posts), len(batches))
	}

	tests := []struct {
		name      string
		p         *trace.Post
		capped    bool
		n         uint32 // WRs seen in the list
		sges      uint32
		notSummed uint8
		bytes     []uint32 // of each recorded WR, when checked
	}{
		// 1500 WRs: the walk stops at 1024, so the list seems 1024 long
		{"list of 1500", posts[0], true, 1024, 1, 0, nil},
		{"list of 1024, the bound itself", posts[1], false, 1024, 1, 0, nil},
		// lengths 8+i+j, only j < 16 summed
		{"WRs of 20 SGEs", posts[2], false, 3, 20, 4, []uint32{8*16 + 120, 9*16 + 120, 10*16 + 120}},
		// an SGE list of 100+j and an inline list of 10+j, the first 16 summed
		{"wr batch with long lists", batches[0], false, 2, 0, 0, []uint32{100*16 + 120, 10*16 + 120}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			if p.WalkCapped != tc.capped || p.NumWRs() != tc.n || p.Accepted != tc.n || p.Ret != 0 {
				t.Fatalf("walk capped %v, %d WRs, accepted %d, ret %d; want capped %v, %d WRs all accepted",
					p.WalkCapped, p.NumWRs(), p.Accepted, p.Ret, tc.capped, tc.n)
			}
			for i, w := range p.WRs {
				if tc.sges != 0 && w.NumSGE != tc.sges {
					t.Errorf("WR %d: %d SGEs, want %d", i, w.NumSGE, tc.sges)
				}
				if tc.sges != 0 && w.SGEsNotSummed != tc.notSummed {
					t.Errorf("WR %d: %d SGEs not summed, want %d", i, w.SGEsNotSummed, tc.notSummed)
				}
				if tc.bytes != nil && w.Bytes != tc.bytes[i] {
					t.Errorf("WR %d: %d bytes, want %d", i, w.Bytes, tc.bytes[i])
				}
			}
		})
	}
	t.Run("wr batch SGEs not summed", func(t *testing.T) {
		b := batches[0]
		if len(b.WRs) != 2 || b.WRs[0].NumSGE != 20 || b.WRs[0].SGEsNotSummed != 4 ||
			b.WRs[1].NumSGE != 18 || b.WRs[1].SGEsNotSummed != 2 || b.WRs[1].Flags&8 == 0 {
			t.Errorf("batch WRs %+v: want 20 SGEs (4 not summed), then an inline list of 18 (2 not summed)", b.WRs)
		}
	})
}
