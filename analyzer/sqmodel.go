// Package analyzer rebuilds each send queue from a stream of trace events:
// occupancy by the mlx5 head/tail model, doorbells and BlueFlame writes, the
// ENOMEM causes, and what inline sends, unsignaled completions and doorbell
// batching saved. It is pure: events in, snapshots out, no kernel and no
// terminal.
package analyzer

import (
	"github.com/sqscope/sqscope/trace"
)

// verbs constants the model needs (enum values of <infiniband/verbs.h>).
const (
	wrRDMAWrite    = 0
	wrRDMAWriteImm = 1
	wrSend         = 2
	wrSendImm      = 3
	wrRDMARead     = 4
	wrAtomicCS     = 5
	wrAtomicFA     = 6

	sendSignaled = 1 << 1
	sendInline   = 1 << 3

	wcRecv = 128 // IBV_WC_RECV: completions at or above are receive side

	errENOMEM = 12
	errEINVAL = 22
)

// mlx5 WQE geometry (design.md).
const (
	wqebb     = 64
	ctrlSeg   = 16
	raddrSeg  = 16
	dataSeg   = 16
	inlHdr    = 4
	dgramSeg  = 48
	bfBufSize = 256
)

// BFConfig mirrors the provider's BlueFlame knobs in the target.
type BFConfig struct {
	PreferBF bool // MLX5_POST_SEND_PREFER_BF (default on)
	ShutUpBF bool // MLX5_SHUT_UP_BF (default off)
}

// DefaultBF is libmlx5's default.
var DefaultBF = BFConfig{PreferBF: true}

type wrSlot struct {
	id       uint64
	signaled bool
}

// sq is the model of one send queue.
type sq struct {
	key              qpKey
	qp               uint64
	typ              trace.QPType
	caps             trace.Caps
	capsKnown        bool
	sendCapsInferred bool
	sigAll           bool
	sendCQ           uint64
	created          uint64
	destroyed        bool

	head, tail uint64 // WR sequence numbers: posted, retired
	ring       []wrSlot
	sigSeqs    []uint64 // signaled WRs outstanding, oldest first

	c Counters

	// unsignaled run tracking
	curRun uint64

	lastPost uint64
	lastPoll uint64
	firstNS  uint64
	lastNS   uint64
}

func (q *sq) outstanding() uint64 { return q.head - q.tail }

func (q *sq) slot(seq uint64) *wrSlot {
	return &q.ring[seq%uint64(len(q.ring))]
}

// grow keeps the ring larger than anything that can be outstanding.
func (q *sq) grow(need uint64) {
	if uint64(len(q.ring)) > need {
		return
	}
	n := len(q.ring) * 2
	if n == 0 {
		n = 256
	}
	for uint64(n) <= need {
		n *= 2
	}
	old := q.ring
	q.ring = make([]wrSlot, n)
	for s := q.tail; s < q.head; s++ {
		q.ring[s%uint64(n)] = old[s%uint64(len(old))]
	}
}

// opOverhead is the WQE size before data segments for one opcode.
func (q *sq) opOverhead(op uint8) uint32 {
	size := uint32(ctrlSeg)
	if q.typ == trace.QPTypeUD {
		size += dgramSeg
	}
	switch op {
	case wrRDMAWrite, wrRDMAWriteImm, wrRDMARead:
		size += raddrSeg
	case wrAtomicCS, wrAtomicFA:
		size += raddrSeg + 16
	}
	return size
}

func align(v, a uint32) uint32 { return (v + a - 1) / a * a }

// wqeSize is the WQE's size in bytes, as the provider builds it. An SGE of
// zero length takes no data segment in mlx5; the trace has only the SGE
// count and the total, so all SGEs of a non-empty WR count as non-empty.
func (q *sq) wqeSize(w *trace.WR) (size uint32, gathers uint32) {
	size = q.opOverhead(w.Opcode)
	if w.Flags&sendInline != 0 {
		if w.Bytes > 0 {
			size += align(inlHdr+w.Bytes, 16)
		}
		return size, 0
	}
	if w.Bytes > 0 {
		size += w.NumSGE * dataSeg
		gathers = w.NumSGE
	}
	return size, gathers
}

func (q *sq) isSignaled(w *trace.WR) bool {
	return q.sigAll || w.Flags&sendSignaled != 0
}

func opcodeValid(typ trace.QPType, op uint8) bool {
	switch op {
	case wrSend, wrSendImm:
		return true
	case wrRDMAWrite, wrRDMAWriteImm, wrRDMARead, wrAtomicCS, wrAtomicFA:
		return typ != trace.QPTypeUD
	}
	return false
}

// cause classifies a failed post at WR index i of the list, by the
// provider's order of checks.
func (q *sq) cause(p *trace.Post, i int) errCause {
	if p.Ret == errEINVAL {
		return causeEINVAL
	}
	if p.Ret != errENOMEM {
		return causeOther
	}
	if i >= len(p.WRs) {
		// the failing WR is past the tracer's bound
		if q.capsKnown && q.outstanding()+uint64(i) >= uint64(q.caps.MaxSendWR) {
			return causeSQFull
		}
		return causeUnknownENOMEM
	}
	w := &p.WRs[i]
	if q.capsKnown {
		if q.outstanding()+uint64(i) >= uint64(q.caps.MaxSendWR) {
			return causeSQFull
		}
		if p.API == trace.APIWR {
			// wr API: the inline size is checked when the data is set
			if w.Flags&sendInline != 0 && w.Bytes > q.caps.MaxInlineData {
				return causeInline
			}
			if w.NumSGE > q.caps.MaxSendSGE {
				return causeSGE
			}
			return causeUnknownENOMEM
		}
		if w.NumSGE > q.caps.MaxSendSGE {
			return causeSGE
		}
		if w.Flags&sendInline != 0 && w.Bytes > q.caps.MaxInlineData {
			return causeInline
		}
		return causeUnknownENOMEM
	}
	// caps unknown (attached late): the SQ being full is the only cause
	// that depends on history; infer the depth from it.
	return causeSQFull
}

type errCause int

const (
	causeNone errCause = iota
	causeSQFull
	causeInline
	causeSGE
	causeEINVAL
	causeUnknownENOMEM
	causeOther
)

// post applies one post call to the model.
func (q *sq) post(p *trace.Post, bf BFConfig) (errCause, int) {
	q.c.PostCalls++
	if p.API == trace.APIWR {
		q.c.WRAPICalls++
	}
	if p.Aborted {
		q.c.Aborted++
		return causeNone, 0
	}
	n := int(p.Accepted)
	if n > len(p.WRs) {
		// accepted WRs past the bound: counted, shape unknown
		q.c.Truncated += uint64(n - len(p.WRs))
	}
	cause := causeNone
	if p.Ret != 0 {
		cause = q.cause(p, n)
		switch cause {
		case causeSQFull:
			q.c.ENOMEMSQFull++
			if !q.capsKnown {
				q.caps.MaxSendWR = uint32(q.outstanding() + uint64(n))
				q.sendCapsInferred = true
			}
		case causeInline:
			q.c.ENOMEMInline++
		case causeSGE:
			q.c.ENOMEMSGE++
		case causeEINVAL:
			q.c.EINVAL++
		case causeUnknownENOMEM:
			q.c.ENOMEMUnknown++
		default:
			q.c.OtherErrors++
		}
	}
	if n == 0 {
		return cause, 0
	}
	q.grow(q.outstanding() + uint64(n))
	var lastSize uint32
	var lastInline bool
	var batchBytes uint64
	for i := 0; i < n; i++ {
		seq := q.head + uint64(i)
		var sig bool
		if i < len(p.WRs) {
			w := &p.WRs[i]
			size, gathers := q.wqeSize(w)
			bbs := (size + wqebb - 1) / wqebb
			q.c.WQEBBs += uint64(bbs)
			batchBytes += uint64(bbs) * wqebb
			lastSize, lastInline = size, w.Flags&sendInline != 0
			sig = q.isSignaled(w)
			if lastInline {
				q.c.Inline++
				q.c.InlineBytes += uint64(w.Bytes)
				if w.Bytes > 0 {
					q.c.InlineSGEs += uint64(max(w.NumSGE, 1))
					q.c.BaselineWQEBytes += uint64((q.opOverhead(w.Opcode)+max(w.NumSGE, 1)*dataSeg+wqebb-1)/wqebb) * wqebb
				} else {
					q.c.BaselineWQEBytes += uint64(bbs) * wqebb
				}
			} else {
				q.c.BaselineWQEBytes += uint64(bbs) * wqebb
				q.c.DMAReadsPayload += uint64(gathers)
				q.c.DMABytesPayload += uint64(w.Bytes)
			}
			*q.slot(seq) = wrSlot{id: w.ID, signaled: sig}
		} else {
			*q.slot(seq) = wrSlot{id: ^uint64(0), signaled: q.sigAll}
			sig = q.sigAll
		}
		q.c.WRs++
		if sig {
			q.c.Signaled++
			q.sigSeqs = append(q.sigSeqs, seq)
			if q.curRun > q.c.LongestUnsignaledRun {
				q.c.LongestUnsignaledRun = q.curRun
			}
			q.curRun = 0
		} else {
			q.curRun++
			if q.curRun > q.c.LongestUnsignaledRun {
				q.c.LongestUnsignaledRun = q.curRun
			}
		}
	}
	q.head += uint64(n)
	q.c.Doorbells++
	size16 := (lastSize + 15) / 16
	if !bf.ShutUpBF && n == 1 && (lastInline || bf.PreferBF) && size16 > 1 && size16 <= bfBufSize/16 && len(p.WRs) > 0 {
		q.c.BFWrites++
		q.c.MMIOBytes += uint64(align(size16*16, 64))
	} else {
		q.c.MMIOBytes += 8
		q.c.DMAReadsWQE++
		q.c.DMABytesWQE += batchBytes
	}
	if out := q.outstanding(); out > q.c.PeakOutstanding {
		q.c.PeakOutstanding = out
	}
	return cause, n
}

// complete applies one send completion of this QP: it retires its WR and
// every earlier one (sq.tail = wqe_head[idx] + 1).
func (q *sq) complete(wc *trace.WC) {
	q.c.CQEsPolled++
	if wc.Status != 0 {
		q.c.CQEErrors++
	}
	if q.head == q.tail {
		q.c.UnmatchedCQEs++
		return
	}
	// Match by wr_id from the oldest outstanding signaled WR; an error CQE
	// may be for an unsignaled WR (flush), so fall back to a scan.
	seq, ok := uint64(0), false
	for len(q.sigSeqs) > 0 && q.sigSeqs[0] < q.tail {
		q.sigSeqs = q.sigSeqs[1:]
	}
	if len(q.sigSeqs) > 0 && q.slot(q.sigSeqs[0]).id == wc.ID {
		seq, ok = q.sigSeqs[0], true
	} else {
		for s := q.tail; s < q.head; s++ {
			if q.slot(s).id == wc.ID {
				seq, ok = s, true
				break
			}
		}
	}
	if !ok {
		if len(q.sigSeqs) > 0 {
			seq, ok = q.sigSeqs[0], true // RC in order: the oldest signaled WR
		} else {
			seq = q.tail
		}
	}
	// a flushed unsignaled WR writes a CQE too
	if !q.slot(seq).signaled {
		q.c.FlushedUnsignaled++
	}
	q.tail = seq + 1
	for len(q.sigSeqs) > 0 && q.sigSeqs[0] < q.tail {
		q.sigSeqs = q.sigSeqs[1:]
	}
}
