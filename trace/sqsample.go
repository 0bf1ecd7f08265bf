package trace

// SQSample is a send queue's counters read from its process's memory,
// where the provider keeps them, without stopping it or taking a trap
// (the sentinel mode, between and during windows): the WRs posted to the
// QP and those retired by polled completions, as the provider counts
// them (each wraps at the provider's width, Width bytes), at TimeNS.
// Posted - Retired is what the provider's SQ-full check compares with
// the depth.
type SQSample struct {
	Header
	QP      uint64 // address of struct ibv_qp in the target
	QPNum   uint32
	Posted  uint64
	Retired uint64
	Width   uint8
	// Capacity is the most the queue holds, where the read gives it (a
	// ring's slots less the one kept empty; rxe's ring holds more than
	// the max_send_wr it reports); 0: the QP's max_send_wr.
	Capacity uint32
	// PostedCountsRefused: the provider counts a WR before its SQ-full
	// check (librxe's send sequence number), so Posted includes the WRs
	// a full queue refused.
	PostedCountsRefused bool
	// CQErrors is the times the QP's send CQ overran, where the provider
	// keeps that count (CQErrorsRead): the CQ error mlx5 raises as an
	// asynchronous event, which the simulated HCA keeps in the QP. An
	// overrun fails no post; its QPs go to the error state and no
	// completion comes.
	CQErrors     uint64
	CQErrorsRead bool
	// Signaled and SendCQEsPolled are the QP's counts of signaled WRs
	// posted and of its send completions polled, where the provider
	// keeps them (SignaledRead), Signaled read first: Signaled less
	// SendCQEsPolled is never above what the QP had pending on its send
	// CQ, posted and not yet polled, when Signaled was read.
	Signaled       uint64
	SendCQEsPolled uint64
	SignaledRead   bool
	// CQFill is what the QP's send CQ held unpolled and CQCapacity the
	// most it holds, where the provider's CQ is a ring read in memory
	// (CQRingRead: rxe): a CQ read full takes no more completions.
	CQFill, CQCapacity uint32
	CQRingRead         bool
}

func (*SQSample) Kind() Kind { return KindSQSample }
