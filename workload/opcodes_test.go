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
