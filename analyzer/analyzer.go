package analyzer

import (
	"sort"
	"sync"

	"github.com/sqscope/sqscope/trace"
)

// Counters are what the trace says happened on one QP. The JSON names are
// the workload's ground-truth names where they mean the same thing.
type Counters struct {
	WRs             uint64 `json:"wrs"`
	PostCalls       uint64 `json:"post_calls"`
	Inline          uint64 `json:"inline"`
	Signaled        uint64 `json:"signaled"`
	Doorbells       uint64 `json:"doorbells"`
	BFWrites        uint64 `json:"bf_writes"`
	WQEBBs          uint64 `json:"wqebbs"`
	DMAReadsWQE     uint64 `json:"dma_reads_wqe"`
	DMAReadsPayload uint64 `json:"dma_reads_payload"`
	CQEWrites       uint64 `json:"cqe_writes"`
	ENOMEMSQFull    uint64 `json:"enomem_sq_full"`
	ENOMEMInline    uint64 `json:"enomem_inline"`
	ENOMEMSGE       uint64 `json:"enomem_sge"`
	EINVAL          uint64 `json:"einval"`
	PeakOutstanding uint64 `json:"peak_outstanding"`
	CQEsPolled      uint64 `json:"cqes_polled"`

	ENOMEMUnknown        uint64 `json:"enomem_unknown"`
	OtherErrors          uint64 `json:"other_errors"`
	CQEErrors            uint64 `json:"cqe_errors"`
	FlushedUnsignaled    uint64 `json:"flushed_unsignaled"`
	UnmatchedCQEs        uint64 `json:"unmatched_cqes"`
	Truncated            uint64 `json:"wrs_past_bound"`
	WRAPICalls           uint64 `json:"wr_api_calls"`
	Aborted              uint64 `json:"aborted"`
	LongestUnsignaledRun uint64 `json:"longest_unsignaled_run"`
	MMIOBytes            uint64 `json:"mmio_bytes"`
	DMABytesWQE          uint64 `json:"dma_bytes_wqe"`
	DMABytesPayload      uint64 `json:"dma_bytes_payload"`
	InlineBytes          uint64 `json:"inline_bytes"`
	Polls                uint64 `json:"polls"`
	EmptyPolls           uint64 `json:"empty_polls"`
	PostRecvs            uint64 `json:"post_recvs"`
	InlineSGEs           uint64 `json:"inline_sges"`        // SGEs the CPU copied instead of the NIC reading
	BaselineWQEBytes     uint64 `json:"baseline_wqe_bytes"` // WQE bytes had no WR been inline
}

// QP is one send queue in a snapshot.
type QP struct {
	PID          uint32 `json:"pid"`
	QPNum        uint32 `json:"qp_num"`
	Type         string `json:"qp_type"`
	MaxSendWR    uint32 `json:"max_send_wr"`
	MaxInline    uint32 `json:"max_inline_data"`
	MaxSendSGE   uint32 `json:"max_send_sge"`
	SigAll       bool   `json:"sq_sig_all"`
	CapsKnown    bool   `json:"caps_known"`
	CapsInferred bool   `json:"caps_inferred"`
	Destroyed    bool   `json:"destroyed"`
	Outstanding  uint64 `json:"outstanding"`
	Counters
	PCIe Savings `json:"pcie"`
}

// Snapshot is a copy of the analyzer's state.
type Snapshot struct {
	Events         uint64         `json:"events"`
	Lost           uint64         `json:"lost_events"`
	FirstNS        uint64         `json:"first_ns"`
	LastNS         uint64         `json:"last_ns"`
	QPs            []QP           `json:"qps"`
	Total          Counters       `json:"total"`
	TotalPCIe      Savings        `json:"total_pcie"`
	Attach         []trace.Attach `json:"probes,omitempty"`
	Exited         bool           `json:"target_exited"`
	ExitCode       int32          `json:"exit_code"`
	UnknownQPPosts uint64         `json:"posts_on_unknown_qps"`
}

type qpKey struct {
	pid   uint32
	qpNum uint32
}

type cqKey struct {
	pid uint32
	cq  uint64
}

type cqState struct {
	polls, empty, cqes uint64
}

// Options tune the model to the target.
type Options struct {
	BF BFConfig
}

// Analyzer consumes events; Snapshot may be called from another goroutine.
type Analyzer struct {
	mu    sync.Mutex
	opts  Options
	qps   map[qpKey]*sq
	order []qpKey
	cqs   map[cqKey]*cqState
	snap  Snapshot
}

// New returns an empty analyzer.
func New(opts Options) *Analyzer {
	return &Analyzer{opts: opts, qps: map[qpKey]*sq{}, cqs: map[cqKey]*cqState{}}
}

func (a *Analyzer) qp(pid, num uint32, addr uint64, now uint64) *sq {
	k := qpKey{pid, num}
	q := a.qps[k]
	if q == nil {
		q = &sq{key: k, qp: addr, firstNS: now}
		a.qps[k] = q
		a.order = append(a.order, k)
	}
	return q
}

func (a *Analyzer) cq(pid uint32, cq uint64) *cqState {
	k := cqKey{pid, cq}
	c := a.cqs[k]
	if c == nil {
		c = &cqState{}
		a.cqs[k] = c
	}
	return c
}

// Ingest applies one event.
func (a *Analyzer) Ingest(ev trace.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ingest(ev)
}

// IngestAll applies events in order under one lock.
func (a *Analyzer) IngestAll(evs []trace.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ev := range evs {
		a.ingest(ev)
	}
}

func (a *Analyzer) ingest(ev trace.Event) {
	h := ev.Hdr()
	a.snap.Events++
	if a.snap.FirstNS == 0 || (h.TimeNS != 0 && h.TimeNS < a.snap.FirstNS) {
		a.snap.FirstNS = h.TimeNS
	}
	if h.TimeNS > a.snap.LastNS {
		a.snap.LastNS = h.TimeNS
	}
	switch e := ev.(type) {
	case *trace.QPCreate:
		q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
		q.qp = e.QP
		q.typ = e.Type
		q.caps = e.Caps
		q.capsKnown = true
		q.sendCapsInferred = false
		q.sigAll = e.SigAll
		q.sendCQ = e.SendCQ
		q.created = e.TimeNS
		q.destroyed = false
	case *trace.QPDestroy:
		if q, ok := a.qps[qpKey{e.PID, e.QPNum}]; ok && e.Ret == 0 {
			q.destroyed = true
		}
	case *trace.QPModify:
		a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
	case *trace.Post:
		q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
		if !q.capsKnown {
			a.snap.UnknownQPPosts++
		}
		q.post(e, a.opts.BF)
		q.lastPost = e.TimeNS
		q.lastNS = e.TimeNS
	case *trace.Poll:
		c := a.cq(e.PID, e.CQ)
		c.polls++
		c.empty += e.EmptyBefore
		if e.Ret > 0 {
			c.cqes += uint64(e.Ret)
		} else if e.Ret == 0 {
			c.empty++
		}
		for i := range e.WCs {
			wc := &e.WCs[i]
			if wc.Opcode >= wcRecv {
				continue
			}
			q := a.qp(e.PID, wc.QPNum, 0, e.TimeNS)
			q.complete(wc)
			q.lastPoll = e.TimeNS
		}
	case *trace.EmptyPolls:
		c := a.cq(e.PID, e.CQ)
		c.polls += e.Count
		c.empty += e.Count
	case *trace.PostRecv:
		q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
		q.c.PostRecvs += uint64(e.Accepted)
	case *trace.Lost:
		a.snap.Lost += e.Count
	case *trace.Exit:
		a.snap.Exited = true
		a.snap.ExitCode = e.Code
	case *trace.Attach:
		a.snap.Attach = append(a.snap.Attach, *e)
	}
}

// Snapshot returns a copy of the current state; it costs O(QPs).
func (a *Analyzer) Snapshot() Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.snap
	s.Attach = append([]trace.Attach(nil), a.snap.Attach...)
	s.QPs = make([]QP, 0, len(a.order))
	for _, k := range a.order {
		q := a.qps[k]
		c := q.c
		c.CQEWrites = c.Signaled + c.FlushedUnsignaled
		if q.sendCQ != 0 {
			if cs, ok := a.cqs[cqKey{k.pid, q.sendCQ}]; ok {
				c.Polls, c.EmptyPolls = cs.polls, cs.empty
			}
		}
		s.QPs = append(s.QPs, QP{
			PID: k.pid, QPNum: k.qpNum, Type: q.typ.String(),
			MaxSendWR: q.caps.MaxSendWR, MaxInline: q.caps.MaxInlineData, MaxSendSGE: q.caps.MaxSendSGE,
			SigAll: q.sigAll, CapsKnown: q.capsKnown, CapsInferred: q.sendCapsInferred,
			Destroyed: q.destroyed, Outstanding: q.outstanding(), Counters: c, PCIe: savings(&c),
		})
		addCounters(&s.Total, &c)
	}
	// polls belong to CQs, which QPs may share: count each CQ once
	s.Total.Polls, s.Total.EmptyPolls = 0, 0
	for _, cs := range a.cqs {
		s.Total.Polls += cs.polls
		s.Total.EmptyPolls += cs.empty
	}
	s.TotalPCIe = savings(&s.Total)
	sort.SliceStable(s.QPs, func(i, j int) bool {
		if s.QPs[i].PID != s.QPs[j].PID {
			return s.QPs[i].PID < s.QPs[j].PID
		}
		return s.QPs[i].QPNum < s.QPs[j].QPNum
	})
	return s
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
	t.OtherErrors += c.OtherErrors
	t.CQEErrors += c.CQEErrors
	t.FlushedUnsignaled += c.FlushedUnsignaled
	t.UnmatchedCQEs += c.UnmatchedCQEs
	t.Truncated += c.Truncated
	t.WRAPICalls += c.WRAPICalls
	t.Aborted += c.Aborted
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
	t.InlineSGEs += c.InlineSGEs
	t.BaselineWQEBytes += c.BaselineWQEBytes
}
