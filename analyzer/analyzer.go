package analyzer

import (
	"sync"

	"github.com/sqscope/sqscope/ibv"
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

	ENOMEMUnknown uint64 `json:"enomem_unknown"`
	// ENOMEM: post calls that failed with ENOMEM, whatever the cause
	// (counters mode counts them in the kernel, which cannot tell it).
	ENOMEM               uint64 `json:"enomem"`
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
	// EmptyWRBatches are ibv_wr_complete calls that succeeded with no WR
	// seen in their batch: WRs built through ibv_wr_* calls not traced.
	EmptyWRBatches   uint64 `json:"empty_wr_batches"`
	InlineSGEs       uint64 `json:"inline_sges"`        // SGEs the CPU copied instead of the NIC reading
	BaselineWQEBytes uint64 `json:"baseline_wqe_bytes"` // WQE bytes had no WR been inline
	// BeyondModel counts WRs reported accepted that the call's list did not
	// hold or no SQ could: an inconsistent stream, left out of the model.
	BeyondModel uint64 `json:"wrs_beyond_model"`
	// READ and atomic responses the HCA writes into the local SGEs (pcie.go)
	DMAWritesResponse uint64 `json:"dma_writes_response"`
	DMABytesResponse  uint64 `json:"dma_bytes_response"`
	// Opcodes are the accepted WRs by opcode.
	Opcodes OpcodeMix `json:"opcodes"`
	// NotRTS counts posts refused because the QP was not in RTS (ENOMEM
	// from ibv_post_send, not in ENOMEMSGE; EINVAL from ibv_wr_complete,
	// in EINVAL too).
	NotRTS uint64 `json:"not_rts"`
	// RecvCQEs are the receive completions of this QP polled.
	RecvCQEs uint64 `json:"recv_cqes_polled"`
	Cuts
}

// QP is one send queue in a snapshot.
type QP struct {
	PID        uint32 `json:"pid"`
	Comm       string `json:"comm,omitempty"` // its process's command name, when known
	QPNum      uint32 `json:"qp_num"`
	Type       string `json:"qp_type"`
	MaxSendWR  uint32 `json:"max_send_wr"`
	MaxInline  uint32 `json:"max_inline_data"`
	MaxSendSGE uint32 `json:"max_send_sge"`
	SigAll     bool   `json:"sq_sig_all"`
	// Gen is the QP's generation (0: created before tracing began, or
	// a recording without generations); a number can name several QPs
	// one after the other, each a QP of its own here.
	Gen          uint64 `json:"gen"`
	CapsKnown    bool   `json:"caps_known"`
	CapsInferred bool   `json:"caps_inferred"`
	// CountersOnly: totals kept in the kernel (--mode counters); BlueFlame,
	// WQE fetches, occupancy and the ENOMEM cause need per-call events.
	CountersOnly bool   `json:"counters_only,omitempty"`
	Destroyed    bool   `json:"destroyed"`
	SendCQ       uint64 `json:"send_cq"`
	SendCQGen    uint64 `json:"send_cq_gen"`
	// Provider is the verbs provider the QP runs on (mlx5, sim, rxe or
	// unknown), ProviderLib the file of its post_send when its create
	// was seen, and Model the model its HCA figures and ENOMEM causes come
	// from ("mlx5 model"; empty when none applies, and those figures are
	// then left out: provider.go, ProviderNotes).
	Provider    string `json:"provider"`
	ProviderLib string `json:"provider_lib,omitempty"`
	Model       string `json:"model,omitempty"`
	// CauseBasis says what its ENOMEM causes rest on where not on the
	// provider's own checks: CauseInferred, the caps the QP reports
	// (provider_generic.go); empty otherwise.
	CauseBasis  string `json:"cause_basis,omitempty"`
	Outstanding uint64 `json:"outstanding"`
	// Found says how the QP became known (FoundCreate, FoundMemory,
	// FoundPost, ...); StateFound is its state when the memory scan found
	// it (empty otherwise).
	Found      string `json:"found"`
	StateFound string `json:"state_found,omitempty"`
	// OutstandingLowerBound: the QP was not created while tracing and no
	// completion has yet proved the WRs it had outstanding before the
	// attach retired: Outstanding, the peak and the occupancy count only
	// WRs posted since. ExactSinceNS is when the model became exact (0:
	// not yet, or it always was). PreAttachCQEs counts completions of
	// WRs posted before the attach; RetiredUnseen WRs the depth proved
	// retired whose completions were not seen (lateattach.go).
	OutstandingLowerBound bool `json:"outstanding_lower_bound"`
	// CompletionsNotTraced: posts were probed and no poll function was,
	// so no completion can be seen: Outstanding and the occupancy count
	// WRs posted, not WRs outstanding, and the reports leave them out.
	CompletionsNotTraced bool   `json:"completions_not_traced,omitempty"`
	ExactSinceNS         uint64 `json:"exact_since_ns,omitempty"`
	// ExactSinceS is ExactSinceNS in seconds into the trace.
	ExactSinceS   float64 `json:"exact_since_s,omitempty"`
	PreAttachCQEs uint64  `json:"pre_attach_cqes,omitempty"`
	// WRIDsRepeat: the QP's WRs share wr_ids, so no completion tells a
	// pre-attach WR from one posted since: the occupancy stays a lower
	// bound.
	WRIDsRepeat   bool   `json:"wr_ids_repeat,omitempty"`
	RetiredUnseen uint64 `json:"retired_unseen,omitempty"`
	Counters
	// SignalInterval is the most common unsignaled run plus one (the
	// application's signal interval), 0 when no WR was signaled;
	// SignalIntervalLongest is the longest run a signaled WR ended, plus one.
	SignalInterval        uint64    `json:"signal_interval_typical"`
	SignalIntervalLongest uint64    `json:"signal_interval_longest"`
	Occupancy             Occupancy `json:"occupancy"`
	Rates                 Rates     `json:"rates"`
	PCIe                  Savings   `json:"pcie"`
	// History is the occupancy over time, one sample per
	// Snapshot.HistoryStepNS of trace time from HistoryStartNS, oldest
	// first; left out of JSON reports.
	History        []OccSample `json:"-"`
	HistoryStartNS uint64      `json:"-"`
	recvUntraced   bool        // receives not traced: post_recvs left out of JSON
	Recv           *RecvQueue  `json:"recv,omitempty"` // its receive queue (recv.go); nil when not traced
}

// Rates are averages over the time the QP (or, in the total, the trace) was
// active. Polls belong to CQs: a QP's poll figures are its send CQ's.
type Rates struct {
	SpanNS         uint64  `json:"span_ns"`
	WRsPerSec      float64 `json:"post_wrs_per_s"`
	PostsPerSec    float64 `json:"post_calls_per_s"`
	PollsPerSec    float64 `json:"polls_per_s"`
	CQEsPerSec     float64 `json:"cqes_per_s"`
	PollsPerCQE    float64 `json:"polls_per_cqe"`
	WRsPerDoorbell float64 `json:"wrs_per_doorbell"`
	countersOnly   bool    // CQEs per QP not counted (counters mode)
}

// Snapshot is a copy of the analyzer's state.
type Snapshot struct {
	Events     uint64         `json:"events"`
	Lost       uint64         `json:"lost_events"`
	FirstNS    uint64         `json:"first_ns"`
	LastNS     uint64         `json:"last_ns"`
	QPs        []QP           `json:"qps"`
	Total      Totals         `json:"total"`
	TotalRates Rates          `json:"total_rates"`
	TotalPCIe  Savings        `json:"total_pcie"`
	Attach     []trace.Attach `json:"probes,omitempty"`
	// Scans are what the memory scans of processes traced after they
	// started read and found, one per process (-p: the target; -a: each
	// process running when it began or found later), in scan order.
	Scans []trace.Scan `json:"memory_scans,omitempty"`
	// Processes are the processes the trace named: the target, those
	// followed from it, or those of a host-wide trace; exited ones stay.
	Processes []Process `json:"processes,omitempty"`
	// CQs are the completion queues seen, one per lifetime, by their
	// calls and polls.
	CQs  []CQ  `json:"cqs,omitempty"`
	SRQs []SRQ `json:"srqs,omitempty"`
	// SRQRecvs counts receive WRs posted to SRQs (ibv_post_srq_recv, of
	// no QP), nil when not traced; ReceivesNotTraced says what is not.
	SRQRecvs          *uint64 `json:"srq_recvs,omitempty"`
	ReceivesNotTraced string  `json:"receives_not_traced,omitempty"`
	Exited            bool    `json:"target_exited"`
	ExitCode          int32   `json:"exit_code"`
	// ExitSignal is the signal that killed the target (ExitCode is then
	// -1), 0 when it exited.
	ExitSignal int32 `json:"exit_signal,omitempty"`
	// Ended says why the trace ended, EndedOnError whether on an error
	// (empty while it runs).
	Ended        string `json:"ended,omitempty"`
	EndedOnError bool   `json:"ended_on_error,omitempty"`
	// Cut is where every probe stopped when the trace ended while the
	// target ran on (ending.go); nil when it was not cut.
	Cut            *Cut   `json:"cut,omitempty"`
	UnknownQPPosts uint64 `json:"posts_on_unknown_qps"`
	// Diagnoses, newest first (by last occurrence).
	Diagnoses        []Diagnosis `json:"diagnoses"`
	DiagnosesDropped uint64      `json:"diagnoses_dropped,omitempty"`
	HistoryStepNS    uint64      `json:"-"`
	// Version is the analyzer's when it was taken (version.go).
	Version Version `json:"-"`
	// Partial: the snapshot holds some QPs only (SnapshotOptions.QPs).
	Partial bool `json:"-"`
}

type qpKey struct {
	pid   uint32
	qpNum uint32
}

type cqKey struct {
	pid uint32
	cq  uint64
}

// cqState is one CQ lifetime (lifecycle.go); what its calls said and
// its extended polls are kept as excq.go says.
type cqState struct {
	pid                uint32
	addr, gen          uint64
	cqe                uint32 // its depth, from its create or last resize
	replaced           bool
	polls, empty, cqes uint64
	recvCQEs           uint64 // receive completions of ibv_poll_cq (recv.go)
	firstNS, lastNS    uint64 // first and last poll seen, when polls > 0
	// counted: its polls are the kernel's totals (counters mode), whose
	// times are those of their flushes; createdNS is its create's time
	counted   bool
	createdNS uint64
	cqCalls
	cqPending // diag_state.go
}

// notePolls counts n polls at time now.
func (c *cqState) notePolls(n, now uint64) {
	if n == 0 {
		return
	}
	if c.polls == 0 {
		c.firstNS = now
	}
	c.polls += n
	c.lastNS = max(c.lastNS, now)
}

// Options tune the model to the target.
type Options struct {
	BF BFConfig
	// HistoryStepNS and HistoryLen shape the occupancy history: one sample
	// per step of trace time, the last len samples. Zero means the
	// defaults; a negative HistoryLen keeps no history.
	HistoryStepNS uint64
	HistoryLen    int
	// HistoryBytes bounds the memory of all QPs' histories together
	// (histbudget.go); zero means DefaultHistoryBytes.
	HistoryBytes int
	// OnDiagnosis, when set, is called with each diagnosis the first time
	// it is made (later occurrences only bump its count). It runs inside
	// Ingest, under the analyzer's lock: it must not call the Analyzer.
	OnDiagnosis func(Diagnosis)
	// Clock ties event times to the wall clock, for the wall-clock times
	// of diagnoses; zero when unknown.
	Clock trace.WallAnchor
}

// Analyzer consumes events; Snapshot may be called from another goroutine.
type Analyzer struct {
	mu     sync.Mutex
	opts   Options
	qps    map[qpKey]*sq  // the latest QP of each number (lifecycle.go)
	qpGens map[objKey]*sq // QPs by generation
	all    []*sq          // every QP lifetime, in the order first seen
	// ordered is all by pid and QP number (qpOrder)
	ordered []*sq
	cqs     map[cqKey]*cqState
	cqGens  map[objKey]*cqState
	allCQs  []*cqState
	srqs    []*srqState
	recv    recvTrace // which receive figures the trace has, SRQ receives (recv.go)
	// qpEpoch changes whenever a QP lifetime starts or ends or its send
	// CQ is learned (the QPs of a CQ may have changed: excq.go).
	qpEpoch uint64
	// pidProv is the provider of each process's data path (provider.go)
	pidProv map[uint32]*Provider
	// snapModels are the distinct models of a snapshot's QPs (reused)
	snapModels []ProviderModel
	diags      []diagRec
	procs      procs
	snap       Snapshot
	// the QP of the last WC, to skip the map lookup for runs of WCs of one QP
	lastWCKey qpKey
	lastWCQ   *sq
	// histQPs counts the QPs given a history, histLen is the most windows
	// each keeps now (histbudget.go)
	histQPs int
	histLen uint64
	// rqsEmpty counts the traced receiving QPs whose RQ is empty (diag_recv.go)
	rqsEmpty int
	// probes placed on the data path's post and poll functions
	// (lateattach.go: completionsNotTraced)
	postProbed, pollProbed bool
	version                Version // version.go
	picked                 []*sq   // the QPs a partial snapshot copies (reused)
}

// New returns an empty analyzer.
func New(opts Options) *Analyzer {
	if opts.HistoryStepNS == 0 {
		opts.HistoryStepNS = DefaultHistoryStepNS
	}
	switch {
	case opts.HistoryLen == 0:
		opts.HistoryLen = DefaultHistoryLen
	case opts.HistoryLen < 0:
		opts.HistoryLen = 0
	}
	if opts.HistoryBytes <= 0 {
		opts.HistoryBytes = DefaultHistoryBytes
	}
	a := &Analyzer{opts: opts, qps: map[qpKey]*sq{}, qpGens: map[objKey]*sq{},
		cqs: map[cqKey]*cqState{}, cqGens: map[objKey]*cqState{}}
	a.snap.HistoryStepNS = opts.HistoryStepNS
	a.version.analyzer = analyzers.Add(1)
	return a
}

// Ingest applies one event.
func (a *Analyzer) Ingest(ev trace.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.changed()
	a.ingest(ev)
}

// IngestAll applies events in order under one lock.
func (a *Analyzer) IngestAll(evs []trace.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.changed()
	for _, ev := range evs {
		a.ingest(ev)
	}
}

// Outstanding returns the WRs a QP has outstanding by the model, and
// whether the QP is known.
func (a *Analyzer) Outstanding(pid, qpNum uint32) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	q := a.qps[qpKey{pid, qpNum}]
	if q == nil {
		return 0, false
	}
	return q.outstanding(), true
}

func (a *Analyzer) ingest(ev trace.Event) {
	if e, ok := ev.(*trace.End); ok { // not an event of the target's
		a.ended(e)
		return
	}
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
		q := a.qpCreated(e)
		q.qp = e.QP
		q.typ = e.Type
		q.caps = e.Caps
		q.capsKnown = e.Via != trace.ViaMemory // a QP in memory: caps unknown
		q.late = !q.capsKnown
		q.found = FoundCreate
		if q.late {
			q.found, q.stateFound = FoundMemory, ibv.QPStateName(e.State)
		}
		q.sendCapsInferred = false
		q.createdNS = e.TimeNS
		q.sigAll = e.SigAll
		q.stateCreated()
		q.sendCQ = e.SendCQ
		q.cq = nil
		if e.SendCQ != 0 {
			q.cq = a.cq(e.PID, e.SendCQ)
		}
		a.qpRecvCreated(q, e)
		a.qpCreateProvider(q, e)
		a.qpEpoch++
		a.checkPeakOverCaps(q, e.TimeNS)
	case *trace.QPDestroy:
		a.qpDestroyed(e)
	case *trace.CQChange:
		a.cqChange(e)
	case *trace.QPModify:
		q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
		q.noteFound(FoundModify)
		q.stateModified(e)
	case *trace.Post:
		q := a.qp(e.PID, e.QPNum, e.QP, e.TimeNS)
		q.noteFound(FoundPost)
		if !q.capsKnown {
			a.snap.UnknownQPPosts++
		}
		a.resolveProvider(q)
		cause, n := q.post(e, a.opts.BF)
		q.noteCuts(e, n)
		q.lastPost = e.TimeNS
		q.lastNS = max(q.lastNS, e.TimeNS)
		a.afterPost(q, e, cause, n)
	case *trace.Poll:
		c := a.cq(e.PID, e.CQ)
		c.notePolls(1+e.EmptyBefore, e.TimeNS)
		c.empty += e.EmptyBefore
		if e.Ret > 0 {
			c.cqes += uint64(e.Ret)
		} else if e.Ret == 0 {
			c.empty++
		}
		if e.Ret == 0 || e.EmptyBefore > 0 {
			a.cqEmpty(c, e.TimeNS)
		}
		var last *sq
		// a poll returns Ret completions: WCs past them (a damaged
		// record) are none
		for i := range min(len(e.WCs), max(int(e.Ret), 0)) {
			wc := &e.WCs[i]
			var q *sq
			if e.Ex {
				// no QP number or opcode: found by the wr_id
				if q = a.exWCQP(c, wc); q == nil {
					continue
				}
			} else {
				if ibv.IsRecvWC(wc.Opcode) {
					a.recvWC(e.PID, c, wc, e.TimeNS)
					continue
				}
				q = a.wcQP(e.PID, wc.QPNum, e.TimeNS)
			}
			if q.sendCQ == 0 {
				q.sendCQ, q.cq = e.CQ, c // attached late: learn the send CQ from its CQEs
				a.qpEpoch++
			}
			q.noteFound(FoundCompletion)
			q.complete(wc, e.TimeNS)
			a.notePending(q, e.TimeNS)
			if wc.Status == ibv.WCRNRRetryExcErr {
				a.rnrExceeded(q, e.TimeNS)
			} else if wc.Status == 0 {
				q.starved = false
			}
			if q.c.UnmatchedCQEs != q.notTracedNoted[0] {
				a.checkNotTraced(q, e.TimeNS)
			}
			q.lastPoll = e.TimeNS
			q.lastNS = max(q.lastNS, e.TimeNS)
			q.hist.note(e.TimeNS, q.outstanding(), 0, 1)
			if last != nil && last != q {
				a.checkTrend(last, e.TimeNS)
			}
			last = q
		}
		if last != nil {
			a.checkTrend(last, e.TimeNS)
		}
	case *trace.EmptyPolls:
		c := a.cqOfGen(e.PID, e.CQ, e.Gen)
		c.notePolls(e.Count, e.TimeNS)
		c.empty += e.Count
		a.cqEmpty(c, e.TimeNS)
	case *trace.CQCounters:
		// totals since attach (counters mode): they replace, not add
		c := a.cqOfGen(e.PID, e.CQ, e.Gen)
		if e.Polls > c.polls {
			c.notePolls(e.Polls-c.polls, e.TimeNS)
		}
		c.polls, c.cqes, c.empty = e.Polls, e.CQEs, e.Empty
		c.counted, c.lastNS = true, max(c.lastNS, e.TimeNS)
		a.recv.kernel = true
	case *trace.PostRecv:
		a.postRecv(e)
	case *trace.QPCounters:
		// totals since attach, kept in the kernel: they replace, not add
		q := a.qpOfGen(e.PID, e.QPNum, e.QP, e.Gen, e.TimeNS)
		q.noteFound(FoundCounters)
		q.countersOnly = true
		a.countedRecvs(q, e)
		q.c.PostCalls, q.c.WRs, q.c.Inline, q.c.Signaled = e.PostCalls, e.WRs, e.Inline, e.Signaled
		if q.sigAll { // the kernel counts IBV_SEND_SIGNALED; sq_sig_all signals every WR
			q.c.Signaled = e.WRs
		}
		q.c.Doorbells, q.c.EINVAL, q.c.ENOMEM = e.Doorbells, e.EINVAL, e.ENOMEM
		q.c.OtherErrors = e.Errors - min(e.Errors, e.ENOMEM+e.EINVAL)
		q.c.InlineBytes, q.c.DMABytesPayload, q.c.DMAReadsPayload = e.InlineBytes, e.PayloadBytes, e.PayloadSGEs
		q.c.Cuts = Cuts{SGECutWRs: e.SGECutWRs, SGEsNotSummed: e.SGEsNotSummed, WalkCappedPosts: e.WalkCappedPosts}
		if e.TimeNS > q.lastNS {
			q.lastNS = e.TimeNS
		}
	case *trace.Lost:
		a.snap.Lost += e.Count
	case *trace.Exit:
		if a.procs.exit(e) {
			a.snap.Exited = true
			a.snap.ExitCode, a.snap.ExitSignal = e.Code, e.Signal
		}
	case *trace.Proc:
		a.procs.proc(e)
	case *trace.Attach:
		a.snap.Attach = append(a.snap.Attach, *e)
		a.recvAttach(e)
		a.noteAttach(e)
		a.noteProbe(e)
	case *trace.Scan:
		a.snap.Scans = append(a.snap.Scans, *e)
	case *trace.CQCreate:
		a.cqCreated(e)
	case *trace.SRQCreate, *trace.SRQDestroy:
		a.srqEvent(ev)
	}
}

// countedSpan is the span of totals kept in the kernel (counters mode), of
// a QP or CQ, up to lastNS: they began at its create, when the trace saw
// it (createdNS), else at the trace's first event (the kernel counts from
// attach).
func countedSpan(createdNS, traceFirst, lastNS uint64) uint64 {
	start := createdNS
	if start == 0 {
		start = traceFirst
	}
	return lastNS - min(start, lastNS)
}

// wcQP finds the QP of a completion, remembering the last one.
func (a *Analyzer) wcQP(pid, qpNum uint32, now uint64) *sq {
	k := qpKey{pid, qpNum}
	if a.lastWCQ != nil && a.lastWCKey == k {
		return a.lastWCQ
	}
	q := a.qps[k] // a QP destroyed since its post is still the one of its CQEs
	if q == nil {
		q = a.newQP(pid, qpNum, 0, 0, now)
	}
	a.lastWCKey, a.lastWCQ = k, q
	return q
}

func perSec(n, spanNS uint64) float64 {
	if spanNS == 0 {
		return 0
	}
	return float64(n) * 1e9 / float64(spanNS)
}

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
