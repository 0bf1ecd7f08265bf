package analyzer

import (
	"fmt"
	"io"
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

// diagnoseRxeOverflow names the cause of an SQ-full ENOMEM on rxe.
func (a *Analyzer) diagnoseRxeOverflow(q *sq, now uint64) {
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
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM) on rxe: %d WRs outstanding%s; %d of the %d WRs posted are SENDs: a SEND that finds no receive posted at the peer gets a receiver-not-ready (RNR) NAK and is retried, nothing behind it completes, and rxe frees a slot only when its WR completes, so the ring fills while the peer's receives are out",
			e[0], heldMore(e[0], e[1]), e[2], e[3])
		d.Fix = "Keep receives posted at the peer ahead of the SENDs: post at least as many as can be in flight, and repost each as soon as its completion is polled, not only when the sender polls (polling the send CQ more often frees no slot on rxe); or use RDMA WRITE, which needs no receive."
	case DiagOverflowNotCompleting:
		d.Message = fmt.Sprintf("SQ overflow (ENOMEM) on rxe: %d WRs outstanding%s, and rxe frees a slot only when its WR completes: the WRs posted are not completing (the peer does not acknowledge them, or the link is slower than the posting)",
			e[0], heldMore(e[0], e[1]))
		d.Fix = "Post no faster than the WRs complete (wait for completions before posting more), and check the peer and the link: on rxe polling the send CQ frees no slot."
	}
}

// writeProviderQP writes what a QP's provider did, by its model: the mlx5
// model's HCA figures and savings, or what is true on rxe, or nothing
// beyond the application's side for a provider sqscope has no model of.
func writeProviderQP(w io.Writer, q *QP) {
	switch {
	case q.Model != "":
		fmt.Fprintf(w, "  HCA (%s): doorbells %d (BlueFlame %d), WQEBBs %d, DMA reads: WQE %d, payload %d; CQE writes %d",
			q.Model, q.Doorbells, q.BFWrites, q.WQEBBs, q.DMAReadsWQE, q.DMAReadsPayload, q.CQEWrites)
		if q.DMAWritesResponse > 0 {
			fmt.Fprintf(w, "; DMA writes of READ/atomic responses %d (%d B)", q.DMAWritesResponse, q.DMABytesResponse)
		}
		fmt.Fprintln(w)
		p := q.PCIe
		fmt.Fprintf(w, "  saved vs one-WR-per-call, not inline, all signaled: doorbells %d, WQE fetches %d (batching) + %d (BlueFlame), payload reads %d (inline), CQE writes %d (unsignaled); PCIe %.1f%% of transactions, ~%.1f%% of bytes\n",
			p.DoorbellsSaved, p.WQEFetchBatching, p.WQEFetchBF, p.PayloadReadsSaved, p.CQEWritesSaved, p.TransactionsPct, p.BytesPct)
		if q.DMAWritesResponse > 0 {
			fmt.Fprintln(w, "    READ and atomic responses are written in the baseline too: no payload to inline, nothing the posting side saves")
		}
	case q.PostCalls == 0: // a QP that only receives: nothing of its provider to say
	case q.Provider == ProviderRxe.String():
		fmt.Fprintf(w, "  provider rxe (Soft-RoCE, software): %d post calls handed WRs to the kernel (a write() system call each); it has no BlueFlame, no WQEBBs and no PCIe, and the mlx5 model does not apply; a slot frees when its WR completes, signaled or not, so \"outstanding\" counts WRs whose completion was not yet polled\n",
			q.Doorbells)
		if q.PeakOutstanding > uint64(q.MaxSendWR) && q.MaxSendWR > 0 {
			fmt.Fprintf(w, "  %d WRs outstanding at the peak%s\n", q.PeakOutstanding, heldMore(q.PeakOutstanding, uint64(q.MaxSendWR)))
		}
	default:
		lib := ""
		if q.ProviderLib != "" {
			lib = " (post_send in " + q.ProviderLib + ")"
		}
		fmt.Fprintf(w, "  provider unknown%s: the application's side only; no HCA model applies, so no doorbell, BlueFlame, WQE or PCIe figures and no ENOMEM cause\n", lib)
		if d := uint64(q.MaxSendWR); d > 0 && q.PeakOutstanding > d {
			fmt.Fprintf(w, "  %d WRs outstanding at the peak, more than the max_send_wr %d the QP reports: the provider holds more than it reports, or frees slots before their completions are polled\n", q.PeakOutstanding, d)
		}
	}
}
