package bpf

// Record bounds of events.h (SQ_MAX_WRS, SQ_MAX_SGES, SQ_MAX_WCS): the most
// WRs a post record holds, SGEs summed per WR and completions a poll record
// holds. The knobs max_wrs, max_sges and max_wcs may lower them, never
// raise them. A test pins each to events.h.
const (
	MaxWRs  = 64
	MaxSGEs = 16
	MaxWCs  = 32
)
