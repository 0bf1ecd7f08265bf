package verbs

import (
	"testing"

	"github.com/sqscope/sqscope/ibv"
)

// allOps are the send_ops_flags of every opcode the simulator builds.
const allOps = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<9 | 1<<12

// Every opcode, through ibv_post_send and through its ibv_wr_* builder:
// the WQE the mlx5 rules build, and the completion it writes.
func TestEveryOpcode(t *testing.T) {
	type dma struct{ reads, readB, writes, writeB uint64 } // payload reads, response writes
	tests := []struct {
		name   string
		wr     SendWR
		wqebbs uint64 // through ibv_post_send
		wrBBs  uint64 // through the wr API (no data set after whole-WQE builders)
		wc     int
		dma    dma // through ibv_post_send
		wrDMA  dma // through the wr API
	}{
		{"send", SendWR{Opcode: ibv.WRSend, NumSGE: 1, Len: 64}, 1, 1, ibv.WCSend, dma{1, 64, 0, 0}, dma{1, 64, 0, 0}},
		{"send with imm", SendWR{Opcode: ibv.WRSendWithImm, NumSGE: 1, Len: 64}, 1, 1, ibv.WCSend, dma{1, 64, 0, 0}, dma{1, 64, 0, 0}},
		{"send with inv", SendWR{Opcode: ibv.WRSendWithInv, NumSGE: 1, Len: 64}, 1, 1, ibv.WCSend, dma{1, 64, 0, 0}, dma{1, 64, 0, 0}},
		{"write", SendWR{Opcode: ibv.WRRDMAWrite, NumSGE: 1, Len: 64}, 1, 1, ibv.WCRDMAWrite, dma{1, 64, 0, 0}, dma{1, 64, 0, 0}},
		{"write with imm", SendWR{Opcode: ibv.WRRDMAWriteWithImm, NumSGE: 1, Len: 64}, 1, 1, ibv.WCRDMAWrite, dma{1, 64, 0, 0}, dma{1, 64, 0, 0}},
		// the response lands in the local buffer: written, not read
		{"read", SendWR{Opcode: ibv.WRRDMARead, NumSGE: 1, Len: 64}, 1, 1, ibv.WCRDMARead, dma{0, 0, 1, 64}, dma{0, 0, 1, 64}},
		{"read of 2 SGEs", SendWR{Opcode: ibv.WRRDMARead, NumSGE: 2, Len: 100}, 1, 1, ibv.WCRDMARead, dma{0, 0, 2, 200}, dma{0, 0, 2, 200}},
		// an atomic's local data is 8 bytes whatever Len asks
		{"compare and swap", SendWR{Opcode: ibv.WRAtomicCmpAndSwp, NumSGE: 1, Len: 64}, 1, 1, ibv.WCCompSwap, dma{0, 0, 1, 8}, dma{0, 0, 1, 8}},
		{"fetch and add", SendWR{Opcode: ibv.WRAtomicFetchAndAdd, NumSGE: 1, Len: 8}, 1, 1, ibv.WCFetchAdd, dma{0, 0, 1, 8}, dma{0, 0, 1, 8}},
		// ctrl 16 + raddr 16 + atomic 16, and a data segment when an SGE
		// carries the 8 bytes (post_send): 64 B either way
		{"atomic write", SendWR{Opcode: ibv.WRAtomicWrite, NumSGE: 1, Len: 8}, 1, 1, ibv.WCAtomicWrite, dma{1, 8, 0, 0}, dma{}},
		// the UMR WQE: ctrl 16 + UMR ctrl 48 + mkey 64 (+ KLM 64 for a bind)
		{"local invalidate", SendWR{Opcode: ibv.WRLocalInv}, 2, 2, ibv.WCLocalInv, dma{}, dma{}},
		{"bind memory window", SendWR{Opcode: ibv.WRBindMW}, 3, 3, ibv.WCBindMW, dma{}, dma{}},
	}
	for _, tc := range tests {
		for _, api := range []string{"post_send", "wr"} {
			t.Run(tc.name+"/"+api, func(t *testing.T) {
				s := newSim(t, detModel())
				ep := newEP(t, s, QPConfig{MaxSendWR: 16, MaxSendSGE: 2, WRAPI: true, SendOps: allOps})
				wr := tc.wr
				wr.ID, wr.Flags = 7, SendSignaledFlag
				want, wantDMA := tc.wqebbs, tc.dma
				var err error
				if api == "wr" {
					want, wantDMA = tc.wrBBs, tc.wrDMA
					err = PostWR(ep, []SendWR{wr}, false)
				} else {
					_, err = PostSend(ep, []SendWR{wr})
				}
				if err != nil {
					t.Fatal(err)
				}
				wcs, err := PollCQ(ep, 4)
				if err != nil || len(wcs) != 1 {
					t.Fatalf("poll: %v %v", wcs, err)
				}
				if wcs[0].ID != 7 || wcs[0].Opcode != tc.wc || wcs[0].Status != 0 {
					t.Errorf("completion %+v, want wr_id 7 opcode %d", wcs[0], tc.wc)
				}
				c := counters(t, s, ep)
				if c.WRs != 1 || c.WQEBBs != want || c.CQEsPolled != 1 || c.Outstanding != 0 || c.EINVAL != 0 {
					t.Errorf("counters %+v, want 1 WR of %d WQEBBs, polled and retired", c, want)
				}
				if got := (dma{c.DMAReadsPayload, c.DMABytesPayload, c.DMAWritesResponse, c.DMABytesResponse}); got != wantDMA {
					t.Errorf("payload reads, bytes; response writes, bytes = %v, want %v", got, wantDMA)
				}
			})
		}
	}
}

// mlx5 sizes a QP's WQEs for the largest opcode it may post.
func TestOverheadFollowsSendOps(t *testing.T) {
	tests := []struct {
		name       string
		ops        uint64
		wantInline uint32
	}{
		{"send only: control segment", 1 << 2, 64 + 64 - 16 - 4},   // wqe 128 (inline 64 asked)
		{"write: remote address", 1<<2 | 1<<0, 128 - 32 - 4},       // wqe 128
		{"atomics: atomic segment", 1<<2 | 1<<5, 128 - 48 - 4},     // wqe 128
		{"bind: the UMR WQE", 1<<2 | 1<<8, 320 - 192 - 4},          // wqe align(192+68, 64)
		{"atomic write, as an atomic", 1<<2 | 1<<12, 128 - 48 - 4}, // wqe 128
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, detModel())
			ep := newEP(t, s, QPConfig{MaxSendWR: 16, MaxInline: 64, WRAPI: true, SendOps: tc.ops})
			if ep.Caps.MaxInlineData != tc.wantInline {
				t.Errorf("max_inline_data %d, want %d", ep.Caps.MaxInlineData, tc.wantInline)
			}
		})
	}
}

// An extended poll session is one poll: ibv_start_poll, then ibv_next_poll
// until ENOENT; a start that finds nothing is an empty poll.
func TestExtendedPoll(t *testing.T) {
	s := newSim(t, detModel())
	ep := newEP(t, s, QPConfig{MaxSendWR: 16, CQEx: true})
	var wrs []SendWR
	for i := range 5 {
		wrs = append(wrs, SendWR{ID: uint64(i), Opcode: ibv.WRSend, Flags: SendSignaledFlag, NumSGE: 1, Len: 8})
	}
	if _, err := PostSend(ep, wrs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{3, 2, 0} {
		wcs, err := PollCQEx(ep, 3)
		if err != nil || len(wcs) != want {
			t.Fatalf("session: %d completions (%v), want %d", len(wcs), err, want)
		}
		for _, wc := range wcs {
			if wc.QPNum != ep.QPNum || wc.Opcode != ibv.WCSend {
				t.Errorf("completion %+v read back wrong", wc)
			}
		}
	}
	cq, _ := s.CQCounters(ep)
	if cq.Polls != 3 || cq.EmptyPolls != 1 || cq.CQEs != 5 {
		t.Errorf("CQ counters %+v, want 3 polls, 1 empty, 5 CQEs", cq)
	}
	if c := counters(t, s, ep); c.CQEsPolled != 5 || c.Outstanding != 0 {
		t.Errorf("QP counters %+v", c)
	}
	if _, err := PollCQEx(newEP(t, s, QPConfig{MaxSendWR: 16}), 1); err == nil {
		t.Error("PollCQEx on a CQ not created extended: want an error")
	}
}

// Moderation and resizing are ground truth too; a resize keeps what is
// queued and refuses a depth below it.
func TestModifyAndResizeCQ(t *testing.T) {
	s := newSim(t, detModel())
	ep := newEP(t, s, QPConfig{MaxSendWR: 16})
	if err := s.ModerateCQ(ep, 8, 16); err != nil {
		t.Fatal(err)
	}
	var wrs []SendWR
	for i := range 10 {
		wrs = append(wrs, SendWR{ID: uint64(i), Opcode: ibv.WRSend, Flags: SendSignaledFlag, NumSGE: 1, Len: 8})
	}
	if _, err := PostSend(ep, wrs); err != nil {
		t.Fatal(err)
	}
	if _, err := PollCQ(ep, 1); err != nil { // the NIC writes its CQEs
		t.Fatal(err)
	}
	if err := s.ResizeCQ(ep, 4); err == nil {
		t.Error("resize below the 9 queued completions: want EINVAL")
	}
	if err := s.ResizeCQ(ep, 100); err != nil {
		t.Fatal(err)
	}
	wcs, err := PollCQ(ep, 16)
	if err != nil || len(wcs) != 9 || wcs[0].ID != 1 || wcs[8].ID != 9 {
		t.Fatalf("after the resize: %v %v, want wr_ids 1..9", wcs, err)
	}
	cq, _ := s.CQCounters(ep)
	if cq.Depth != 127 || cq.Resizes != 1 || cq.Modifies != 1 || cq.ModCount != 8 || cq.ModPeriod != 16 {
		t.Errorf("CQ counters %+v, want depth 127, 1 resize, moderation 8/16", cq)
	}
}
