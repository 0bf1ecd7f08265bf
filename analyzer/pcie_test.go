package analyzer

import (
	"encoding/json"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
)

// PCIe by opcode: a send or a write gathers its payload by DMA reads; a
// READ's or an atomic's local SGEs are where the HCA writes the response,
// so they are DMA writes of the READ's length or of 8 bytes, in the actual
// traffic and in the baseline alike (the report's tests write each
// case's QP and its JSON to a golden file).
func TestPCIeByOpcode(t *testing.T) {
	type want struct {
		payloadReads, payloadBytes, respWrites, respBytes uint64
	}
	wants := map[string]want{
		"read 64 B":                          {0, 0, 2000, 128000},
		"write 64 B":                         {2000, 128000, 0, 0},
		"read of 2 SGEs in lists of 4":       {0, 0, 200, 409600},
		"compare-and-swap and fetch-and-add": {0, 0, 100, 800},
		"inline sends, writes and reads":     {100, 102400, 100, 102400},
	}
	for _, c := range streamtest.PCIeByOpcode {
		t.Run(c.Name, func(t *testing.T) {
			w := streamtest.Want(t, wants, c.Name)
			s := streamtest.New()
			c.Build(s)
			snap := run(t, s, Options{BF: DefaultBF})
			q := snap.QPs[0]
			got := want{q.DMAReadsPayload, q.DMABytesPayload, q.DMAWritesResponse, q.DMABytesResponse}
			if got != w {
				t.Errorf("payload reads, bytes; response writes, bytes = %+v, want %+v", got, w)
			}
			p := q.PCIe
			if p.Actual.DMAWritesResponse != w.respWrites || p.Baseline.DMAWritesResponse != w.respWrites {
				t.Errorf("response writes: actual %d, baseline %d; want %d in both",
					p.Actual.DMAWritesResponse, p.Baseline.DMAWritesResponse, w.respWrites)
			}
			if p.Actual.DMAReadsPayload != w.payloadReads {
				t.Errorf("actual payload reads %d, want %d", p.Actual.DMAReadsPayload, w.payloadReads)
			}
			if q.Opcodes.Total() != q.WRs {
				t.Errorf("opcode mix %v sums to %d, want the %d WRs", q.Opcodes, q.Opcodes.Total(), q.WRs)
			}
		})
	}
}

func TestOpcodeMixJSON(t *testing.T) {
	tests := []struct {
		name string
		mix  OpcodeMix
		json string
	}{
		{"none", OpcodeMix{}, `{}`},
		{"read and send", func() (m OpcodeMix) {
			m.add(ibv.WRRDMARead)
			m.add(ibv.WRRDMARead)
			m.add(ibv.WRSend)
			return
		}(), `{"SEND":1,"RDMA_READ":2}`},
		{"past the known opcodes", func() (m OpcodeMix) {
			m.add(ibv.WRAtomicWrite)
			m.add(200)
			return
		}(), `{"ATOMIC_WRITE":1,"other":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.mix)
			if err != nil || string(b) != tc.json {
				t.Fatalf("Marshal = %s, %v; want %s", b, err, tc.json)
			}
			var back OpcodeMix
			if err := json.Unmarshal(b, &back); err != nil || back != tc.mix {
				t.Errorf("Unmarshal(%s) = %v, %v; want %v", b, back, err, tc.mix)
			}
		})
	}
	var m OpcodeMix
	if err := json.Unmarshal([]byte(`{"NOP":1}`), &m); err == nil {
		t.Error("an unknown opcode name: want an error")
	}
}
