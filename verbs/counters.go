package verbs

// Counters are the simulated HCA's ground truth for one QP: exactly what the
// mlx5 model (docs/design.md) says happened. The JSON names are the ones the
// tracer's reports use where they mean the same thing.
type Counters struct {
	QPNum           uint32 `json:"qp_num"`
	MaxSendWR       uint32 `json:"max_send_wr"`
	MaxInlineData   uint32 `json:"max_inline_data"`
	WRs             uint64 `json:"wrs"`        // WRs accepted
	PostCalls       uint64 `json:"post_calls"` // ibv_post_send calls, or wr_complete calls
	Inline          uint64 `json:"inline"`     // accepted WRs posted inline
	Signaled        uint64 `json:"signaled"`   // accepted WRs that will write a CQE
	Doorbells       uint64 `json:"doorbells"`  // calls that posted >= 1 WR
	BFWrites        uint64 `json:"bf_writes"`  // doorbells done as BlueFlame
	WQEBBs          uint64 `json:"wqebbs"`     // 64 B send WQE basic blocks consumed
	DMAReadsWQE     uint64 `json:"dma_reads_wqe"`
	DMAReadsPayload uint64 `json:"dma_reads_payload"`
	CQEWrites       uint64 `json:"cqe_writes"` // CQEs written, flush errors included
	ENOMEMSQFull    uint64 `json:"enomem_sq_full"`
	ENOMEMInline    uint64 `json:"enomem_inline"`
	ENOMEMSGE       uint64 `json:"enomem_sge"`
	EINVAL          uint64 `json:"einval"`
	PeakOutstanding uint64 `json:"peak_outstanding"`
	CQEsPolled      uint64 `json:"cqes_polled"` // send CQEs of this QP returned by ibv_poll_cq
	// Beyond the list every report shares:
	MMIOBytes       uint64 `json:"mmio_bytes"`        // doorbell (8 B) and BlueFlame (64 B chunks) MMIO bytes
	DMABytesWQE     uint64 `json:"dma_bytes_wqe"`     // WQE bytes fetched by DMA
	DMABytesPayload uint64 `json:"dma_bytes_payload"` // payload bytes gathered by DMA
	InlineBytes     uint64 `json:"inline_bytes"`
	FlushedCQEs     uint64 `json:"flushed_cqes"` // error CQEs written by a flush
	PostRecvs       uint64 `json:"post_recvs"`   // receive WRs accepted
	Outstanding     uint64 `json:"outstanding"`  // WRs posted and not yet retired, now
	// READ and atomic responses written by DMA into the local buffer (a
	// READ's one per non-empty SGE, its length; an atomic's one of 8 B);
	// their SGEs are not payload reads
	DMAWritesResponse uint64 `json:"dma_writes_response"`
	DMABytesResponse  uint64 `json:"dma_bytes_response"`
	// NotRTS counts post calls refused because the SQ was not in RTS:
	// ENOMEM from ibv_post_send (mlx5's SGE check against
	// qp_state_max_gs, -1 outside RTS; not in ENOMEMSGE), EINVAL from
	// ibv_wr_complete (in EINVAL too).
	NotRTS uint64 `json:"not_rts"`
	// CQOverrunErrs: times its send CQ overran and moved it to error.
	CQOverrunErrs uint64 `json:"cq_overrun_errs"`
	// The receive side, on a QP connected to a peer: its receives the
	// peer's SENDs took, their completions polled, and its SENDs that
	// found the peer's RQ empty (RNR NAK) or ran out of RNR retries.
	RecvsConsumed  uint64 `json:"recvs_consumed"`
	RecvCQEsPolled uint64 `json:"recv_cqes_polled"`
	RNRWaits       uint64 `json:"rnr_waits"`
	RNRRetryExc    uint64 `json:"rnr_retry_exc"`
}
