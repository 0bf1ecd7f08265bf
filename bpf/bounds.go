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

// The attach cookie of an error-site probe (events.h, SQ_SITE_* and
// SQ_LOC_*): where the QP and the WR (or the errno) are at the site. A
// test pins each to events.h.
const (
	SiteLocNone    = 0
	SiteLocReg     = 1
	SiteLocStack   = 2
	SiteErrnoShift = 0
	SiteIndexShift = 8
	SiteIndexBits  = 12
	SiteLocAShift  = 20
	SiteLocBShift  = 48
	SiteLocOffBits = 10
	SiteAdjBits    = 12
	// FailSGEs is SQ_FAIL_SGES: the SGE lengths a failure record sums.
	FailSGEs = 16
)
