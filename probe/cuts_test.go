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

// TestCutListsCounters traces the same lists in the counters mode, and
// lists past the bounds the provider refuses in part: the kernel's totals
// count the same cuts as the events mode's records, and the other totals
// are what the events mode rebuilds.
func TestCutListsCounters(t *testing.T) {
	requireBPF(t)
	type qpCuts struct {
		wrs       uint64 // accepted, as far as the walk saw
		capped    uint64
		cutWRs    uint64
		notSummed uint64
	}
	tests := []struct {
		mode string
		want map[uint32]qpCuts
	}{
		// lists of 1500 (seen up to the walk bound), 1024 and 3 WRs of 20
		// SGEs; a wr batch of a 20-SGE and an 18-buffer inline list
		{"cut", map[uint32]qpCuts{0x100: {1024 + 1024 + 3, 1, 3, 3 * 4}, 0x101: {2, 0, 2, 4 + 2}}},
		// 6 of 8 WRs of 20 SGEs taken; 999 of 1500; 1050 of 1500, refused
		// past the walk bound (so none seen taken); wr batches refused,
		// aborted and taken (one WR of 20 SGEs)
		{"cut-fail", map[uint32]qpCuts{0x100: {6, 0, 6, 6 * 4}, 0x101: {999, 1, 0, 0}, 0x102: {0, 1, 0, 0},
			0x103: {1, 0, 1, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			_, evs, _ := traceRun(t, Options{}, tc.mode)
			want, truncated := qpTotals(evs)
			out, cevs, tr := traceRun(t, Options{Mode: ModeCounters}, tc.mode)
			stats := parseStats(t, out)
			got := tallyEvents(cevs)
			if got.Lost != 0 || tr.Lost() != 0 {
				t.Fatalf("lost %d events", got.Lost)
			}
			if got.PostCalls+got.WRBatches != 0 {
				t.Errorf("counters mode emitted per-call events: %d posts, %d batches", got.PostCalls, got.WRBatches)
			}
			checkQPTotals(t, got, want, truncated)

			byNum := countersByNum(got)
			var capped, cutWRs uint64
			for _, c := range byNum {
				capped += c.WalkCappedPosts
				cutWRs += c.SGECutWRs
			}
			if capped != stats.WalkCappedLists || cutWRs != stats.SGEOverWRs {
				t.Errorf("counted %d capped walks and %d WRs with SGEs not summed; target posted %d lists past the walk bound and %d WRs past the SGE bound",
					capped, cutWRs, stats.WalkCappedLists, stats.SGEOverWRs)
			}
			if len(byNum) != len(tc.want) {
				t.Errorf("counters of %d QPs, want %d", len(byNum), len(tc.want))
			}
			for qpn, wc := range tc.want {
				c, ok := byNum[qpn]
				if !ok {
					t.Errorf("no counters for QP %#x", qpn)
					continue
				}
				w := want[qpn]
				if c.WalkCappedPosts != w.WalkCappedPosts || c.SGECutWRs != w.SGECutWRs || c.SGEsNotSummed != w.SGEsNotSummed {
					t.Errorf("QP %#x: counters mode %d capped, %d WRs with %d SGEs not summed; events mode %d, %d, %d",
						qpn, c.WalkCappedPosts, c.SGECutWRs, c.SGEsNotSummed, w.WalkCappedPosts, w.SGECutWRs, w.SGEsNotSummed)
				}
				if g := (qpCuts{c.WRs, c.WalkCappedPosts, c.SGECutWRs, c.SGEsNotSummed}); g != wc {
					t.Errorf("QP %#x: WRs, capped, WRs cut, SGEs not summed %v, want %v", qpn, g, wc)
				}
			}
		})
	}
}
