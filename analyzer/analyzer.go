package analyzer

import (
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

	ENOMEMUnknown uint64 `json:"enomem_unknown"`
	// ENOMEM: post calls that failed with ENOMEM, whatever the cause
	// (counters mode counts them in the kernel, which cannot tell it).
	ENOMEM            uint64 `json:"enomem"`
	OtherErrors       uint64 `json:"other_errors"`
	CQEErrors         uint64 `json:"cqe_errors"`
	FlushedUnsignaled uint64 `json:"flushed_unsignaled"`
	UnmatchedCQEs     uint64 `json:"unmatched_cqes"`
	Truncated         uint64 `json:"wrs_past_bound"`
	WRAPICalls        uint64 `json:"wr_api_calls"`
	Aborted           uint64 `json:"aborted"`
	// EdgePosts are post calls traced at a sentinel window's end, while
	// its probes were being removed: counted as calls and WRs, kept out
	// of the occupancy (their completions may not be seen).
	EdgePosts            uint64 `json:"edge_post_calls,omitempty"`
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
	// WQE fetches and the occupancy histogram need per-call events.
	CountersOnly bool `json:"counters_only,omitempty"`
	// KernelSQ: counters mode kept the QP's send queue in the kernel, so
	// its occupancy, peak, unsignaled runs, send completions and ENOMEM
	// causes are measured (kernsq.go); OccupancyNotMeasured says why a
	// counters-mode QP's are not, when the kernel's model cannot be used.
	KernelSQ             bool   `json:"-"`
	OccupancyNotMeasured string `json:"occupancy_not_measured,omitempty"`
	Destroyed            bool   `json:"destroyed"`
	SendCQ               uint64 `json:"send_cq"`
	SendCQGen            uint64 `json:"send_cq_gen"`
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
	// OutstandingUpperBound: its send CQ's polls returned completions
	// past what a poll record holds (Cuts.CQEsPastBound), which retired
	// WRs the model may still count: Outstanding, the peak and the
	// occupancy are upper bounds (with OutstandingLowerBound too,
	// neither), its CQEs polled a lower bound.
	OutstandingUpperBound bool `json:"outstanding_upper_bound,omitempty"`
	// PostsNotTraced: its completions came with no post call ever traced
	// on it, the post probes in place (diagnosis posts_not_traced): its
	// WQEs are written directly (direct verbs), so its send figures (WRs,
	// occupancy, inline, signaled, doorbells, PCIe) are not seen, only its
	// completions.
	PostsNotTraced bool `json:"posts_not_traced,omitempty"`
	// OutstandingSampledNS: Outstanding is what the sentinel mode's last
	// window measured when it closed, at this time (the occupancy since
	// is not traced); 0 when Outstanding is of now.
	OutstandingSampledNS uint64 `json:"outstanding_sampled_at_ns,omitempty"`
	// Sentinel: the QP was traced in the sentinel mode, whose probes see
	// its calls only in windows: its per-call counts are of those, its
	// refusals all of them (Reported).
	Sentinel bool `json:"sentinel,omitempty"`
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
	// Memory: its send queue's counters read from its process's memory
	// by the sentinel (memsample.go); nil when not read.
	Memory *MemorySQ `json:"memory,omitempty"`
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
	// WhileTraced: the QP was traced only in the sentinel mode's windows,
	// and its rates are over the time it was (SpanNS), while the probes
	// slowed it.
	WhileTraced  bool `json:"while_traced,omitempty"`
	countersOnly bool // CQEs per QP not counted (counters mode)
	postsDirect  bool // no post traced (QP.PostsNotTraced): no span, no post rate
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
	// SQModelCuts: what the counters mode's kernel send-queue model
	// counted past its bounds, in the whole trace (kernsq.go).
	SQModelCuts *SQModelCuts `json:"sq_model_cuts,omitempty"` // nil: nothing cut
	Exited      bool         `json:"target_exited"`
	ExitCode    int32        `json:"exit_code"`
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
	// Sentinel is what the sentinel mode's error-site probes saw
	// (sentinel.go); nil in the other modes.
	Sentinel *Sentinel `json:"sentinel,omitempty"`
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
	// pastBound: completions polls returned past what a poll record
	// holds, recordWCs (cuts.go)
	pastBound uint64
	recordWCs uint64
	// pastRecv: of pastBound, those known to be receives of its only
	// receiving QP, no QP sending to it (cuts.go: pastBoundRecv), which
	// looks among users, the QPs sending or receiving on it as of
	// Analyzer.qpEpoch usersAt
	pastRecv        uint64
	users           []*sq
	usersAt         uint64
	firstNS, lastNS uint64 // first and last poll seen, when polls > 0
	// counted: its polls are the kernel's totals (counters mode), whose
	// times are those of their flushes; createdNS is its create's time
	counted   bool
	createdNS uint64
	// counters mode: its totals at its last flushes (kernsq.go), and
	// the completions of extended polls among its CQEs
	samples []cqSample
	exCQEs  uint64
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
	// Mode is the probes' mode ("counters", "events", "sentinel"; a
	// recording's trace.FileInfo.ProbeMode), "" when not known. In the
	// counters mode every QP shows only what the kernel's totals measure,
	// also one those totals never came for (a QP that only received).
	Mode string
}

// ModeCounters is Options.Mode of a counters-mode trace.
const ModeCounters = "counters"

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
	// or receive CQ is learned (the QPs of a CQ may have changed: excq.go,
	// cuts.go).
	qpEpoch uint64
	// pidProv is the provider of each process's data path (provider.go)
	pidProv map[uint32]*Provider
	// snapModels are the distinct models of a snapshot's QPs (reused)
	snapModels []ProviderModel
	diags      []diagRec
	procs      procs
	snap       Snapshot
	// qpCache holds QPs of qps by number (lookupQP)
	qpCache [qpCacheLen]*sq
	// histQPs counts the QPs given a history, histLen is the most windows
	// each keeps now (histbudget.go)
	histQPs int
	histLen uint64
	// rqsEmpty counts the traced receiving QPs whose RQ is empty (diag_recv.go)
	rqsEmpty int
	// probes placed on the data path's post and poll functions
	// (lateattach.go: completionsNotTraced)
	postProbed, pollProbed bool
	postFailed             bool          // a post probe was not placed
	sentinel               sentinelState // sentinel.go
	version                Version       // version.go
	picked                 []*sq         // the QPs a partial snapshot copies (reused)
	// firstRecorded, while set, takes the first diagnosis recorded
	// (kernsq.go)
	firstRecorded *DiagKind
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
	switch e := ev.(type) { // the bulk of a trace first
	case *trace.Post:
		a.noteEvent(&e.Header)
		a.onPost(e) // sqmodel.go
		return
	case *trace.Poll:
		a.noteEvent(&e.Header)
		a.onPoll(e) // poll.go
		return
	case *trace.End: // not an event of the target's
		a.ended(e)
		return
	}
	a.noteEvent(ev.Hdr())
	switch e := ev.(type) {
	case *trace.QPCreate:
		a.onQPCreate(e) // lifecycle.go
	case *trace.QPDestroy:
		a.qpDestroyed(e) // lifecycle.go
	case *trace.QPModify:
		a.onQPModify(e) // diag_state.go
	case *trace.EmptyPolls:
		a.onEmptyPolls(e) // poll.go
	case *trace.PostRecv:
		a.postRecv(e) // recv.go
	case *trace.QPCounters:
		a.onQPCounters(e) // measured.go
	case *trace.CQCounters:
		a.onCQCounters(e) // measured.go
	case *trace.CQCreate:
		a.cqCreated(e) // lifecycle.go
	case *trace.CQChange:
		a.cqChange(e) // excq.go
	case *trace.SRQCreate, *trace.SRQDestroy:
		a.srqEvent(ev) // lifecycle.go
	case *trace.Attach:
		a.onAttach(e) // lateattach.go
	case *trace.Scan:
		a.onScan(e)
	case *trace.Lost:
		a.onLost(e)
	case *trace.Exit:
		a.onExit(e) // procs.go
	case *trace.Proc:
		a.procs.proc(e) // procs.go
	case *trace.PostFail:
		a.onPostFail(e) // sentinel.go
	case *trace.Window:
		a.onWindow(e) // sample.go
	case *trace.SQSample:
		a.onSQSample(e) // memsample.go
	}
}

// noteEvent counts an event of the target's, at h.
func (a *Analyzer) noteEvent(h *trace.Header) {
	a.snap.Events++
	if a.snap.FirstNS == 0 || (h.TimeNS != 0 && h.TimeNS < a.snap.FirstNS) {
		a.snap.FirstNS = h.TimeNS
	}
	if h.TimeNS > a.snap.LastNS {
		a.snap.LastNS = h.TimeNS
	}
}

// onScan keeps what a memory scan read and found.
func (a *Analyzer) onScan(e *trace.Scan) { a.snap.Scans = append(a.snap.Scans, *e) }

// onLost counts the records the ring lost.
func (a *Analyzer) onLost(e *trace.Lost) { a.snap.Lost += e.Count }

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

// qpCacheLen is how many of the QPs looked up last lookupQP keeps.
const qpCacheLen = 16

// lookupQP is qps[k]. A QP looked up is kept in qpCache, in the entry of
// its number, so that the posts and completions of a few QPs in turn find
// theirs without a map lookup; an entry holds nil or a QP that qps holds
// under its key (newQP and Forget keep it so).
func (a *Analyzer) lookupQP(k qpKey) *sq {
	c := &a.qpCache[k.qpNum%qpCacheLen]
	if q := *c; q != nil && q.key == k {
		return q
	}
	q := a.qps[k]
	if q != nil {
		*c = q
	}
	return q
}

// wcQP finds the QP of a completion.
func (a *Analyzer) wcQP(pid, qpNum uint32, now uint64) *sq {
	q := a.lookupQP(qpKey{pid, qpNum}) // a QP destroyed since its post is still the one of its CQEs
	if q == nil {
		q = a.newQP(pid, qpNum, 0, 0, now)
	}
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
