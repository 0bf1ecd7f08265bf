package analyzer

import (
	"cmp"
	"slices"

	"github.com/sqscope/sqscope/trace"
)

// Snapshot returns a copy of the current state; it costs O(QPs) (the
// history and the diagnoses kept per QP are bounded).
func (a *Analyzer) Snapshot() Snapshot { return a.SnapshotHistory(nil) }

// SnapshotHistory is Snapshot with the occupancy history and histogram
// copied only for the QPs keep accepts (all when keep is nil): a view
// refreshing many times a second draws them for one QP, not for every QP.
func (a *Analyzer) SnapshotHistory(keep func(pid, qpNum uint32) bool) Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.snapshot(SnapshotOptions{History: keep})
}

// snapshot is the snapshot o asks for (SnapshotWith), under the lock.
func (a *Analyzer) snapshot(o SnapshotOptions) Snapshot {
	s := a.snap
	s.Version = a.version
	keep, buf := o.History, o.Reuse
	order := a.qpOrder()
	if s.Partial = o.QPs != nil; s.Partial {
		a.picked = a.picked[:0]
		for _, q := range order {
			if o.QPs(q.key.pid, q.key.qpNum) {
				a.picked = append(a.picked, q)
			}
		}
		order = a.picked
		s.Attach, s.Scans = nil, nil
	} else {
		s.Attach = append([]trace.Attach(nil), a.snap.Attach...)
		s.Scans = append([]trace.Scan(nil), a.snap.Scans...)
	}
	if cap(buf) >= len(order) {
		s.QPs = buf[:len(order)]
		clear(s.QPs) // fields are set only where they apply
	} else {
		s.QPs = make([]QP, len(order))
	}
	models := a.snapModels[:0] // the distinct models of the QPs
	for i, q := range order {
		p := &s.QPs[i] // filled in place: a QP is about a kilobyte
		k := q.key
		detail := keep == nil || keep(k.pid, k.qpNum)
		c := &p.Counters
		q.countersTo(c)
		a.resolveProvider(q)
		m := q.model()
		models = addModel(models, m)
		p.PCIe, p.Occupancy = savings(c), q.occupancy(detail)
		if m.label() == "" { // the model prices no post
			hideCosts(c)
			p.PCIe = Savings{absent: true}
			p.Occupancy.Depth = 0 // no model of what bounds the WRs outstanding
		}
		r := &p.Rates
		switch {
		case q.countersOnly:
			r.SpanNS = countedSpan(q.createdNS, s.FirstNS, q.lastNS)
			r.countersOnly, s.Total.CountersOnly = true, true
		case a.snap.Sentinel != nil && q.c.PostCalls > 0:
			r.SpanNS, r.WhileTraced = a.tracedNS(k.pid, s.LastNS), true
		case q.c.PostCalls > 0:
			r.SpanNS = q.lastNS - min(q.firstPost, q.lastNS)
		}
		r.WRsPerSec = perSec(c.WRs, r.SpanNS)
		r.PostsPerSec = perSec(c.PostCalls, r.SpanNS)
		r.CQEsPerSec = perSec(c.CQEsPolled, r.SpanNS)
		r.WRsPerDoorbell = ratio(c.WRs, c.Doorbells)
		p.PostsNotTraced = a.postsDirect(q)
		r.postsDirect = p.PostsNotTraced
		if cs := q.cq; cs != nil { // the send CQ's lifetime only
			c.Polls, c.EmptyPolls = cs.polls, cs.empty
			if q.countersOnly { // the CQ's times are those of its flushes
				r.PollsPerSec = perSec(cs.polls, r.SpanNS)
			} else {
				r.PollsPerSec = perSec(cs.polls, cs.lastNS-cs.firstNS)
			}
			r.PollsPerCQE = ratio(cs.polls, cs.cqes)
			p.SendCQGen = cs.gen
			c.CQEsPastBound, c.PollRecordWCs = cs.pastBound-cs.pastRecv, cs.recordWCs
		}
		if detail {
			p.History, p.HistoryStartNS = q.hist.copyOut()
		}
		if c.Signaled > 0 {
			p.SignalIntervalLongest = q.runLongest + 1
		}
		p.PID, p.Comm, p.QPNum, p.Type = k.pid, a.procs.comm(k.pid), k.qpNum, q.typ.String()
		p.MaxSendWR, p.MaxInline, p.MaxSendSGE = q.caps.MaxSendWR, q.caps.MaxInlineData, q.caps.MaxSendSGE
		p.SigAll, p.Gen, p.CapsKnown, p.CapsInferred = q.sigAll, q.gen, q.capsKnown, q.sendCapsInferred
		p.Destroyed, p.CountersOnly, p.SendCQ = q.destroyed, q.countersOnly, q.sendCQ
		if q.countersOnly && q.kern != nil { // kernsq.go
			p.KernelSQ, p.OccupancyNotMeasured = q.kernUsable(), q.kernWhy()
		}
		p.Provider, p.ProviderLib, p.Model = nameOf(q.prov), q.provLib, m.label()
		if q.capsKnown { // no cause is inferred from caps not known
			p.CauseBasis = m.causeBasis()
		}
		p.Outstanding, p.SignalInterval = q.outstanding(), q.typicalInterval()
		p.Found, p.StateFound = q.found, q.stateFound
		p.OutstandingLowerBound = q.lowerBound() && !a.completionsNotTraced()
		p.OutstandingUpperBound = c.CQEsPastBound > 0 && !q.countersOnly
		p.Sentinel = a.snap.Sentinel != nil
		if n, ns := q.sampledOutstanding(); ns != 0 {
			p.Outstanding, p.OutstandingSampledNS = n, ns
		}
		p.ExactSinceNS = q.exactSinceNS()
		p.ExactSinceS = exactSince(a.clock(), p.ExactSinceNS)
		p.WRIDsRepeat, p.CompletionsNotTraced = q.syncGuessed, a.completionsNotTraced()
		p.PreAttachCQEs, p.RetiredUnseen = q.preCQEs, q.retiredUnseen
		p.Recv = a.recvSnapshot(q)
		p.Memory = q.memory()
		addCounters(&s.Total.Counters, c)
		if p.KernelSQ {
			s.Total.kernelSQ = true
		}
	}
	// polls belong to CQs, which QPs may share: count each CQ once
	s.Total.Polls, s.Total.EmptyPolls = 0, 0
	s.Total.CQEsPastBound, s.Total.CQEsPastBoundRecv, s.Total.PollRecordWCs = 0, 0, 0
	var cqes uint64
	for _, cs := range a.allCQs {
		s.Total.Polls += cs.polls
		s.Total.EmptyPolls += cs.empty
		s.Total.CQEsPastBound += cs.pastBound
		s.Total.CQEsPastBoundRecv += cs.pastRecv
		s.Total.PollRecordWCs = max(s.Total.PollRecordWCs, cs.recordWCs)
		cqes += cs.cqes
	}
	t := &s.TotalRates
	t.SpanNS = s.LastNS - s.FirstNS
	if a.snap.Sentinel != nil { // traced in windows: the longest any process was
		t.SpanNS, t.WhileTraced = 0, true
		for p := range a.sentinel.traced {
			t.SpanNS = max(t.SpanNS, a.tracedNS(p, s.LastNS))
		}
		for p := range a.sentinel.windows {
			t.SpanNS = max(t.SpanNS, a.tracedNS(p, s.LastNS))
		}
	}
	t.WRsPerSec = perSec(s.Total.WRs, t.SpanNS)
	t.PostsPerSec = perSec(s.Total.PostCalls, t.SpanNS)
	t.PollsPerSec = perSec(s.Total.Polls, t.SpanNS)
	t.CQEsPerSec = perSec(s.Total.CQEsPolled, t.SpanNS)
	t.PollsPerCQE = ratio(s.Total.Polls, cqes)
	t.WRsPerDoorbell = ratio(s.Total.WRs, s.Total.Doorbells)
	t.countersOnly = s.Total.CountersOnly
	s.TotalPCIe = savings(&s.Total.Counters)
	a.snapModels = models
	if s.Total.notGiven = notGivenByAll(models); s.Total.notGiven["pcie"] {
		s.TotalPCIe = Savings{absent: true}
	}
	s.Diagnoses = a.diagnoses()
	if c := a.snap.Sentinel; c != nil {
		cp := *c // the analyzer's goes on counting
		if c.Sampling != nil {
			sm := *c.Sampling
			if c.Sampling.Cost != nil {
				cost := *c.Sampling.Cost
				sm.Cost = &cost
			}
			sm.Shares = a.sentinel.shares.shares()
			cp.Sampling = &sm
		}
		s.Sentinel = &cp
	}
	if c := a.snap.SQModelCuts; c != nil { // the analyzer's goes on counting
		cp := *c
		s.SQModelCuts = &cp
	}
	a.snapshotRecv(&s)
	if s.Partial {
		s.Cut = nil
		return s
	}
	s.CQs, s.SRQs = a.cqSnapshot(), a.srqSnapshot()
	s.Cut = cutSnapshot(a.snap.Cut, s.QPs)
	s.Processes = a.procs.snapshot()
	return s
}

// qpOrder is every QP lifetime by pid and QP number, generations in the
// order first seen; it is sorted again only when QPs came since.
func (a *Analyzer) qpOrder() []*sq {
	if len(a.ordered) != len(a.all) {
		a.ordered = append(a.ordered[:0], a.all...)
		slices.SortStableFunc(a.ordered, func(x, y *sq) int {
			if c := cmp.Compare(x.key.pid, y.key.pid); c != 0 {
				return c
			}
			return cmp.Compare(x.key.qpNum, y.key.qpNum)
		})
	}
	return a.ordered
}

func addCounters(t, c *Counters) {
	t.WRs += c.WRs
	t.PostCalls += c.PostCalls
	t.Inline += c.Inline
	t.Signaled += c.Signaled
	t.Doorbells += c.Doorbells
	t.BFWrites += c.BFWrites
	t.WQEBBs += c.WQEBBs
	t.DMAReadsWQE += c.DMAReadsWQE
	t.DMAReadsPayload += c.DMAReadsPayload
	t.CQEWrites += c.CQEWrites
	t.ENOMEMSQFull += c.ENOMEMSQFull
	t.ENOMEMInline += c.ENOMEMInline
	t.ENOMEMSGE += c.ENOMEMSGE
	t.EINVAL += c.EINVAL
	if c.PeakOutstanding > t.PeakOutstanding {
		t.PeakOutstanding = c.PeakOutstanding
	}
	t.CQEsPolled += c.CQEsPolled
	t.ENOMEMUnknown += c.ENOMEMUnknown
	t.ENOMEM += c.ENOMEM
	t.OtherErrors += c.OtherErrors
	t.CQEErrors += c.CQEErrors
	t.FlushedUnsignaled += c.FlushedUnsignaled
	t.UnmatchedCQEs += c.UnmatchedCQEs
	t.Truncated += c.Truncated
	t.WRAPICalls += c.WRAPICalls
	t.Aborted += c.Aborted
	t.EdgePosts += c.EdgePosts
	if c.LongestUnsignaledRun > t.LongestUnsignaledRun {
		t.LongestUnsignaledRun = c.LongestUnsignaledRun
	}
	t.MMIOBytes += c.MMIOBytes
	t.DMABytesWQE += c.DMABytesWQE
	t.DMABytesPayload += c.DMABytesPayload
	t.InlineBytes += c.InlineBytes
	t.Polls += c.Polls
	t.EmptyPolls += c.EmptyPolls
	t.PostRecvs += c.PostRecvs
	t.RecvCQEs += c.RecvCQEs
	t.NotRTS += c.NotRTS
	t.EmptyWRBatches += c.EmptyWRBatches
	t.InlineSGEs += c.InlineSGEs
	t.BaselineWQEBytes += c.BaselineWQEBytes
	t.BeyondModel += c.BeyondModel
	t.DMAWritesResponse += c.DMAWritesResponse
	t.DMABytesResponse += c.DMABytesResponse
	for i, n := range c.Opcodes {
		t.Opcodes[i] += n
	}
	t.Cuts.add(&c.Cuts)
}
