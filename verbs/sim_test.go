package verbs

import (
	"errors"
	"syscall"
	"testing"
)

func newSim(t *testing.T, m NICModel) *Sim {
	t.Helper()
	s, err := OpenSim(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func detModel() NICModel {
	m := DefaultNICModel()
	m.Deterministic = true
	m.PreferBF = true
	m.ShutUpBF = false
	return m
}

func newEP(t *testing.T, s *Sim, cfg QPConfig) *Endpoint {
	t.Helper()
	if cfg.Type == 0 {
		cfg.Type = RC
	}
	if cfg.MaxSendSGE == 0 {
		cfg.MaxSendSGE = 1
	}
	if cfg.BufSize == 0 {
		cfg.BufSize = 8192
	}
	ep, err := s.NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func counters(t *testing.T, s *Sim, ep *Endpoint) Counters {
	t.Helper()
	c, ok := s.Counters(ep)
	if !ok {
		t.Fatal("no counters")
	}
	return c
}

func TestCaps(t *testing.T) {
	tests := []struct {
		name               string
		cfg                QPConfig
		wantWR, wantInline uint32
	}{
		{"legacy RC, design example", QPConfig{Type: RC, MaxSendWR: 128, MaxInline: 64, MaxSendSGE: 1}, 204, 124},
		{"legacy RC, no inline asked", QPConfig{Type: RC, MaxSendWR: 64, MaxSendSGE: 1}, 64, 60},
		{"RC WRITE/SEND only", QPConfig{Type: RC, MaxSendWR: 128, MaxInline: 64, MaxSendSGE: 1, WRAPI: true}, 128, 92},
		{"UD", QPConfig{Type: UD, MaxSendWR: 128, MaxInline: 64, MaxSendSGE: 1}, 170, 124},
		{"legacy RC, 4 SGEs", QPConfig{Type: RC, MaxSendWR: 256, MaxInline: 0, MaxSendSGE: 4}, 256, 60},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, detModel())
			ep := newEP(t, s, tc.cfg)
			if ep.Caps.MaxSendWR != tc.wantWR || ep.Caps.MaxInlineData != tc.wantInline {
				t.Fatalf("caps = max_send_wr %d max_inline %d, want %d %d",
					ep.Caps.MaxSendWR, ep.Caps.MaxInlineData, tc.wantWR, tc.wantInline)
			}
			c := counters(t, s, ep)
			if c.MaxSendWR != tc.wantWR || c.MaxInlineData != tc.wantInline {
				t.Fatalf("counters caps = %d %d", c.MaxSendWR, c.MaxInlineData)
			}
		})
	}
}

func TestCreateErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  QPConfig
	}{
		{"depth 0", QPConfig{Type: RC, MaxSendWR: 0}},
		{"too many SGEs", QPConfig{Type: RC, MaxSendWR: 16, MaxSendSGE: 31}},
		{"inline WQE over 1 KiB", QPConfig{Type: RC, MaxSendWR: 16, MaxInline: 1024}},
		{"depth over device limit", QPConfig{Type: RC, MaxSendWR: 40000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, detModel())
			if _, err := s.NewEndpoint(tc.cfg); err == nil {
				t.Fatal("want error")
			}
		})
	}
}

func sendWR(id uint64, flags uint32, n uint32) SendWR {
	return SendWR{ID: id, Opcode: OpSend, Flags: flags, NumSGE: 1, Len: n}
}

func TestOverflowAtMaxPost(t *testing.T) {
	s := newSim(t, detModel())
	ep := newEP(t, s, QPConfig{MaxSendWR: 128, MaxInline: 64})
	max := int(ep.Caps.MaxSendWR)
	accepted := 0
	for i := 0; i < max+10; i++ {
		n, err := PostSend(ep, []SendWR{sendWR(uint64(i), SendInlineFlag, 32)})
		if err != nil {
			if !errors.Is(err, syscall.ENOMEM) {
				t.Fatalf("post %d: %v", i, err)
			}
			if i != max {
				if accepted != max {
					t.Fatalf("first failure at %d, want %d", i, max)
				}
			}
			continue
		}
		accepted += n
	}
	if accepted != max {
		t.Fatalf("accepted %d, want max_send_wr %d", accepted, max)
	}
	c := counters(t, s, ep)
	if c.WRs != uint64(max) || c.ENOMEMSQFull != 10 || c.PeakOutstanding != uint64(max) || c.Outstanding != uint64(max) {
		t.Fatalf("counters %+v", c)
	}
	if c.CQEWrites != 0 || c.Signaled != 0 {
		t.Fatalf("unsignaled WRs wrote CQEs: %+v", c)
	}
}

func TestPartialListAndBadWR(t *testing.T) {
	s := newSim(t, detModel())
	ep := newEP(t, s, QPConfig{MaxSendWR: 16, MaxInline: 64})
	max := int(ep.Caps.MaxSendWR) // 16*256 -> 4096 / 256 = 16
	for i := 0; i < max-3; i++ {
		if _, err := PostSend(ep, []SendWR{sendWR(uint64(i), 0, 8)}); err != nil {
			t.Fatal(err)
		}
	}
	list := make([]SendWR, 5)
	for i := range list {
		list[i] = sendWR(uint64(100+i), 0, 8)
	}
	n, err := PostSend(ep, list)
	if !errors.Is(err, syscall.ENOMEM) || n != 3 {
		t.Fatalf("accepted %d err %v, want 3 ENOMEM", n, err)
	}
	c := counters(t, s, ep)
	if c.WRs != uint64(max) || c.Doorbells != uint64(max-3+1) || c.ENOMEMSQFull != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestReclaimBySignaledCQE(t *testing.T) {
	s := newSim(t, detModel())
	ep := newEP(t, s, QPConfig{MaxSendWR: 64, MaxInline: 64})
	for i := 0; i < 10; i++ {
		if _, err := PostSend(ep, []SendWR{sendWR(uint64(i), SendInlineFlag, 16)}); err != nil {
			t.Fatal(err)
		}
	}
	if c := counters(t, s, ep); c.Outstanding != 10 {
		t.Fatalf("outstanding %d", c.Outstanding)
	}
	if _, err := PostSend(ep, []SendWR{sendWR(10, SendInlineFlag|SendSignaledFlag, 16)}); err != nil {
		t.Fatal(err)
	}
	wc, err := PollCQ(ep, 16)
	if err != nil || len(wc) != 1 || wc[0].ID != 10 || wc[0].Status != 0 || wc[0].QPNum != ep.QPNum {
		t.Fatalf("poll = %+v %v", wc, err)
	}
	c := counters(t, s, ep)
	if c.Outstanding != 0 || c.CQEsPolled != 1 || c.CQEWrites != 1 || c.PeakOutstanding != 11 {
		t.Fatalf("counters %+v", c)
	}
}

func TestErrorCauses(t *testing.T) {
	tests := []struct {
		name    string
		cfg     QPConfig
		fill    int // WRs to post first (unsignaled); -1 fills the SQ
		wr      SendWR
		wantErr syscall.Errno
		field   func(Counters) uint64
	}{
		{"bad opcode", QPConfig{MaxSendWR: 16}, 0, SendWR{Opcode: 99, NumSGE: 1, Len: 8}, syscall.EINVAL,
			func(c Counters) uint64 { return c.EINVAL }},
		{"RDMA write on UD", QPConfig{Type: UD, MaxSendWR: 16}, 0, SendWR{Opcode: OpRDMAWrite, NumSGE: 1, Len: 8}, syscall.EINVAL,
			func(c Counters) uint64 { return c.EINVAL }},
		{"inline too big", QPConfig{MaxSendWR: 16, MaxInline: 64}, 0, SendWR{Opcode: OpSend, Flags: SendInlineFlag, NumSGE: 1, Len: 125}, syscall.ENOMEM,
			func(c Counters) uint64 { return c.ENOMEMInline }},
		{"inline at the limit fits", QPConfig{MaxSendWR: 16, MaxInline: 64}, 0, SendWR{Opcode: OpSend, Flags: SendInlineFlag, NumSGE: 1, Len: 124}, 0,
			func(c Counters) uint64 { return c.Inline }},
		{"too many SGEs", QPConfig{MaxSendWR: 16, MaxSendSGE: 2}, 0, SendWR{Opcode: OpSend, NumSGE: 3, Len: 8}, syscall.ENOMEM,
			func(c Counters) uint64 { return c.ENOMEMSGE }},
		{"SQ full checked before SGEs", QPConfig{MaxSendWR: 16, MaxSendSGE: 2}, -1, SendWR{Opcode: OpSend, NumSGE: 3, Len: 8}, syscall.ENOMEM,
			func(c Counters) uint64 { return c.ENOMEMSQFull }},
		{"SQ full checked before inline size", QPConfig{MaxSendWR: 16, MaxInline: 64}, -1, SendWR{Opcode: OpSend, Flags: SendInlineFlag, NumSGE: 1, Len: 500}, syscall.ENOMEM,
			func(c Counters) uint64 { return c.ENOMEMSQFull }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, detModel())
			ep := newEP(t, s, tc.cfg)
			if tc.fill < 0 {
				tc.fill = int(ep.Caps.MaxSendWR)
			}
			for i := 0; i < tc.fill; i++ {
				if _, err := PostSend(ep, []SendWR{sendWR(uint64(i), 0, 8)}); err != nil {
					t.Fatalf("fill %d: %v", i, err)
				}
			}
			_, err := PostSend(ep, []SendWR{tc.wr})
			if tc.wantErr == 0 {
				if err != nil {
					t.Fatal(err)
				}
			} else if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if got := tc.field(counters(t, s, ep)); got != 1 {
				t.Fatalf("counter = %d, want 1", got)
			}
		})
	}
}

func TestBlueFlame(t *testing.T) {
	type post struct {
		n     int
		flags uint32
		len   uint32
	}
	tests := []struct {
		name           string
		preferBF, shut bool
		maxInline      uint32
		posts          []post
		wantBF, wantDB uint64
		wantWQEFetch   uint64
	}{
		{"single inline", true, false, 64, []post{{1, SendInlineFlag, 64}}, 1, 1, 0},
		{"single non-inline prefer_bf", true, false, 64, []post{{1, 0, 64}}, 1, 1, 0},
		{"single non-inline no prefer_bf", false, false, 64, []post{{1, 0, 64}}, 0, 1, 1},
		{"single inline no prefer_bf", false, false, 64, []post{{1, SendInlineFlag, 64}}, 1, 1, 0},
		{"post list of 8 inline", true, false, 64, []post{{8, SendInlineFlag, 64}}, 0, 1, 1},
		{"shut_up_bf", true, true, 64, []post{{1, SendInlineFlag, 64}}, 0, 1, 1},
		{"WQE larger than the BF buffer", true, false, 400, []post{{1, SendInlineFlag, 300}}, 0, 1, 1},
		{"inline empty payload is one 16 B unit", true, false, 64, []post{{1, SendInlineFlag, 0}}, 0, 1, 1},
		{"mixed", true, false, 64, []post{{1, SendInlineFlag, 16}, {4, SendInlineFlag, 16}, {1, 0, 16}}, 2, 3, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := detModel()
			m.PreferBF = tc.preferBF
			m.ShutUpBF = tc.shut
			s := newSim(t, m)
			ep := newEP(t, s, QPConfig{MaxSendWR: 64, MaxInline: tc.maxInline})
			var id uint64
			for _, p := range tc.posts {
				list := make([]SendWR, p.n)
				for i := range list {
					list[i] = sendWR(id, p.flags, p.len)
					if p.len == 0 {
						list[i].NumSGE = 0
					}
					id++
				}
				if _, err := PostSend(ep, list); err != nil {
					t.Fatal(err)
				}
			}
			c := counters(t, s, ep)
			if c.BFWrites != tc.wantBF || c.Doorbells != tc.wantDB || c.DMAReadsWQE != tc.wantWQEFetch {
				t.Fatalf("bf %d doorbells %d wqe fetches %d, want %d %d %d",
					c.BFWrites, c.Doorbells, c.DMAReadsWQE, tc.wantBF, tc.wantDB, tc.wantWQEFetch)
			}
		})
	}
}

func TestWQEBBsAndDMA(t *testing.T) {
	s := newSim(t, detModel())
	ep := newEP(t, s, QPConfig{MaxSendWR: 64, MaxInline: 128, MaxSendSGE: 4})
	// inline 64 B SEND: 16 + align(68,16)=80 -> 96 B -> 2 WQEBBs
	// 3 SGEs of 8 B: 16 + 48 = 64 B -> 1 WQEBB, 3 payload reads
	if _, err := PostSend(ep, []SendWR{sendWR(0, SendInlineFlag, 64), {ID: 1, Opcode: OpSend, NumSGE: 3, Len: 8}}); err != nil {
		t.Fatal(err)
	}
	c := counters(t, s, ep)
	if c.WQEBBs != 3 || c.DMAReadsPayload != 3 || c.DMABytesPayload != 24 || c.InlineBytes != 64 || c.DMABytesWQE != 192 || c.MMIOBytes != 8 {
		t.Fatalf("counters %+v", c)
	}
}

func TestSigAll(t *testing.T) {
	s := newSim(t, detModel())
	ep := newEP(t, s, QPConfig{MaxSendWR: 64, MaxInline: 64, SigAll: true})
	for i := 0; i < 5; i++ {
		if _, err := PostSend(ep, []SendWR{sendWR(uint64(i), SendInlineFlag, 8)}); err != nil {
			t.Fatal(err)
		}
	}
	wc, err := PollCQ(ep, 16)
	if err != nil || len(wc) != 5 {
		t.Fatalf("poll %d %v", len(wc), err)
	}
	c := counters(t, s, ep)
	if c.Signaled != 5 || c.CQEWrites != 5 || c.Outstanding != 0 {
		t.Fatalf("counters %+v", c)
	}
}

func TestErrorStateFlush(t *testing.T) {
	m := detModel()
	m.Deterministic = false
	s := newSim(t, m)
	s.SetClock(1_000_000)
	ep := newEP(t, s, QPConfig{MaxSendWR: 64, MaxInline: 64})
	// 3 unsignaled + 1 signaled, none executed before the flush
	for i := 0; i < 4; i++ {
		f := uint32(SendInlineFlag)
		if i == 3 {
			f |= SendSignaledFlag
		}
		if _, err := PostSend(ep, []SendWR{sendWR(uint64(i), f, 8)}); err != nil {
			t.Fatal(err)
		}
	}
	if wc, _ := PollCQ(ep, 8); len(wc) != 0 {
		t.Fatalf("CQE before the NIC ran: %+v", wc)
	}
	s.SetClock(1_000_001)
	if err := s.SetError(ep); err != nil {
		t.Fatal(err)
	}
	wc, err := PollCQ(ep, 8)
	if err != nil || len(wc) != 4 {
		t.Fatalf("flush gave %d CQEs (%v), want 4 (every WR)", len(wc), err)
	}
	for i, w := range wc {
		if w.Status != WCStatusFlushErr || w.ID != uint64(i) {
			t.Fatalf("wc %d = %+v", i, w)
		}
	}
	c := counters(t, s, ep)
	if c.FlushedCQEs != 4 || c.Outstanding != 0 {
		t.Fatalf("counters %+v", c)
	}
	// posting on a QP in error: flushed right away
	if _, err := PostSend(ep, []SendWR{sendWR(9, SendInlineFlag, 8)}); err != nil {
		t.Fatal(err)
	}
	if wc, _ := PollCQ(ep, 8); len(wc) != 1 || wc[0].Status != WCStatusFlushErr {
		t.Fatalf("post in error state: %+v", wc)
	}
}

func TestNICTimingInlineIsFaster(t *testing.T) {
	m := detModel()
	m.Deterministic = false
	s := newSim(t, m)
	t0 := uint64(5_000_000)
	s.SetClock(t0)
	inl := newEP(t, s, QPConfig{MaxSendWR: 64, MaxInline: 64})
	dma := newEP(t, s, QPConfig{MaxSendWR: 64, MaxInline: 64})
	if _, err := PostSend(inl, []SendWR{sendWR(1, SendInlineFlag|SendSignaledFlag, 64)}); err != nil {
		t.Fatal(err)
	}
	if _, err := PostSend(dma, []SendWR{sendWR(1, SendSignaledFlag, 64)}); err != nil {
		t.Fatal(err)
	}
	// inline+BF: 10 ns + 64*8/100 ns + RTT 1500 ~ 1515 ns; DMA adds a 450 ns gather
	s.SetClock(t0 + 1600)
	a, _ := PollCQ(inl, 1)
	b, _ := PollCQ(dma, 1)
	if len(a) != 1 || len(b) != 0 {
		t.Fatalf("at +1600 ns inline %d CQEs, dma %d CQEs; want 1, 0", len(a), len(b))
	}
	s.SetClock(t0 + 2100)
	if b, _ = PollCQ(dma, 1); len(b) != 1 {
		t.Fatal("DMA WR not complete at +2100 ns")
	}
}

func TestWRAPI(t *testing.T) {
	s := newSim(t, detModel())
	ep := newEP(t, s, QPConfig{MaxSendWR: 16, MaxInline: 64, WRAPI: true})
	batch := make([]SendWR, 4)
	for i := range batch {
		batch[i] = SendWR{ID: uint64(i), Opcode: OpRDMAWrite, Flags: SendInlineFlag, NumSGE: 1, Len: 32}
	}
	batch[3].Flags |= SendSignaledFlag
	if err := PostWR(ep, batch, false); err != nil {
		t.Fatal(err)
	}
	if err := PostWR(ep, batch[:1], false); err != nil {
		t.Fatal(err)
	}
	if err := PostWR(ep, batch[:2], true); err != nil { // aborted
		t.Fatal(err)
	}
	c := counters(t, s, ep)
	if c.WRs != 5 || c.PostCalls != 2 || c.Doorbells != 2 || c.BFWrites != 1 || c.Inline != 5 || c.Signaled != 1 {
		t.Fatalf("counters %+v", c)
	}
	wc, _ := PollCQ(ep, 8)
	if len(wc) != 1 || wc[0].ID != 3 {
		t.Fatalf("wc %+v", wc)
	}
	// inline too big drops the whole batch
	big := []SendWR{batch[0], {ID: 7, Opcode: OpSend, Flags: SendInlineFlag, NumSGE: 1, Len: 93}}
	if err := PostWR(ep, big, false); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("err %v", err)
	}
	// fill the SQ: max_send_wr 16, 1 outstanding (WR 4, unsignaled)
	fill := make([]SendWR, 16)
	for i := range fill {
		fill[i] = SendWR{ID: uint64(10 + i), Opcode: OpSend, NumSGE: 1, Len: 8}
	}
	if err := PostWR(ep, fill, false); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("overflowing batch: %v", err)
	}
	c = counters(t, s, ep)
	if c.WRs != 5 || c.ENOMEMInline != 1 || c.ENOMEMSQFull != 1 || c.Outstanding != 1 {
		t.Fatalf("counters %+v", c)
	}
	if err := PostWR(ep, fill[:15], false); err != nil {
		t.Fatalf("batch that fits: %v", err)
	}
}
