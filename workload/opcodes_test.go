package workload

import (
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/verbs"
)

func TestParseOpcodes(t *testing.T) {
	got, err := ParseOpcodes("send,READ, cmp_swp")
	if err != nil || len(got) != 3 || got[0] != ibv.WRSend || got[1] != ibv.WRRDMARead || got[2] != ibv.WRAtomicCmpAndSwp {
		t.Fatalf("ParseOpcodes = %v, %v", got, err)
	}
	if _, err := ParseOpcodes("send,nop"); err == nil {
		t.Error("an unknown name: want an error")
	}
	for _, tc := range []struct {
		name string
		mut  func(*Config)
	}{
		{"UD read", func(c *Config) { c.Conn = verbs.UD; c.Opcodes = []int{ibv.WRRDMARead} }},
		{"bind on a device", func(c *Config) { c.Device = "rxe0"; c.Opcodes = []int{ibv.WRBindMW} }},
		{"no opcode", func(c *Config) { c.Opcodes = nil }},
	} {
		c := Defaults()
		tc.mut(&c)
		if err := c.Validate(false); err == nil {
			t.Errorf("%s: want a usage error", tc.name)
		}
	}
}

// Every opcode the simulated HCA builds, in turn, through both APIs and
// both ways of polling: the application's own counts equal the HCA's.
func TestEveryOpcodeOnTheSim(t *testing.T) {
	every := []int{ibv.WRSend, ibv.WRSendWithImm, ibv.WRSendWithInv, ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm,
		ibv.WRRDMARead, ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd, ibv.WRAtomicWrite, ibv.WRLocalInv, ibv.WRBindMW}
	for _, api := range []string{"post_send", "wr"} {
		for _, ex := range []bool{false, true} {
			name := api
			if ex {
				name += "/cq-ex"
			}
			t.Run(name, func(t *testing.T) {
				c := simConfig()
				c.API, c.CQEx, c.Opcodes = api, ex, every
				c.Iters, c.CQMod, c.PostList, c.InlineSize = 2200, 4, 4, 64
				r := run(t, c)
				q := r.QPs[0]
				k, a := q.Counters, q.App
				if k.WRs != 2200 || a.WRs != 2200 || k.CQEsPolled != a.CQEsPolled || k.Signaled != a.Signaled ||
					k.Inline != a.Inline || k.EINVAL != 0 || k.Outstanding != 0 || a.CQEErrors != 0 {
					t.Fatalf("HCA %+v\napp %+v", k, a)
				}
				// the inline ones are the five that send their payload
				if k.Inline != 1000 {
					t.Errorf("inline %d, want 1000", k.Inline)
				}
			})
		}
	}
}

// READ and the atomics on the simulated HCA, through both APIs: the local
// buffer receives the response (the READ's -s bytes, an atomic's 8), which
// the HCA writes and never reads; the run reports the size it moved.
func TestResponsesOnTheSim(t *testing.T) {
	tests := []struct {
		name             string
		ops              []int
		size             uint32
		wrSize           uint32
		vary             bool
		writes, bytes    uint64
		payloadR, inline uint64
	}{
		{"read 64 B", []int{ibv.WRRDMARead}, 64, 64, false, 2000, 128000, 0, 0},
		{"compare-and-swap", []int{ibv.WRAtomicCmpAndSwp}, 64, 8, false, 2000, 16000, 0, 0},
		{"fetch-and-add", []int{ibv.WRAtomicFetchAndAdd}, 4096, 8, false, 2000, 16000, 0, 0},
		{"read and fetch-and-add", []int{ibv.WRRDMARead, ibv.WRAtomicFetchAndAdd}, 64, 64, true, 2000, 72000, 0, 0},
		// the payload of a WRITE is read; inline, it is not
		{"write and read, inline", []int{ibv.WRRDMAWrite, ibv.WRRDMARead}, 64, 64, false, 1000, 64000, 0, 1000},
		{"write and read", []int{ibv.WRRDMAWrite, ibv.WRRDMARead}, 64, 64, false, 1000, 64000, 1000, 0},
	}
	for _, tc := range tests {
		for _, api := range []string{"post_send", "wr"} {
			t.Run(tc.name+"/"+api, func(t *testing.T) {
				c := simConfig()
				c.API, c.Opcodes, c.Size, c.Iters = api, tc.ops, tc.size, 2000
				if tc.inline != 0 {
					c.InlineSize = tc.size
				}
				q := run(t, c).QPs[0]
				k := q.Counters
				if k.WRs != 2000 || k.DMAWritesResponse != tc.writes || k.DMABytesResponse != tc.bytes ||
					k.DMAReadsPayload != tc.payloadR || k.Inline != tc.inline {
					t.Errorf("WRs %d, response writes %d (%d B), payload reads %d, inline %d; want 2000, %d (%d B), %d, %d",
						k.WRs, k.DMAWritesResponse, k.DMABytesResponse, k.DMAReadsPayload, k.Inline,
						tc.writes, tc.bytes, tc.payloadR, tc.inline)
				}
				if q.WRSize != tc.wrSize || q.SizesVary != tc.vary {
					t.Errorf("WR size %d (vary %v), want %d (%v)", q.WRSize, q.SizesVary, tc.wrSize, tc.vary)
				}
			})
		}
	}
}
