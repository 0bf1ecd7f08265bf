package analyzer

// PCIe accounting (Kalia et al., ATC'16, applied to the mlx5 rules of
// docs/design.md). Transactions crossing PCIe per post call of n WRs: one
// BlueFlame MMIO of the WQE in 64 B chunks, or one 8 B doorbell MMIO plus a
// NIC DMA read of the n WQEs; per non-inline WR that carries a payload
// (sends, writes, atomic write) one DMA read per non-empty SGE; per READ or
// atomic (compare-and-swap, fetch-and-add) the DMA write of its response
// into the local SGEs, one per non-empty SGE of a READ with its length, one
// of 8 B for an atomic; per signaled WR one 64 B CQE DMA write. The
// doorbell-record write goes to host memory and is not counted.
//
// Bytes: every transaction pays TLPHeader bytes of header. A DMA read is a
// header-only request plus one completion carrying the data (its header
// counted too); a DMA write is one posted request with its data. This is
// an estimate, and the report says so.
//
// The naive baseline posts the same WRs one per call, not inline, all
// signaled, without BlueFlame: per WR one 8 B doorbell, one WQE fetch, one
// read per payload SGE, one CQE write; and the same response writes, which
// nothing the application does on its side saves (a READ or an atomic has
// no payload to inline).

// TLPHeader is the per-transaction overhead used for byte estimates.
const TLPHeader = 24

// cqeBytes is the size of a CQE written by DMA.
const cqeBytes = 64

// PCIe counts transactions and bytes.
type PCIe struct {
	MMIOWrites      uint64 `json:"mmio_writes"`       // doorbells and BlueFlame chunks
	DMAReadsWQE     uint64 `json:"dma_reads_wqe"`     // WQE fetches
	DMAReadsPayload uint64 `json:"dma_reads_payload"` // payload gathers
	// READ and atomic responses written into the local buffer
	DMAWritesResponse uint64 `json:"dma_writes_response"`
	CQEWrites         uint64 `json:"cqe_writes"`
	Bytes             uint64 `json:"bytes"`
}

// Transactions is the total count.
func (p PCIe) Transactions() uint64 {
	return p.MMIOWrites + p.DMAReadsWQE + p.DMAReadsPayload + p.DMAWritesResponse + p.CQEWrites
}

// Savings is what the application saved against the naive baseline, split
// by cause.
type Savings struct {
	Actual   PCIe `json:"actual"`
	Baseline PCIe `json:"baseline"`

	DoorbellsSaved    uint64 `json:"doorbells_saved"` // batching: WRs - doorbells
	WQEFetchBatching  uint64 `json:"wqe_fetches_saved_batching"`
	WQEFetchBF        uint64 `json:"wqe_fetches_saved_blueflame"`
	PayloadReadsSaved uint64 `json:"payload_reads_saved_inline"`
	CQEWritesSaved    uint64 `json:"cqe_writes_saved_unsignaled"`
	BytesSaved        int64  `json:"bytes_saved"`
	// Percent of the baseline's transactions and bytes saved.
	TransactionsPct float64 `json:"transactions_saved_pct"`
	BytesPct        float64 `json:"bytes_saved_pct"`
	// unmodeled: the counts held no BlueFlame, WQE or MMIO figures
	// (counters mode); only the doorbells and CQE writes saved are known
	unmodeled bool
	// absent: no PCIe model applies (a provider other than mlx5's: JSON null)
	absent bool
}

// savings computes the PCIe picture of one QP's counters. Counters mode
// counts doorbells but not what each wrote (no MMIO bytes, BlueFlame
// writes, WQE fetches or WQEBBs): then only
// the savings resting on counted numbers, doorbells and CQE writes, are
// computed, and the rest is left zero (and out of reports).
func savings(c *Counters) Savings {
	var s Savings
	s.DoorbellsSaved = sub(c.WRs, c.Doorbells)
	s.CQEWritesSaved = sub(c.WRs, c.Signaled)
	if c.Doorbells > 0 && c.MMIOBytes+c.BFWrites+c.DMAReadsWQE+c.WQEBBs == 0 {
		s.unmodeled = true
		return s
	}
	// actual
	plain := sub(c.Doorbells, c.BFWrites)
	bfChunks := sub(c.MMIOBytes, 8*plain) // BF bytes, 64 B chunks
	s.Actual.MMIOWrites = plain + bfChunks/64
	s.Actual.DMAReadsWQE = c.DMAReadsWQE
	s.Actual.DMAReadsPayload = c.DMAReadsPayload
	s.Actual.DMAWritesResponse = c.DMAWritesResponse
	s.Actual.CQEWrites = c.CQEWrites
	resp := c.DMAWritesResponse*TLPHeader + c.DMABytesResponse
	s.Actual.Bytes = plain*(8+TLPHeader) + bfChunks + (bfChunks/64)*TLPHeader +
		c.DMAReadsWQE*2*TLPHeader + c.DMABytesWQE +
		c.DMAReadsPayload*2*TLPHeader + c.DMABytesPayload + resp +
		c.CQEWrites*(cqeBytes+TLPHeader)

	// baseline: every WR alone, not inline, signaled, plain doorbell
	sges := c.DMAReadsPayload + c.InlineSGEs
	s.Baseline.MMIOWrites = c.WRs
	s.Baseline.DMAReadsWQE = c.WRs
	s.Baseline.DMAReadsPayload = sges
	s.Baseline.DMAWritesResponse = c.DMAWritesResponse
	s.Baseline.CQEWrites = c.WRs
	s.Baseline.Bytes = c.WRs*(8+TLPHeader) + c.WRs*2*TLPHeader + c.BaselineWQEBytes +
		sges*2*TLPHeader + c.DMABytesPayload + c.InlineBytes + resp + c.WRs*(cqeBytes+TLPHeader)

	s.WQEFetchBF = c.BFWrites
	if c.WRs >= c.BFWrites+c.DMAReadsWQE {
		s.WQEFetchBatching = c.WRs - c.BFWrites - c.DMAReadsWQE
	}
	s.PayloadReadsSaved = c.InlineSGEs
	s.BytesSaved = int64(s.Baseline.Bytes) - int64(s.Actual.Bytes)
	if bt := s.Baseline.Transactions(); bt > 0 {
		s.TransactionsPct = 100 * (float64(bt) - float64(s.Actual.Transactions())) / float64(bt)
	}
	if s.Baseline.Bytes > 0 {
		s.BytesPct = 100 * float64(s.BytesSaved) / float64(s.Baseline.Bytes)
	}
	return s
}

// sub is a - b, or 0 when b is larger: a count saved is never negative.
func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
