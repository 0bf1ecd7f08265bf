// Package nicmodel is the simulated HCA's NIC timing model, in pure Go so
// that what replays a recording offline (advise) needs no cgo: verbs runs
// it in the simulator, advise in its replays.
package nicmodel

import (
	"fmt"
	"strconv"
	"strings"
)

// Model parameterises the simulated NIC. A WR posted at time t completes
// (its CQE becomes visible, if signaled) at
//
//	done = max(t + fetch + gather + occ, engineFree + occ) + rtt
//
// where fetch = DMAReadNS unless the doorbell was a BlueFlame write (the WQE
// came with the MMIO), gather = DMAReadNS unless the WR is inline or empty
// (the payload came inside the WQE), occ = WQENS + bytes*8/LinkGbps is the
// engine time the WR occupies (WQEs execute in order, one at a time per QP),
// and rtt = RTTNS for RC (the responder's ACK) and 0 for UD. Latencies
// overlap between WRs; engine time does not. So SQ occupancy rises and falls
// as on hardware, and inline and BlueFlame visibly lower latency.
//
// The simulator's defaults (verbs.DefaultNICModel): LinkGbps 100, WQENS 10,
// DMAReadNS 450 (a PCIe read round trip), RTTNS 1500, BFBufSize 256,
// PreferBF from MLX5_POST_SEND_PREFER_BF (default on), ShutUpBF from
// MLX5_SHUT_UP_BF (default off), device limits max_qp_wr 32768 and max_sge
// 30. With Deterministic set every CQE is visible at the doorbell and no
// clock is read: tests use it.
type Model struct {
	Deterministic bool
	LinkGbps      float64
	WQENS         uint32
	DMAReadNS     uint32
	RTTNS         uint32
	BFBufSize     uint32
	PreferBF      bool
	ShutUpBF      bool
}

// knobs are the model's timing parameters by the names the
// workload's --sim-nic and advise's --nic take.
var knobs = []struct {
	name string
	get  func(*Model) float64
	set  func(*Model, float64)
}{
	{"link-gbps", func(m *Model) float64 { return m.LinkGbps }, func(m *Model, v float64) { m.LinkGbps = v }},
	{"wqe-ns", func(m *Model) float64 { return float64(m.WQENS) }, func(m *Model, v float64) { m.WQENS = uint32(v) }},
	{"dma-read-ns", func(m *Model) float64 { return float64(m.DMAReadNS) }, func(m *Model, v float64) { m.DMAReadNS = uint32(v) }},
	{"rtt-ns", func(m *Model) float64 { return float64(m.RTTNS) }, func(m *Model, v float64) { m.RTTNS = uint32(v) }},
}

// Parse changes m's timing by a list such as
// "link-gbps=0.25,rtt-ns=20000"; the names not given keep m's values.
func Parse(s string, m Model) (Model, error) {
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		v, err := strconv.ParseFloat(val, 64)
		known := false
		for _, k := range knobs {
			if k.name != name {
				continue
			}
			known = true
			switch {
			case !ok || err != nil || v < 0 || v > 1e9:
				return m, fmt.Errorf("NIC model %q: want %s=NUMBER, not negative", kv, name)
			case name == "link-gbps" && v == 0:
				return m, fmt.Errorf("NIC model %q: the link rate must be above 0", kv)
			}
			k.set(&m, v)
		}
		if !known {
			return m, fmt.Errorf("NIC model %q: unknown parameter (want %s)", kv, knobNames())
		}
	}
	return m, nil
}

func knobNames() string {
	var n []string
	for _, k := range knobs {
		n = append(n, k.name)
	}
	return strings.Join(n, ", ")
}

// String is the model's timing in the form Parse reads.
func (m Model) String() string {
	var b []string
	for _, k := range knobs {
		b = append(b, k.name+"="+strconv.FormatFloat(k.get(&m), 'f', -1, 64))
	}
	return strings.Join(b, ",")
}
