// Package analyzer rebuilds each send queue from a stream of trace events:
// occupancy by the mlx5 head/tail model, doorbells and BlueFlame writes, the
// ENOMEM causes, and what inline sends, unsignaled completions and doorbell
// batching saved. It is pure: events in, snapshots out, no kernel and no
// terminal.
package analyzer

import (
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// mlx5 WQE geometry (docs/design.md).
const (
	wqebb     = 64
	ctrlSeg   = 16
	raddrSeg  = 16
	dataSeg   = 16
	inlHdr    = 4
	dgramSeg  = 48
	atomicSeg = 16
	// a memory-window bind or a local invalidate is a UMR WQE: control
	// segment, UMR control segment, mkey context, and for a bind the KLM
	// of the window (padded to 64 B)
	umrCtrlSeg = 48
	mkeySeg    = 64
	klmSeg     = 64
	// a TSO WQE's Ethernet segment, before the inlined headers, whose
	// size the trace does not have
	ethSeg    = 16
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

// ringFirstLen is the first size of a QP's rings of WRs outstanding.
const ringFirstLen = 16

// sigEntry is a signaled WR still outstanding: its sequence number, when it
// was posted, and how often its send CQ had been polled (and found empty)
// by then, to tell later which polls could have returned its CQE.
type sigEntry struct {
	seq, ns      uint64
	polls, empty uint64
	// pollsUnknown: the send CQ's polls since its post are not known
	// (counters mode: no flush of the CQ's totals before it and after it)
	pollsUnknown bool
}

// runSmall is how many unsignaled run lengths are counted in an array; longer
// runs go to a map, so that the steady state does not allocate.
const runSmall = 64

// maxRunKeys bounds the distinct long run lengths kept per QP.
const maxRunKeys = 4096

// sq is the model of one send queue.
type sq struct {
	key              qpKey
	qp               uint64
	gen              uint64 // generation, 0 when not known (lifecycle.go)
	typ              trace.QPType
	caps             trace.Caps
	capsKnown        bool
	sendCapsInferred bool
	sigAll           bool
	sendCQ           uint64
	cq               *cqState // of sendCQ; nil while it is unknown
	rq               rqState  // its receive queue (recv.go)
	destroyed        bool
	// countersOnly: the kernel kept totals for this QP (low-overhead
	// mode); the per-call shape behind the mlx5 model was not recorded.
	countersOnly bool
	// kern: the send queue the kernel keeps (counters mode, kernsq.go)
	kern *kernSQ
	// sampledOut: the occupancy measured when the last sentinel window
	// closed (at sampledNS; 0: none), exported between windows
	sampledOut, sampledNS uint64
	mem                   *memSQ // its counters read from memory (memsample.go)
	memOut                bool   // sampledOut is the last read of them: exact at sampledNS
	// prov is the provider whose rules apply (provider.go); provLib the
	// file of its post_send, and provFromCreate whether its create named it
	prov           *Provider // nil: unknown, the generic model
	provLib        string
	provFromCreate bool

	head, tail uint64 // WR sequence numbers: posted, retired
	// failWR is the index in its list of the WR the last failed post
	// failed at (cause)
	failWR int
	ring   []wrSlot
	// sig is a ring of the signaled WRs outstanding, oldest first: entries
	// sigHead..sigTail-1 (monotonic, taken modulo len(sig) == len(ring)).
	sig              []sigEntry
	sigHead, sigTail uint64

	c Counters

	// unsignaled runs: the current one, and how often each length ended
	// with a signaled WR
	curRun   uint64
	runShort [runSmall]uint64
	runLong  map[uint64]uint64
	// the most common run length so far (the shortest of equals) and its
	// count, kept as runs end: counts only grow, so the most common is
	// the one just counted or the one before
	runBest, runBestN uint64
	runLongest        uint64 // longest run that ended with a signaled WR
	runWarned         bool   // a near-depth prediction was made for the current run
	// runWarnPending asks the analyzer to record that prediction
	runWarnPending bool

	// occupancy right after each post call
	occ  occDist
	hist history

	// sq_sig_all with IBV_SEND_SIGNALED set on some WRs and not on others;
	// sigAllNoted is the unflagged count the last diagnosis saw
	sigAllFlagged, sigAllUnflagged, sigAllNoted uint64
	// inline WRs on a QP whose max_inline_data is 0, and the count the last
	// diagnosis saw
	inlineNever, inlineNeverNoted uint64

	firstPost uint64
	lastPost  uint64
	lastPoll  uint64 // last send CQE of this QP
	firstNS   uint64
	lastNS    uint64
	createdNS uint64 // its create, when the trace saw it

	// late: not created while tracing, its pre-attach WRs unknown until
	// syncedNS (lateattach.go); found says how it became known
	late     bool
	syncedNS uint64
	// syncGuessed: the completion that ended the lower bound had a wr_id
	// other WRs posted since the attach share (lateattach.go)
	syncGuessed bool
	// edge: the QP's process is at a sentinel window's end, its probes
	// being removed in no set order (sample.go): a post seen then may
	// have completions the trace no longer sees, so its WRs are counted
	// as calls but kept out of the occupancy (nothing outstanding, peak
	// or histogram is taken from them)
	edge bool
	// lastID is the wr_id of the WR posted last (haveLastID), idsRepeat
	// that two in a row shared one, on a late QP: its sync is a guess
	lastID                uint64
	haveLastID, idsRepeat bool
	found                 string
	stateFound            string // the state the memory scan saw
	preCQEs               uint64 // completions of WRs posted before the attach
	retiredUnseen         uint64 // WRs retired by the depth bound, completions not seen
	skippedCQEs           uint64 // signaled WRs retired by a later WR's completion, theirs never seen
	// overSeen is what the trace alone left outstanding when the depth
	// bound last retired WRs, until checkNotTraced says so (then 0)
	overSeen uint64

	diags [numDiagKinds]int32 // index into Analyzer.diags, -1 when none
	// what the last calls_not_traced diagnosis saw: unmatched CQEs and
	// empty wr batches, and whether outstanding was over the depth
	notTracedNoted [2]uint64
	notTracedOver  bool

	qpStateTrack // diag_state.go
	qpPending
	qpRecvTrack // diag_recv.go
}

func (q *sq) outstanding() uint64 { return q.head - q.tail }

// slot is where WR seq is in the ring, whose length is a power of two
// (grow), as is the ring of signaled WRs' (sigAt).
func (q *sq) slot(seq uint64) *wrSlot {
	return &q.ring[seq&uint64(len(q.ring)-1)]
}

func (q *sq) sigAt(i uint64) *sigEntry {
	return &q.sig[i&uint64(len(q.sig)-1)]
}

// grow keeps the rings larger than anything that can be outstanding. They
// start small (thousands of QPs with a few WRs outstanding each would hold
// megabytes of slots never used) and double as WRs come.
func (q *sq) grow(need uint64) {
	if uint64(len(q.ring)) <= need {
		q.regrow(need)
	}
}

func (q *sq) regrow(need uint64) {
	n := len(q.ring) * 2
	if n == 0 {
		n = ringFirstLen
	}
	for uint64(n) <= need {
		n *= 2
	}
	old := q.ring
	q.ring = make([]wrSlot, n)
	for s := q.tail; s < q.head; s++ {
		q.ring[s%uint64(n)] = old[s%uint64(len(old))]
	}
	oldSig := q.sig
	q.sig = make([]sigEntry, n)
	for i := q.sigHead; i < q.sigTail; i++ {
		q.sig[i%uint64(n)] = oldSig[i%uint64(len(oldSig))]
	}
}

// sigPush records a signaled WR; the ring has room because it is as large
// as the WR ring.
func (q *sq) sigPush(seq, ns uint64) {
	e := sigEntry{seq: seq, ns: ns}
	if q.cq != nil {
		e.polls, e.empty = q.cq.polls, q.cq.empty
	}
	*q.sigAt(q.sigTail) = e
	q.sigTail++
}

// sigOldest returns the oldest signaled WR still outstanding.
func (q *sq) sigOldest() (sigEntry, bool) {
	if q.kernUsable() {
		return q.kernSigOldest()
	}
	for q.sigHead < q.sigTail {
		e := *q.sigAt(q.sigHead)
		if e.seq >= q.tail {
			return e, true
		}
		q.sigHead++
	}
	return sigEntry{}, false
}

// sigOutstanding counts the signaled WRs still outstanding.
func (q *sq) sigOutstanding() uint64 {
	if q.kernUsable() {
		return q.kernSigOutstanding()
	}
	q.sigOldest()
	return q.sigTail - q.sigHead
}

// endRun counts an unsignaled run ended by a signaled WR.
func (q *sq) endRun() {
	r := q.curRun
	var n uint64
	if r < runSmall {
		q.runShort[r]++
		n = q.runShort[r]
	} else {
		if q.runLong == nil {
			q.runLong = map[uint64]uint64{}
		}
		if _, ok := q.runLong[r]; ok || len(q.runLong) < maxRunKeys {
			q.runLong[r]++
			n = q.runLong[r]
		}
	}
	if n > q.runBestN || (n == q.runBestN && n > 0 && r < q.runBest) {
		q.runBest, q.runBestN = r, n
	}
	q.runLongest = max(q.runLongest, r)
	q.curRun = 0
	q.runWarned = false
}

// typicalInterval is the most common unsignaled run length plus one: the
// application's signal interval. 0 when no WR was signaled.
func (q *sq) typicalInterval() uint64 {
	if q.runBestN == 0 {
		return 0
	}
	return q.runBest + 1
}

// runWarnAt is the unsignaled run length that predicts an overflow. The WRs
// of the current run can be retired only by a signaled WR not yet posted, so
// the run alone fills the queue at the depth; whether it will is judged from
// what the queue has done, not from the signal interval alone. Once the
// application has ended runs with a signaled WR, its pattern is known: the
// run predicts an overflow when it is longer than every run it ended before
// and holds 75% of the depth (an application that keeps its pattern, such as
// perftest signaling every -Q WRs with -Q <= -t, stays quiet). Before any WR
// was signaled there is no pattern, and only a run of 7/8 of the depth, past
// where such applications signal, predicts one. There is none when the depth
// is unknown, or so small that the threshold is the depth itself (nothing to
// warn before the failure).
func (q *sq) runWarnAt() uint64 {
	d := q.depth()
	at := firstRunWarnAt(d)
	if q.c.Signaled > 0 {
		at = max(nearFullAt(d), q.runLongest+1)
	}
	if at >= d {
		return ^uint64(0)
	}
	return at
}

// firstRunWarnAt is 7/8 of the depth, rounded up.
func firstRunWarnAt(d uint64) uint64 { return (7*d + 7) / 8 }

// maxModelDepth bounds the WRs the model holds outstanding: four times
// the deepest SQ a provider offers (mlx5 and rxe cap max_qp_wr at 32768 or
// less), so only an inconsistent event stream reaches it.
const maxModelDepth = 1 << 17

// acceptLimit is the most WRs a post call can have posted: the length of
// its list, within what the model can hold.
func (q *sq) acceptLimit(p *trace.Post) int {
	limit := uint64(p.NumWRs())
	if room := maxModelDepth - min(q.outstanding(), maxModelDepth); limit > room {
		limit = room
	}
	return int(limit)
}

// depth is the SQ depth the model uses: the reported max_send_wr, or the
// inferred one; 0 when unknown.
func (q *sq) depth() uint64 { return uint64(q.caps.MaxSendWR) }

// opOverhead is the WQE size before data segments for one opcode. Atomic
// write is built as an atomic, its 8 bytes in the atomic segment (the
// simulated HCA's rule: mlx5 of rdma-core 44 has no atomic write); a bind
// is counted as one of non-zero length (an unbind takes no KLM: 64 B less).
func (q *sq) opOverhead(op uint8) uint32 {
	size := uint32(ctrlSeg)
	if q.typ == trace.QPTypeUD {
		size += dgramSeg
	}
	switch op {
	case ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm, ibv.WRRDMARead:
		size += raddrSeg
	case ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd, ibv.WRAtomicWrite:
		size += raddrSeg + atomicSeg
	case ibv.WRLocalInv:
		size += umrCtrlSeg + mkeySeg
	case ibv.WRBindMW:
		size += umrCtrlSeg + mkeySeg + klmSeg
	case ibv.WRTSO:
		size += ethSeg
	}
	return size
}

func align(v, a uint32) uint32 { return (v + a - 1) / a * a }

// wqeSize is the WQE's size in bytes, as the provider builds it. An SGE of
// zero length takes no data segment in mlx5; the trace has only the SGE
// count and the total, so all SGEs of a non-empty WR count as non-empty.
func (q *sq) wqeSize(w *trace.WR) (size uint32, gathers uint32) {
	size = q.opOverhead(w.Opcode)
	if w.Flags&ibv.SendInline != 0 {
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
	return q.sigAll || w.Flags&ibv.SendSignaled != 0
}

// modeledOp reports whether the model knows the WQE of an opcode: every
// opcode an ibv_wr_* builder or ibv_post_send can post. Each takes one SQ
// slot until its completion (or a later one) retires it. Their PCIe is
// counted by the rules of pcie.go: a READ's or an atomic's local SGEs
// are where the HCA writes the response, not a payload it reads.
func modeledOp(op uint8) bool {
	switch op {
	case ibv.WRSend, ibv.WRSendWithImm, ibv.WRSendWithInv, ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm,
		ibv.WRRDMARead, ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd, ibv.WRAtomicWrite,
		ibv.WRLocalInv, ibv.WRBindMW, ibv.WRTSO:
		return true
	}
	return false
}

// opcodeValid reports whether a QP of type typ takes opcode op: UD sends
// (with immediate, or TSO), raw packet QPs send (or TSO), the connected
// types take every other opcode but TSO.
func opcodeValid(typ trace.QPType, op uint8) bool {
	if !modeledOp(op) {
		return false
	}
	switch op {
	case ibv.WRSend:
		return true
	case ibv.WRSendWithImm:
		return typ != trace.QPTypeRawPkt
	case ibv.WRTSO:
		return typ == trace.QPTypeUD || typ == trace.QPTypeRawPkt
	}
	return typ != trace.QPTypeUD && typ != trace.QPTypeRawPkt
}

// cause classifies a failed post at WR index i of the list, by the
// checks of the QP's provider and in their order (its model's cause).
func (q *sq) cause(p *trace.Post, i int) errCause {
	q.failWR = i
	return q.model().cause(q, p, i)
}

type errCause int

// countCause counts a failed call by its errno and cause.
func (q *sq) countCause(ret int32, cause errCause) {
	if ret == ibv.ENOMEM {
		q.c.ENOMEM++ // whatever the cause
	}
	switch cause {
	case causeSQFull:
		q.c.ENOMEMSQFull++ // caps unknown: the mlx5 model inferred the depth
	case causeInline:
		q.c.ENOMEMInline++
	case causeSGE:
		q.c.ENOMEMSGE++
	case causeEINVAL:
		q.c.EINVAL++
	case causeUnknownENOMEM:
		q.c.ENOMEMUnknown++
	case causeNotRTS:
		q.c.NotRTS++
		if ret == ibv.EINVAL {
			q.c.EINVAL++
		}
	default:
		q.c.OtherErrors++
	}
}

const (
	causeNone errCause = iota
	causeSQFull
	causeInline
	causeSGE
	causeEINVAL
	causeUnknownENOMEM
	causeOther
	causeNotRTS // ENOMEM or EINVAL from a QP not in RTS (diag_state.go)
)

// post applies one post call to the model. It returns the cause of a
// failure and the number of WRs posted.
func (q *sq) post(p *trace.Post, bf BFConfig) (errCause, int) {
	if q.c.PostCalls == 0 {
		q.firstPost = p.TimeNS
	}
	q.c.PostCalls++
	if p.WalkCapped {
		q.c.WalkCappedPosts++
	}
	if p.API == trace.APIWR {
		q.c.WRAPICalls++
	}
	if p.Aborted {
		q.c.Aborted++
		return causeNone, 0
	}
	if q.edge {
		q.c.EdgePosts++
	}
	if p.API == trace.APIWR && p.Ret == 0 && p.NumWRs() == 0 {
		// a doorbell for WRs the trace did not see being built
		q.c.EmptyWRBatches++
	}
	n := int(p.Accepted)
	if limit := q.acceptLimit(p); n > limit {
		q.c.BeyondModel += uint64(n - limit)
		n = limit
	}
	if n > len(p.WRs) {
		// accepted WRs past the bound: counted, shape unknown
		q.c.Truncated += uint64(n - len(p.WRs))
	}
	cause := causeNone
	if p.Ret != 0 {
		cause = q.cause(p, n)
		q.countCause(p.Ret, cause)
	}
	if n == 0 {
		if !q.edge {
			q.notePost(p.TimeNS, 0)
		}
		return cause, 0
	}
	q.grow(q.outstanding() + uint64(n))
	var lastSize uint32
	var lastInline bool
	var batchBytes uint64
	warnAt := q.runWarnAt() // again after each signaled WR, which moves it
	for i := 0; i < n; i++ {
		seq := q.head + uint64(i)
		var sig bool
		if i < len(p.WRs) {
			w := &p.WRs[i]
			size, gathers := q.wqeSize(w)
			bbs := (size + wqebb - 1) / wqebb
			q.c.WQEBBs += uint64(bbs)
			batchBytes += uint64(bbs) * wqebb
			lastSize, lastInline = size, w.Flags&ibv.SendInline != 0
			sig = q.isSignaled(w)
			if q.sigAll {
				if w.Flags&ibv.SendSignaled != 0 {
					q.sigAllFlagged++
				} else {
					q.sigAllUnflagged++
				}
			}
			q.c.Opcodes.add(w.Opcode)
			if w.SGEsNotSummed > 0 { // cuts.go
				q.c.SGECutWRs++
				q.c.SGEsNotSummed += uint64(w.SGEsNotSummed)
			}
			if takesRecv(w.Opcode) { // diag_recv.go
				q.sendsPosted++
			}
			if lastInline {
				if q.capsKnown && q.caps.MaxInlineData == 0 && w.Bytes > 0 {
					q.inlineNever++
				}
				q.c.Inline++
				q.c.InlineBytes += uint64(w.Bytes)
				// a READ or atomic flagged inline saves no read: the
				// baseline reads nothing of its local buffer
				if w.Bytes > 0 && !responds(w.Opcode) {
					q.c.InlineSGEs += uint64(max(w.NumSGE, 1))
					q.c.BaselineWQEBytes += uint64((q.opOverhead(w.Opcode)+max(w.NumSGE, 1)*dataSeg+wqebb-1)/wqebb) * wqebb
				} else {
					q.c.BaselineWQEBytes += uint64(bbs) * wqebb
				}
			} else {
				q.c.BaselineWQEBytes += uint64(bbs) * wqebb
				if responds(w.Opcode) {
					writes, bytes := response(w.Opcode, gathers, w.Bytes)
					q.c.DMAWritesResponse += writes
					q.c.DMABytesResponse += bytes
				} else {
					q.c.DMAReadsPayload += uint64(gathers)
					q.c.DMABytesPayload += uint64(w.Bytes)
				}
			}
			*q.slot(seq) = wrSlot{id: w.ID, signaled: sig}
			if q.late && q.haveLastID && q.lastID == w.ID {
				// WRs share wr_ids (perftest gives a QP's every WR
				// one): no completion proves which WR it is of
				q.idsRepeat = true
				if q.syncedNS != 0 {
					q.syncGuessed = true
				}
			}
			q.lastID, q.haveLastID = w.ID, true
		} else {
			*q.slot(seq) = wrSlot{id: ^uint64(0), signaled: q.sigAll}
			sig = q.sigAll
		}
		q.c.WRs++
		if sig {
			q.c.Signaled++
			q.sigPush(seq, p.TimeNS)
			q.endRun()
			warnAt = q.runWarnAt()
		} else {
			q.curRun++
			if q.curRun > q.c.LongestUnsignaledRun {
				q.c.LongestUnsignaledRun = q.curRun
			}
			if !q.runWarned && q.curRun >= warnAt {
				q.runWarned = true
				q.runWarnPending = true
			}
		}
	}
	q.head += uint64(n)
	if q.edge {
		q.unsync()
	}
	q.boundByDepth()
	q.c.Doorbells++
	if bf.BlueFlame(n, lastInline, lastSize) && len(p.WRs) > 0 {
		q.c.BFWrites++
		q.c.MMIOBytes += uint64(align(lastSize, 16*4))
	} else {
		q.c.MMIOBytes += 8
		q.c.DMAReadsWQE++
		q.c.DMABytesWQE += batchBytes
	}
	if q.edge {
		return cause, n
	}
	if out := q.outstanding(); out > q.c.PeakOutstanding {
		q.c.PeakOutstanding = out
	}
	q.notePost(p.TimeNS, uint32(n))
	return cause, n
}

// notePost records the occupancy a post call left behind.
func (q *sq) notePost(now uint64, wrs uint32) {
	out := q.outstanding()
	q.occ.note(out)
	q.hist.note(now, out, wrs, 0)
}

// complete applies one send completion of this QP, polled at now: it
// retires its WR and every earlier one (sq.tail = wqe_head[idx] + 1).
func (q *sq) complete(wc *trace.WC, now uint64) {
	q.c.CQEsPolled++
	if wc.Status != 0 {
		q.c.CQEErrors++
	}
	unsynced := q.lateUnsynced()
	if unsynced && q.lateCompletion(wc, now) {
		return
	}
	if q.head == q.tail {
		if q.syncGuessed { // the guess retired too much: a pre-attach WR's
			q.preCQEs++
			return
		}
		q.c.UnmatchedCQEs++
		return
	}
	// Match by wr_id from the oldest outstanding signaled WR; an error CQE
	// may be for an unsignaled WR (flush), so fall back to a scan.
	seq, ok := uint64(0), false
	oldest, haveSig := q.sigOldest()
	if haveSig && q.slot(oldest.seq).id == wc.ID {
		seq, ok = oldest.seq, true
	} else {
		for s := q.tail; s < q.head; s++ {
			if q.slot(s).id == wc.ID {
				seq, ok = s, true
				break
			}
		}
	}
	if !ok {
		if haveSig {
			seq = oldest.seq // RC in order: the oldest signaled WR
		} else {
			seq = q.tail
		}
	}
	// a flushed unsignaled WR writes a CQE too
	if !q.slot(seq).signaled {
		q.c.FlushedUnsignaled++
	}
	// completions come in order: a later WR's, successful, while an
	// older signaled one is outstanding says that one's never will (a
	// full CQ dropped it: skippedCQEs, diag_state.go); not the completion
	// that syncs a late QP, whose older ones may have been polled before
	// the poll probe was in place
	if ok && haveSig && seq > oldest.seq && wc.Status == 0 && !unsynced {
		for s := oldest.seq; s < seq; s++ {
			if q.slot(s).signaled {
				q.skippedCQEs++
			}
		}
	}
	q.tail = seq + 1
	q.sigOldest()
}

// onPost applies a post call to its QP's model and looks for what it
// revealed.
func (a *Analyzer) onPost(e *trace.Post) {
	q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
	q.noteFound(FoundPost)
	if !q.capsKnown {
		a.snap.UnknownQPPosts++
	}
	a.resolveProvider(q)
	cause, n := q.post(e, a.opts.BF)
	q.lastPost = e.TimeNS
	q.lastNS = max(q.lastNS, e.TimeNS)
	a.afterPost(q, e, cause, n)
}
