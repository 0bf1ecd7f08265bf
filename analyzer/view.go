package analyzer

// nearFullAt is the occupancy, or unsignaled run, at which a send queue of
// depth d is near full: 75% of the depth, rounded up.
func nearFullAt(d uint64) uint64 { return (3*d + 3) / 4 }

// NearFull reports whether the send queue is near full: 75% of its depth
// either outstanding or, when none of its WRs was signaled (and sq_sig_all
// is off), as its longest unsignaled run. It is what the view highlights,
// not a prediction: it holds for an application whose own flow control keeps
// its queue full, and no later than the unsignaled-run prediction
// (sq.runWarnAt). Never when the depth is unknown.
func (q QP) NearFull() bool { return q.NearFullSince(&q.Counters) }

// NearFullSince is NearFull with the signaled WRs and runs counted in c
// (the QP's counters since a reset), without copying the QP.
func (q *QP) NearFullSince(c *Counters) bool {
	if q.MaxSendWR == 0 || q.Model == "" { // WRs not polled fill the SQ by the mlx5 model only
		return false
	}
	at := nearFullAt(uint64(q.MaxSendWR))
	return q.Outstanding >= at || (!q.SigAll && c.Signaled == 0 && c.LongestUnsignaledRun >= at)
}

// Sub returns the counters since the baseline b (an earlier reading of the
// same QP): the totals minus b's, never below zero; the peaks are kept,
// since a peak cannot be split at a point in time.
func (c Counters) Sub(b Counters) Counters {
	d := c
	sub := func(x *uint64, y uint64) { *x = Growth(*x, y) }
	sub(&d.WRs, b.WRs)
	sub(&d.PostCalls, b.PostCalls)
	sub(&d.Inline, b.Inline)
	sub(&d.Signaled, b.Signaled)
	sub(&d.Doorbells, b.Doorbells)
	sub(&d.BFWrites, b.BFWrites)
	sub(&d.WQEBBs, b.WQEBBs)
	sub(&d.DMAReadsWQE, b.DMAReadsWQE)
	sub(&d.DMAReadsPayload, b.DMAReadsPayload)
	sub(&d.CQEWrites, b.CQEWrites)
	sub(&d.ENOMEMSQFull, b.ENOMEMSQFull)
	sub(&d.ENOMEMInline, b.ENOMEMInline)
	sub(&d.ENOMEMSGE, b.ENOMEMSGE)
	sub(&d.EINVAL, b.EINVAL)
	sub(&d.CQEsPolled, b.CQEsPolled)
	sub(&d.ENOMEMUnknown, b.ENOMEMUnknown)
	sub(&d.ENOMEM, b.ENOMEM)
	sub(&d.OtherErrors, b.OtherErrors)
	sub(&d.CQEErrors, b.CQEErrors)
	sub(&d.FlushedUnsignaled, b.FlushedUnsignaled)
	sub(&d.UnmatchedCQEs, b.UnmatchedCQEs)
	sub(&d.Truncated, b.Truncated)
	sub(&d.WRAPICalls, b.WRAPICalls)
	sub(&d.Aborted, b.Aborted)
	sub(&d.EdgePosts, b.EdgePosts)
	sub(&d.MMIOBytes, b.MMIOBytes)
	sub(&d.DMABytesWQE, b.DMABytesWQE)
	sub(&d.DMABytesPayload, b.DMABytesPayload)
	sub(&d.InlineBytes, b.InlineBytes)
	sub(&d.Polls, b.Polls)
	sub(&d.EmptyPolls, b.EmptyPolls)
	sub(&d.PostRecvs, b.PostRecvs)
	sub(&d.EmptyWRBatches, b.EmptyWRBatches)
	sub(&d.InlineSGEs, b.InlineSGEs)
	sub(&d.BaselineWQEBytes, b.BaselineWQEBytes)
	sub(&d.BeyondModel, b.BeyondModel)
	sub(&d.SGECutWRs, b.SGECutWRs)
	sub(&d.SGEsNotSummed, b.SGEsNotSummed)
	sub(&d.WalkCappedPosts, b.WalkCappedPosts)
	sub(&d.CQEsPastBound, b.CQEsPastBound)
	sub(&d.CQEsPastBoundRecv, b.CQEsPastBoundRecv)
	sub(&d.SignaledUnkept, b.SignaledUnkept)
	sub(&d.DMAWritesResponse, b.DMAWritesResponse)
	sub(&d.DMABytesResponse, b.DMABytesResponse)
	for i := range d.Opcodes {
		sub(&d.Opcodes[i], b.Opcodes[i])
	}
	sub(&d.NotRTS, b.NotRTS)
	sub(&d.RecvCQEs, b.RecvCQEs)
	return d
}

// Growth is how much a counter grew from before to now, 0 when it went
// back (a QP destroyed and created again under the same number).
func Growth(now, before uint64) uint64 { return now - min(before, now) }

// Ratio is a/b, 0 when b is 0.
func Ratio(a, b uint64) float64 { return ratio(a, b) }

// Percent is a as a percentage of b, 0 when b is 0.
func Percent(a, b uint64) float64 { return 100 * ratio(a, b) }

// DMAReadsSaved is the NIC DMA reads saved: WQE fetches (batching and
// BlueFlame) and payload reads (inline).
func (s Savings) DMAReadsSaved() uint64 {
	return s.WQEFetchBatching + s.WQEFetchBF + s.PayloadReadsSaved
}

// Add adds b's counts to c, keeping the larger of the peaks and longest
// runs: the totals of a group of QPs, as a snapshot's total is made.
func (c *Counters) Add(b *Counters) { addCounters(c, b) }
