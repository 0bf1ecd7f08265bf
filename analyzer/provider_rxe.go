package analyzer

import (
	"fmt"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// rxe (Soft-RoCE, rdma-core providers/rxe and the kernel's
// drivers/infiniband/sw/rxe) differs from the mlx5 model where it counts:
//   - post_send writes each WR into a ring shared with the kernel and ends
//     with a write() system call on the device's file (post_send_db): no
//     BlueFlame, no WQE basic blocks, no PCIe;
//   - the ring has a power of two of slots, one kept empty, so it holds
//     more WRs than the max_send_wr the QP reports (128 asked and reported,
//     255 held);
//   - a slot frees when the kernel's completer retires its WR (acknowledged,
//     or executed), signaled or not, not when the application polls its
//     CQE: the WRs the model counts outstanding (posted, completion not
//     polled) may be many more than the ring holds, and polling the send CQ
//     lazily fills nothing;
//   - post_send returns ENOMEM for a full ring only (too many SGEs and
//     inline data over the limit are EINVAL; the ibv_wr_* builders return
//     ENOSPC for all three);
//   - a SEND whose peer has no receive posted is answered with a
//     receiver-not-ready NAK and retried after the RNR timer (for ever with
//     rnr_retry 7): it and every WR behind it stay in the ring, which fills.
// So on rxe an SQ-full ENOMEM means WRs are not completing: with SENDs
// among them, because the peer's receives ran out.

type rxeModel struct{}

func init() {
	registerProvider(&Provider{Name: "rxe", Files: []string{"librxe"}, Model: rxeModel{}})
}

func (rxeModel) label() string      { return "" }
func (rxeModel) slotFree() SlotRule { return SlotFreedOnExecution }
func (rxeModel) causeBasis() string { return "" }

// every ENOMEM is a full ring on rxe: none is left unexplained
func (rxeModel) unexplained(*Analyzer, *sq, *trace.Post, int) {}

// rxe gives no figure of what a post costs, and no ENOMEM for too many
// SGEs or inline data over the limit.
func (rxeModel) notGiven() map[string]bool { return rxeNotGiven }

var rxeNotGiven = union(costCounters, keySet("enomem_inline", "enomem_sge", "pcie"))

// cause: rxe's post_send returns ENOMEM for a full ring only (too many
// SGEs and inline data over the limit are EINVAL there).
func (rxeModel) cause(_ *sq, p *trace.Post, _ int) errCause {
	switch p.Ret {
	case ibv.EINVAL:
		return causeEINVAL
	case ibv.ENOMEM:
		return causeSQFull
	}
	return causeOther
}

// refused: on rxe as at a post's return, ENOMEM is a full ring.
func (m rxeModel) refused(_ *sq, e *trace.PostFail) errCause {
	return m.cause(nil, &trace.Post{Ret: e.Errno}, 0)
}

// overflow names the cause of an SQ-full ENOMEM on rxe.
func (rxeModel) overflow(a *Analyzer, q *sq, now uint64) {
	out, d := q.outstanding(), q.depth()
	if d == 0 { // attached after the QP's create: not known
		d = noValue
	}
	if sends := q.c.Opcodes.sends(); sends > 0 {
		a.record(q, DiagOverflowRNR, now, evidence{out, d, sends, q.c.WRs})
		return
	}
	a.record(q, DiagOverflowNotCompleting, now, evidence{out, d, q.c.WRs})
}

// siteOverflow: rxe's cause of a full ring needs no history of the
// queue, only what is posted: a refused SEND (or SENDs the windows
// traced) is the RNR retry, anything else WRs not completing.
func (rxeModel) siteOverflow(a *Analyzer, q *sq, e *trace.PostFail) bool {
	d := noValue
	if q.capsKnown {
		d = q.depth()
	}
	if q.c.Opcodes.sends() > 0 || e.HasWR && isSend(e.WR.Opcode) {
		a.record(q, DiagOverflowRNR, e.TimeNS, evidence{noValue, d, noValue, noValue})
		return true
	}
	a.record(q, DiagOverflowNotCompleting, e.TimeNS, evidence{noValue, d, noValue})
	return true
}

// heldMore says, when more WRs are outstanding than the depth the QP
// reports, that the provider holds more than it reports.
func heldMore(out, depth uint64) string {
	if depth == 0 || out <= depth {
		return ""
	}
	return fmt.Sprintf(" (more than the max_send_wr %d the QP reports: rxe holds more than it reports, its ring rounded up to a power of two, and frees a slot when its WR completes, before its CQE is polled)", depth)
}

// exportRxe writes the message and fix of rxe's diagnoses.
func exportRxe(r *diagRec, d *Diagnosis) {
	e := &r.ev
	switch r.kind {
	case DiagOverflowRNR:
		if e[0] == noValue { // at the error site: the refused WR
			d.Message = "SQ overflow (ENOMEM) on rxe, seen at its error site: a SEND was refused (or SENDs are posted) with the ring full: a SEND that finds no receive posted at the peer gets a receiver-not-ready (RNR) NAK and is retried, nothing behind it completes, and rxe frees a slot only when its WR completes, so the ring fills while the peer's receives are out"
			d.Fix = "Keep receives posted at the peer ahead of the SENDs: post at least as many as can be in flight, and repost each as soon as its completion is polled, not only when the sender polls (polling the send CQ more often frees no slot on rxe); or use RDMA WRITE, which needs no receive."
			break
		}
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM) on rxe: %d WRs outstanding%s; %d of the %d WRs posted are SENDs: a SEND that finds no receive posted at the peer gets a receiver-not-ready (RNR) NAK and is retried, nothing behind it completes, and rxe frees a slot only when its WR completes, so the ring fills while the peer's receives are out",
			e[0], heldMore(e[0], e[1]), e[2], e[3])
		d.Fix = "Keep receives posted at the peer ahead of the SENDs: post at least as many as can be in flight, and repost each as soon as its completion is polled, not only when the sender polls (polling the send CQ more often frees no slot on rxe); or use RDMA WRITE, which needs no receive."
	case DiagOverflowNotCompleting:
		if e[0] == noValue { // at the error site
			d.Message = "SQ overflow (ENOMEM) on rxe, seen at its error site: the ring was full, and rxe frees a slot only when its WR completes: the WRs posted are not completing (the peer does not acknowledge them, or the link is slower than the posting)"
			d.Fix = "Post no faster than the WRs complete (wait for completions before posting more), and check the peer and the link: on rxe polling the send CQ frees no slot."
			break
		}
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM) on rxe: %d WRs outstanding%s, and rxe frees a slot only when its WR completes: the WRs posted are not completing (the peer does not acknowledge them, or the link is slower than the posting)",
			e[0], heldMore(e[0], e[1]))
		d.Fix = "Post no faster than the WRs complete (wait for completions before posting more), and check the peer and the link: on rxe polling the send CQ frees no slot."
	}
}

// notes say what is true on rxe: no HCA figure, and the WRs counted
// outstanding may exceed the depth it reports.
func (rxeModel) notes(q *QP) []string {
	if q.PostCalls == 0 { // a QP that only receives: nothing of its provider to say
		return nil
	}
	notes := []string{fmt.Sprintf("provider rxe (Soft-RoCE, software): %d post calls handed WRs to the kernel (a write() system call each); it has no BlueFlame, no WQEBBs and no PCIe, and the mlx5 model does not apply; a slot frees when its WR completes, signaled or not, so \"outstanding\" counts WRs whose completion was not yet polled",
		q.Doorbells)}
	if q.PeakOutstanding > uint64(q.MaxSendWR) && q.MaxSendWR > 0 {
		notes = append(notes, fmt.Sprintf("%d WRs outstanding at the peak%s", q.PeakOutstanding, heldMore(q.PeakOutstanding, uint64(q.MaxSendWR))))
	}
	return notes
}
