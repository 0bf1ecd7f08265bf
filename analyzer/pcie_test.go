package analyzer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// PCIe by opcode: a send or a write gathers its payload by DMA reads; a
// READ's or an atomic's local SGEs are where the HCA writes the response,
// so they are DMA writes of the READ's length or of 8 bytes, in the actual
// traffic and in the baseline alike. The golden file holds each case's
// text and its JSON (opcodes, DMA counts, savings).
func TestPCIeByOpcode(t *testing.T) {
	type want struct {
		payloadReads, payloadBytes, respWrites, respBytes uint64
	}
	tests := []struct {
		name string
		post func(s *streamtest.Stream)
		want want
	}{
		// ib_read_bw -s 64 -n 2000: one WR per call, every 100th signaled
		{"read 64 B", func(s *streamtest.Stream) {
			for range 2000 {
				s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRRDMARead, 0, 1, 64, 100), 0, 1)
			}
		}, want{0, 0, 2000, 128000}},
		// the same as ib_write_bw: the payload is read
		{"write 64 B", func(s *streamtest.Stream) {
			for range 2000 {
				s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRRDMAWrite, 0, 1, 64, 100), 0, 1)
			}
		}, want{2000, 128000, 0, 0}},
		// a READ scattered over 2 SGEs: a write into each
		{"read of 2 SGEs in lists of 4", func(s *streamtest.Stream) {
			for range 25 {
				s.Post(0x1c0, s.WRs(0x1c0, 4, ibv.WRRDMARead, 0, 2, 4096, 10), 0, 4)
			}
		}, want{0, 0, 200, 409600}},
		// an atomic's response is 8 bytes, one write
		{"compare-and-swap and fetch-and-add", func(s *streamtest.Stream) {
			for range 50 {
				s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRAtomicCmpAndSwp, 0, 1, 8, 10), 0, 1)
				s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRAtomicFetchAndAdd, 0, 1, 8, 10), 0, 1)
			}
		}, want{0, 0, 100, 800}},
		// a mix: each opcode by its own rule; the inline SENDs save their
		// reads, the READs save nothing
		{"inline sends, writes and reads", func(s *streamtest.Stream) {
			for range 100 {
				s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRSend, ibv.SendInline, 1, 32, 10), 0, 1)
				s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRRDMAWrite, 0, 1, 1024, 10), 0, 1)
				s.Post(0x1c0, s.WRs(0x1c0, 1, ibv.WRRDMARead, 0, 1, 1024, 10), 0, 1)
			}
		}, want{100, 102400, 100, 102400}},
	}
	var out bytes.Buffer
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(4096, 64, 2), false)
			tc.post(s)
			snap := run(t, s, Options{BF: DefaultBF})
			q := snap.QPs[0]
			got := want{q.DMAReadsPayload, q.DMABytesPayload, q.DMAWritesResponse, q.DMABytesResponse}
			if got != tc.want {
				t.Errorf("payload reads, bytes; response writes, bytes = %+v, want %+v", got, tc.want)
			}
			p := q.PCIe
			if p.Actual.DMAWritesResponse != tc.want.respWrites || p.Baseline.DMAWritesResponse != tc.want.respWrites {
				t.Errorf("response writes: actual %d, baseline %d; want %d in both",
					p.Actual.DMAWritesResponse, p.Baseline.DMAWritesResponse, tc.want.respWrites)
			}
			if p.Actual.DMAReadsPayload != tc.want.payloadReads {
				t.Errorf("actual payload reads %d, want %d", p.Actual.DMAReadsPayload, tc.want.payloadReads)
			}
			if q.Opcodes.Total() != q.WRs {
				t.Errorf("opcode mix %v sums to %d, want the %d WRs", q.Opcodes, q.Opcodes.Total(), q.WRs)
			}
			fmt.Fprintf(&out, "== %s\n", tc.name)
			writeEventsQP(&out, &q)
			b, err := json.MarshalIndent(struct {
				Opcodes           OpcodeMix `json:"opcodes"`
				DMAReadsPayload   uint64    `json:"dma_reads_payload"`
				DMABytesPayload   uint64    `json:"dma_bytes_payload"`
				DMAWritesResponse uint64    `json:"dma_writes_response"`
				DMABytesResponse  uint64    `json:"dma_bytes_response"`
				PCIe              Savings   `json:"pcie"`
			}{q.Opcodes, q.DMAReadsPayload, q.DMABytesPayload, q.DMAWritesResponse, q.DMABytesResponse, q.PCIe}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			out.Write(b)
			out.WriteString("\n")
		})
	}
	golden(t, "pcie_by_opcode.golden", out.Bytes())
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
