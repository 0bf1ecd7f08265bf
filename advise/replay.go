package advise

import (
	"encoding/json"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/verbs/nicmodel"
)

// Model is what a replay runs on: the simulated HCA's NIC timing and the
// target's BlueFlame settings.
type Model struct {
	NIC nicmodel.Model
	BF  analyzer.BFConfig
}

// MarshalJSON gives the parameters the replay uses, with their units.
func (m Model) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		LinkGbps  float64 `json:"link_gbps"`
		WQENS     uint32  `json:"wqe_ns"`
		DMAReadNS uint32  `json:"dma_read_ns"`
		RTTNS     uint32  `json:"rtt_ns"`
		PreferBF  bool    `json:"mlx5_prefer_bf"`
		ShutUpBF  bool    `json:"mlx5_shut_up_bf"`
		TLPHeader int     `json:"tlp_header_bytes"`
	}{m.NIC.LinkGbps, m.NIC.WQENS, m.NIC.DMAReadNS, m.NIC.RTTNS, m.BF.PreferBF, m.BF.ShutUpBF, analyzer.TLPHeader})
}

// Prediction is what one replay of a stream under some settings gives.
type Prediction struct {
	Settings
	// Caps are what the QP reports when created with these settings.
	Caps trace.Caps `json:"caps"`
	// ReplayedWRs: the replay posted this many of the stream's WRs (all of
	// them for the candidates printed; a prefix when screening).
	ReplayedWRs       uint64  `json:"replayed_wrs"`
	PostCalls         uint64  `json:"post_calls"`
	Doorbells         uint64  `json:"doorbells"`
	BFWrites          uint64  `json:"bf_writes"`
	DMAReadsWQE       uint64  `json:"dma_reads_wqe"`
	DMAReadsPayload   uint64  `json:"dma_reads_payload"`
	DMAWritesResponse uint64  `json:"dma_writes_response"`
	CQEWrites         uint64  `json:"cqe_writes"`
	PCIeTransactions  uint64  `json:"pcie_transactions"`
	PCIeBytes         uint64  `json:"pcie_bytes"`
	PeakOutstanding   uint64  `json:"peak_outstanding"`
	Seconds           float64 `json:"nic_seconds"`
	WRsPerSec         float64 `json:"wrs_per_s"`
	// Overflow says why the settings fail: the application, keeping at
	// most max_send_wr outstanding, would wait for a completion no posted
	// WR writes, or post into a full SQ (ENOMEM).
	Overflow string `json:"overflow,omitempty"`
}

// BytesPerWR is the PCIe bytes per WR.
func (p *Prediction) BytesPerWR() float64 {
	if p.ReplayedWRs == 0 {
		return 0
	}
	return float64(p.PCIeBytes) / float64(p.ReplayedWRs)
}

type inFlight struct {
	seq, done uint64
	signaled  bool
}

// replay posts the first limit WRs of s (all when limit is 0) under set,
// as an application that posts set.PostList WRs per call, keeps at most
// set.MaxSendWR outstanding (polling until a completion makes room) and
// polls once after each post. Each WR completes when the NIC timing model
// of verbs/sim_post.c says; the host's own time is taken as nil. The calls it
// makes go through the analyzer's mlx5 model, whose counters are the
// prediction. The stream's last WR is signaled, so the run drains.
func replay(s *Stream, set Settings, m Model, limit int) Prediction {
	p := Prediction{Settings: set}
	caps, ok := capsFor(s.Overhead, set.MaxSendWR, max(set.InlineUpTo, s.Caps.MaxInlineData), s.Caps.MaxSendSGE)
	if !ok {
		p.Overflow = "past the HCA's limits"
		return p
	}
	p.Caps = caps
	n := len(s.WRs)
	if limit > 0 && limit < n {
		n = limit
	}
	a := analyzer.New(analyzer.Options{BF: m.BF, HistoryLen: -1})
	hdr := func(t uint64) trace.Header { return trace.Header{TimeNS: t, PID: s.PID, TID: s.PID} }
	const qp, cq = 1, 2
	a.Ingest(&trace.QPCreate{Header: hdr(1), QP: qp, QPNum: s.QPNum, Type: s.Type, SigAll: s.SigAll, SendCQ: cq, RecvCQ: cq, Caps: caps, Via: s.via, Lib: s.lib})
	a.Ingest(&trace.QPModify{Header: hdr(1), QP: qp, QPNum: s.QPNum, State: ibv.QPSRTS})

	var q []inFlight // outstanding, oldest first
	t, engineFree, end, start := uint64(1000), uint64(0), uint64(0), uint64(1000)
	var wcs []trace.WC
	// poll retires every signaled WR done by now and the WRs before it
	poll := func() int {
		last := -1
		wcs = wcs[:0]
		for i, f := range q {
			if f.done > t {
				break
			}
			if f.signaled {
				last = i
				wcs = append(wcs, trace.WC{ID: f.seq, QPNum: s.QPNum})
			}
		}
		if last < 0 {
			return 0
		}
		a.Ingest(&trace.Poll{Header: hdr(t), CQ: cq, Max: int32(len(wcs)), Ret: int32(len(wcs)), WCs: wcs})
		q = q[last+1:]
		return len(wcs)
	}
	wrs := make([]trace.WR, 0, set.PostList)
	for i := 0; i < n; {
		k := min(int(set.PostList), n-i)
		for len(q)+k > int(set.MaxSendWR) {
			j := -1
			for x, f := range q {
				if f.signaled {
					j = x
					break
				}
			}
			if j < 0 {
				p.Overflow = "every WR outstanding is unsignaled: no completion will make room, and posting on fills the SQ (ENOMEM)"
				return p
			}
			t = max(t, q[j].done)
			poll()
		}
		wrs = wrs[:0]
		for x := range k {
			w := s.WRs[i+x]
			tw := trace.WR{ID: uint64(i + x), Opcode: w.Opcode, NumSGE: w.NumSGE, Bytes: w.Bytes}
			if set.InlineUpTo > 0 && w.carriesPayload() && w.Bytes <= set.InlineUpTo {
				tw.Flags |= ibv.SendInline
			}
			if (set.SignalEvery > 0 && uint32(i+x+1)%set.SignalEvery == 0) || i+x+1 == n {
				tw.Flags |= ibv.SendSignaled
			}
			wrs = append(wrs, tw)
		}
		last := wrs[k-1]
		bf := m.BF.BlueFlame(k, last.Flags&ibv.SendInline != 0, analyzer.WQESize(s.Type, &last))
		for _, w := range wrs {
			q = append(q, inFlight{seq: w.ID, signaled: s.SigAll || w.Flags&ibv.SendSignaled != 0, done: m.done(t, bf, w, s.Type, &engineFree)})
			end = max(end, q[len(q)-1].done)
		}
		a.Ingest(&trace.Post{Header: hdr(t), QP: qp, QPNum: s.QPNum, WRs: wrs, Accepted: uint32(k)})
		i += k
		poll()
	}
	for len(q) > 0 { // drain: the last WR is signaled
		t = max(t, q[len(q)-1].done)
		poll()
	}
	qs := a.Snapshot().QPs
	if len(qs) != 1 {
		p.Overflow = "the model lost the QP"
		return p
	}
	c := qs[0]
	p.ReplayedWRs, p.PostCalls, p.Doorbells, p.BFWrites = c.WRs, c.PostCalls, c.Doorbells, c.BFWrites
	p.DMAReadsWQE, p.DMAReadsPayload, p.DMAWritesResponse, p.CQEWrites = c.DMAReadsWQE, c.DMAReadsPayload, c.DMAWritesResponse, c.CQEWrites
	p.PCIeTransactions, p.PCIeBytes = c.PCIe.Actual.Transactions(), c.PCIe.Actual.Bytes
	p.PeakOutstanding = c.PeakOutstanding
	if c.ENOMEMSQFull+c.ENOMEMInline+c.ENOMEMSGE > 0 {
		p.Overflow = "posts fail with ENOMEM"
	}
	p.Seconds = float64(end-start) / 1e9
	if p.Seconds > 0 {
		p.WRsPerSec = float64(p.ReplayedWRs) / p.Seconds
	}
	return p
}

// done is when a WR posted at t completes, by verbs/sim_post.c's formula (commit):
// fetch (no BlueFlame) and gather (not inline, with data) latencies,
// then the engine's time for the WR, one WR at a time, then the ACK's
// round trip on RC.
func (m Model) done(t uint64, bf bool, w trace.WR, typ trace.QPType, engineFree *uint64) uint64 {
	lat := t
	if !bf {
		lat += uint64(m.NIC.DMAReadNS)
	}
	if w.Flags&ibv.SendInline == 0 && w.NumSGE > 0 && w.Bytes > 0 {
		lat += uint64(m.NIC.DMAReadNS)
	}
	occ := uint64(m.NIC.WQENS) + uint64(float64(w.Bytes)*8.0/m.NIC.LinkGbps)
	d := max(lat+occ, *engineFree+occ)
	*engineFree = d
	if typ == trace.QPTypeRC {
		d += uint64(m.NIC.RTTNS)
	}
	return d
}
