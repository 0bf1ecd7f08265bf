package advise

import "github.com/sqscope/sqscope/trace"

// The simulated HCA's limits (verbs/sim_qp.c): a WQE of at most 16 basic
// blocks, max_qp_wr 32768.
const (
	maxWQEBytes = 1024
	maxQPWR     = 32768
	wqebb       = 64
	inlineHdr   = 4
	dataSeg     = 16
)

func alignUp(v, a uint32) uint32 { return (v + a - 1) / a * a }

func roundupPow2(v uint64) uint64 {
	p := uint64(1)
	for p < v {
		p <<= 1
	}
	return p
}

// overhead is the WQE bytes before data (mlx5's sq_overhead) that explain
// the caps the QP reported: max_inline_data = wqe - overhead - 4 with wqe
// a multiple of 64. Legacy RC (192) and UD (64) first, then the smaller
// overheads of a QP created with send_ops_flags (atomics 48, RDMA 32,
// sends 16).
func overhead(typ trace.QPType, c trace.Caps) uint32 {
	tries := []uint32{192, 48, 32, 16}
	if typ == trace.QPTypeUD {
		tries = []uint32{64}
	}
	for _, o := range tries {
		if wqe := c.MaxInlineData + inlineHdr + o; wqe%wqebb == 0 && o+c.MaxSendSGE*dataSeg <= wqe {
			return o
		}
	}
	return tries[0]
}

// capsFor is what mlx5 reports for a QP asked for maxSendWR WRs,
// maxInline inline bytes and the stream's SGEs, with WQE overhead ovh
// (calc_send_wqe, calc_sq_size); ok is false past the HCA's limits.
func capsFor(ovh, maxSendWR, maxInline, sge uint32) (trace.Caps, bool) {
	wqe := ovh + sge*dataSeg
	if maxInline > 0 {
		wqe = max(wqe, ovh+alignUp(inlineHdr+maxInline, 16))
	}
	wqe = alignUp(wqe, wqebb)
	if wqe > maxWQEBytes || maxSendWR == 0 || maxSendWR > maxQPWR {
		return trace.Caps{}, false
	}
	post := roundupPow2(uint64(maxSendWR)*uint64(wqe)) / uint64(wqe)
	return trace.Caps{MaxSendWR: uint32(post), MaxSendSGE: sge, MaxInlineData: wqe - ovh - inlineHdr}, true
}

// inlineLimit is the most inline data a WQE can carry on the QP.
func inlineLimit(ovh uint32) uint32 { return maxWQEBytes - ovh - inlineHdr }
