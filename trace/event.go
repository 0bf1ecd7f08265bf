// Package trace defines the event model every other sqscope package speaks:
// what the probes saw on the verbs data path, decoded and typed, plus the
// recording file format that stores it.
//
// Times are CLOCK_MONOTONIC nanoseconds as read by bpf_ktime_get_ns (or
// clock_gettime(CLOCK_MONOTONIC) in user space); they compare across CPUs and
// processes of one boot, never across machines.
package trace

import (
	"fmt"

	"github.com/sqscope/sqscope/ibv"
)

// Event is one thing the tracer saw. Use a type switch on the concrete types
// below; every one of them embeds Header.
type Event interface {
	Hdr() *Header
	Kind() Kind
}

// Kind numbers the event types. The values are stored in recordings: never
// renumber, only append.
type Kind uint8

const (
	KindQPCreate   Kind = 1
	KindQPDestroy  Kind = 2
	KindQPModify   Kind = 3
	KindPost       Kind = 4
	KindPoll       Kind = 5
	KindEmptyPolls Kind = 6
	KindPostRecv   Kind = 7
	KindLost       Kind = 8
	KindExit       Kind = 9
	KindAttach     Kind = 10
	KindQPCounters Kind = 11
	KindCQCounters Kind = 12
	KindCQCreate   Kind = 13
	KindSRQCreate  Kind = 14
	KindSRQDestroy Kind = 15
	KindEnd        Kind = 16
	KindCQChange   Kind = 17
	KindProc       Kind = 18
	KindScan       Kind = 19
	KindPostFail   Kind = 20
	KindWindow     Kind = 21
	KindSQSample   Kind = 22
)

var kindNames = map[Kind]string{
	KindQPCreate: "qp_create", KindQPDestroy: "qp_destroy", KindQPModify: "qp_modify",
	KindPost: "post", KindPoll: "poll", KindEmptyPolls: "empty_polls",
	KindPostRecv: "post_recv", KindLost: "lost", KindExit: "exit",
	KindAttach: "attach", KindQPCounters: "qp_counters", KindCQCounters: "cq_counters",
	KindCQCreate: "cq_create", KindSRQCreate: "srq_create", KindSRQDestroy: "srq_destroy", KindEnd: "end",
	KindCQChange: "cq_change", KindProc: "proc", KindScan: "scan",
	KindPostFail: "post_fail", KindWindow: "window", KindSQSample: "sq_sample",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Header is common to every event.
type Header struct {
	TimeNS uint64 // CLOCK_MONOTONIC ns when the call returned (or happened)
	PID    uint32 // thread group id of the traced process
	TID    uint32 // thread id
}

func (h *Header) Hdr() *Header { return h }

// QPType is enum ibv_qp_type for the types sqscope models.
type QPType uint8

const (
	QPTypeRC      QPType = ibv.QPTRC
	QPTypeUC      QPType = ibv.QPTUC
	QPTypeUD      QPType = ibv.QPTUD
	QPTypeRawPkt  QPType = ibv.QPTRawPacket
	QPTypeXRCSend QPType = ibv.QPTXRCSend
	QPTypeDriver  QPType = ibv.QPTDriver
)

func (t QPType) String() string {
	switch t {
	case QPTypeRC, QPTypeUC, QPTypeUD, QPTypeRawPkt, QPTypeXRCSend:
		return ibv.QPTypeName(uint8(t))
	case 0: // its create was not seen
		return "unknown"
	}
	return fmt.Sprintf("type%d", uint8(t))
}

// Caps are the capabilities a QP reports after creation (struct ibv_qp_cap),
// which may exceed what the application asked for.
type Caps struct {
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// Generations. A QP, CQ or SRQ is one object from its create to its
// destroy; its generation (Gen fields) is its place in the creation
// sequence of the objects the tracer saw: 1, 2, ... An address or a QP
// number used again by a new object comes with a new generation. 0 means
// not known: an object created before tracing began, or a recording made
// before generations were recorded.

// QPCreate: a QP was created and its caps are known.
type QPCreate struct {
	Header
	QP     uint64 // address of struct ibv_qp in the target (its identity there)
	QPNum  uint32
	Type   QPType
	SigAll bool
	SendCQ uint64
	RecvCQ uint64
	Caps   Caps
	// Via names the call that revealed the QP, e.g. "ibv_create_qp" or
	// "sqsim_create_qp", or ViaMemory for a QP that existed before the
	// trace and was found in the target's memory (caps unknown).
	Via string
	Gen uint64
	// Lib is the file that holds the QP's post_send, the provider's
	// library (e.g. libmlx5.so.1 or librxe-rdmav34.so): which provider's
	// rules the QP follows. Empty when not known.
	Lib string
	// State is the QP's state (enum ibv_qp_state) when it was found: 0
	// (RESET) for a create, what memory said for ViaMemory, the last
	// state a modify set for Window.
	State int32
	// Window says the QP was created before a flight recording's window
	// (FileInfo.Flight) and is re-created at its start: its caps are the
	// create's, but what it had outstanding then is not known.
	Window bool `json:",omitempty"`
}

// ViaMemory is the Via of a QP found by the memory scan of a running
// process.
const ViaMemory = "memory"

func (*QPCreate) Kind() Kind { return KindQPCreate }

// QPDestroy: a QP was destroyed (Ret 0), which ends its life.
type QPDestroy struct {
	Header
	QP    uint64
	QPNum uint32
	Ret   int32
	Gen   uint64
}

func (*QPDestroy) Kind() Kind { return KindQPDestroy }

// QPModify: ibv_modify_qp on a QP. State is the requested state when the
// attribute mask carried IBV_QP_STATE, else -1.
type QPModify struct {
	Header
	QP    uint64
	QPNum uint32
	State int32
	Ret   int32
}

func (*QPModify) Kind() Kind { return KindQPModify }

// API says which posting interface a Post came through.
type API uint8

const (
	APIPostSend API = 0 // ibv_post_send with a WR list
	APIWR       API = 1 // ibv_wr_start ... ibv_wr_complete
)

func (a API) String() string {
	if a == APIWR {
		return "wr"
	}
	return "post_send"
}

// WR is one work request as the application handed it over.
type WR struct {
	ID     uint64
	Opcode uint8  // enum ibv_wr_opcode
	Flags  uint32 // enum ibv_send_flags
	NumSGE uint32
	Bytes  uint32 // sum of the SGE lengths, or the inline length on the wr API
	// SGEsNotSummed counts SGEs (or inline buffers) of the WR past the
	// tracer's SGE bound: their lengths are not in Bytes, which is then a
	// lower bound. Saturates at 255.
	SGEsNotSummed uint8
}

// Post is one call that posts send WRs: ibv_post_send, or a whole
// ibv_wr_start..ibv_wr_complete batch (one doorbell at most).
type Post struct {
	Header
	QP    uint64
	QPNum uint32
	API   API
	WRs   []WR
	// Truncated counts WRs of the list past the tracer's bound: seen to exist
	// but not recorded. Never silently dropped.
	Truncated uint32
	Ret       int32  // 0 or a positive errno (ENOMEM, EINVAL, ...)
	Accepted  uint32 // WRs of the list the provider took (index of *bad_wr)
	EntryNS   uint64 // when the call was entered; 0: not recorded (see --call-times)
	Aborted   bool   // wr API: ibv_wr_abort instead of ibv_wr_complete
	// WalkCapped says the list was longer than the tracer walks: the WRs
	// past the walk bound were neither recorded nor counted, so NumWRs and
	// Accepted are lower bounds.
	WalkCapped bool
}

func (*Post) Kind() Kind { return KindPost }

// NumWRs is the length of the list, recorded or not.
func (p *Post) NumWRs() uint32 { return uint32(len(p.WRs)) + p.Truncated }

// WC is one work completion returned by ibv_poll_cq.
type WC struct {
	ID      uint64
	Status  uint8 // enum ibv_wc_status
	Opcode  uint8 // enum ibv_wc_opcode
	ByteLen uint32
	QPNum   uint32
}

// Poll is one ibv_poll_cq call that returned at least one completion, or an
// error. Empty polls are counted separately (EmptyPolls) or carried here.
// With Ex set it is one extended poll session on an ibv_cq_ex instead
// (ibv_start_poll, ibv_next_poll until it returns ENOENT, ibv_end_poll):
// Max is 0, and each WC has only its ID and Status, the rest of a
// completion being read through functions that are not traced; the
// analyzer finds its QP by the wr_id.
type Poll struct {
	Header
	CQ  uint64
	Max int32 // num_entries asked for
	Ret int32 // completions returned, or a negative error
	Ex  bool  // an extended poll session
	WCs []WC
	// Truncated counts returned completions past the tracer's bound.
	Truncated uint32
	// EmptyBefore counts polls of this CQ that returned 0 since the last
	// event that reported empty polls for it.
	EmptyBefore uint64
	EntryNS     uint64 // when the call was entered; 0: not recorded
}

func (*Poll) Kind() Kind { return KindPoll }

// EmptyPolls reports polls of a CQ that returned nothing, aggregated in the
// kernel and flushed periodically. Gen is the CQ's generation.
type EmptyPolls struct {
	Header
	CQ    uint64
	Count uint64
	Gen   uint64
}

func (*EmptyPolls) Kind() Kind { return KindEmptyPolls }

// PostRecv is one ibv_post_recv call (counts only), or with SRQ set one
// ibv_post_srq_recv call: QP is then the struct ibv_srq and QPNum 0.
type PostRecv struct {
	Header
	QP       uint64
	QPNum    uint32
	NumWRs   uint32
	Ret      int32
	Accepted uint32
	SRQ      bool
}

func (*PostRecv) Kind() Kind { return KindPostRecv }

// Lost says events were dropped (ring buffer full) on some CPU. Count is the
// number of events lost since the previous Lost event.
type Lost struct {
	Header
	Count uint64
}

func (*Lost) Kind() Kind { return KindLost }

// Exit: the traced process exited.
type Exit struct {
	Header
	Code   int32 // exit status, or -1 when killed by a signal
	Signal int32
}

func (*Exit) Kind() Kind { return KindExit }

// How a process joined the trace (Proc.How).
const (
	ProcTarget  = "target"  // the process sqscope started or attached to
	ProcFork    = "fork"    // forked by a traced process (followed)
	ProcExec    = "exec"    // a traced process ran a new program
	ProcRunning = "running" // found mapping a verbs library when tracing began (host-wide)
	ProcFirst   = "first"   // its first verbs call (host-wide)
	ProcFound   = "found"   // found mapping a verbs library while tracing (host-wide)
)

// Proc: a process joined the trace, or ran a new program. Header.PID is
// the process. A recording with Proc events names its processes; an Exit
// whose PID is not the ProcTarget's is the exit of another traced process
// (a child followed, or one of a host-wide trace), not the end.
type Proc struct {
	Header
	How    string // ProcTarget, ProcFork, ProcExec, ProcRunning, ProcFirst, ProcFound
	Parent uint32 // the parent's process id (ProcFork; 0 when not known)
	Comm   string // the command name (/proc/PID/comm), "" when not known
}

func (*Proc) Kind() Kind { return KindProc }

// CQOp says which call a CQChange reports.
type CQOp uint8

const (
	CQOpCreate   CQOp = 1 // ibv_create_cq
	CQOpCreateEx CQOp = 2 // ibv_create_cq_ex: polled with ibv_start_poll..ibv_end_poll
	CQOpModify   CQOp = 3 // ibv_modify_cq: completion moderation
	CQOpResize   CQOp = 4 // ibv_resize_cq
	CQOpDestroy  CQOp = 5 // ibv_destroy_cq
)

var cqOpNames = map[CQOp]string{CQOpCreate: "create", CQOpCreateEx: "create_ex", CQOpModify: "modify",
	CQOpResize: "resize", CQOpDestroy: "destroy"}

func (o CQOp) String() string {
	if s, ok := cqOpNames[o]; ok {
		return s
	}
	return fmt.Sprintf("cq_op(%d)", uint8(o))
}

// CQChange is a control-path call on a completion queue: what its depth
// is, how it is polled, when it stops existing.
type CQChange struct {
	Header
	Op CQOp
	CQ uint64 // address of struct ibv_cq (== struct ibv_cq_ex) in the target
	// CQE is the depth the CQ has after a create or a resize (the
	// provider may round the request up; a failed resize keeps the
	// request), 0 for the other calls.
	CQE int32
	// ModMask, ModCount and ModPeriodUS are a modify's attr_mask and
	// moderation (completions, microseconds).
	ModMask     uint32
	ModCount    uint16
	ModPeriodUS uint16
	Ret         int32 // modify, resize, destroy: 0 or an errno
	// Via names the call, e.g. "ibv_create_cq_ex" or "sqsim_resize_cq".
	Via string
}

func (*CQChange) Kind() Kind { return KindCQChange }

// Attach records where a probe was placed and how it was found, so a report
// can say what was and was not seen.
type Attach struct {
	Header
	Func   string // post_send, poll_cq, post_recv, wr_start, ... or create_qp
	Path   string // the ELF file
	Offset uint64 // file offset
	How    string // "symbol", HowSimSymbol, "debug-file", "memory", "ops-table", "explicit"
	Err    string // empty when attached
	// DebugFile is the separate debug file whose symbols found the
	// function (How "debug-file"): a build-id, .gnu_debuglink or
	// .gnu_debugaltlink file, or "<path>:.gnu_debugdata".
	DebugFile string `json:",omitempty"`
}

// HowSimSymbol is the How of a data-path probe found by the symbol of the
// simulated HCA's function in a running target (the QPs posted through it
// follow the simulated HCA's rules).
const HowSimSymbol = "symbol (simulated HCA)"

// The sentinel mode's probes: HowErrorSite is the How of a probe on an
// error site of a provider's function (Offset is the site's, Func the
// function's); HowEscalation the How of the full data-path probes placed
// for a while after a process's first failure, and of their removal,
// whose Err is EscalationEnded; HowSample those of a sample window
// (duty-cycled while the process is healthy), whose removal's Err is
// SampleEnded.
const (
	HowErrorSite    = "error site"
	HowEscalation   = "escalation"
	EscalationEnded = "removed: the escalation window ended"
	HowSample       = "sample window"
	SampleEnded     = "removed: the sample window ended"
	// EscalationInSample is the Err of the escalation a failure opened
	// while a sample window was open: its probes stay until the
	// escalation ends.
	EscalationInSample = "escalated: the sample window's probes stay"
	// WindowOpening is the Err of the record a window sends before its
	// probes are placed (How HowSample or HowEscalation): what is seen
	// while they are is its edge.
	WindowOpening = "placing: the window begins"
	// WindowClosing is the Err of the record a window's end sends before
	// its probes are removed (How HowSample or HowEscalation): what is
	// seen from then on is its edge.
	WindowClosing = "removing: the window ends"
)

func (*Attach) Kind() Kind { return KindAttach }

// WindowMark reports whether the record marks a sentinel window's opening
// or end (its Err one of the marks above), not a probe's placement or
// failure.
func (a *Attach) WindowMark() bool {
	switch a.Err {
	case WindowOpening, WindowClosing, SampleEnded, EscalationEnded, EscalationInSample:
		return a.How == HowSample || a.How == HowEscalation
	}
	return false
}

// Scan is what the memory scan of a process traced after it started read
// and found (probe.ScanDataPath).
type Scan struct {
	Header
	Bytes      uint64 // bytes of the process's memory read
	Mappings   uint32 // mappings read
	DurationNS uint64 // time the scan took
	Contexts   uint32 // struct ibv_context objects found
	QPs        uint32 // struct ibv_qp objects found
	// StopNS is how long the process was stopped while the probes of
	// what the scan found were placed (0: not stopped).
	StopNS uint64
	Cut    string // the bound that ended the scan early, or ""
	Err    string // why the scan failed, or ""
	// KernelCheck says how the QPs found compare with the kernel's own
	// list (RDMA netlink), and their device and port, or why they were
	// not compared; "" when none was the kernel's (the simulated HCA).
	KernelCheck string
}

func (*Scan) Kind() Kind { return KindScan }

// PostFail is a failing data-path call seen at an error site of the
// provider's function (the sentinel mode): an instruction that runs only
// when the call returns an error, read there before it returns. It is
// not a Post: the WRs the call took before the one it refused are not
// known.
type PostFail struct {
	Header
	QP    uint64 // struct ibv_qp * (0: not known at the site)
	QPNum uint32
	Func  string // "post_send" or "wr_complete"
	Errno int32  // what the call returns
	// State is the QP's state read from its ibv_qp at the site (enum
	// ibv_qp_state), -1 when not read.
	State int32
	// Site is the file offset of the error site, and SiteCauses what the
	// branches leading there compare (errsite.Cause names, joined by
	// ","): one when the site is one check, more where the provider
	// merged checks into one failure path.
	Site       uint64
	SiteCauses string
	// HasWR says WR is the WR refused (post_send, where the site knows
	// where it is).
	HasWR bool
	WR    WR
	// Traced says the call's entry was seen by an escalation window's
	// post_send probe: its Post, at its return, carries the failure too.
	Traced bool
	// Counted: a failed ibv_post_send of the counters mode, seen at its
	// return: Accepted WRs went in before the one refused (a lower bound
	// when WalkCapped), and SQ is the QP's send queue after the call.
	Counted    bool
	Accepted   uint32
	WalkCapped bool
	SQ         SQModel
}

func (*PostFail) Kind() Kind { return KindPostFail }

// Window is a sample window of the sentinel mode at its end: the
// data-path probes were on every healthy traced process from FromNS to
// the header's TimeNS (PID 0: all of them), what every probe of sqscope
// that ran while it was open cost the traced processes, and their CPU
// time over the period since the previous window's end (PeriodNS).
type Window struct {
	Header
	FromNS   uint64
	PIDs     uint32 // processes the window traced
	PeriodNS uint64
	// Runs and RunNS are the BPF programs' runs and run time while the
	// window was open (the kernel's BPF statistics); Traps the traps they
	// took (one per run, and one more per hit of a return probe on a
	// function without an entry probe), each at TrapNS (measured on this
	// host, trapcost); TargetCPUNS the traced processes' CPU time over
	// the period. All 0 with CostErr, which says why they were not
	// measured.
	Runs        uint64
	RunNS       uint64
	Traps       uint64
	TrapNS      uint64
	TargetCPUNS uint64
	CostErr     string
	// CostNote says what the cost leaves out when the kernel's statistics
	// could not be had: the traps are then two per call recorded (entry
	// and return), the programs' run time 0, a lower bound.
	CostNote string
	// BudgetPPM is the budget (--budget) in parts per million of the
	// traced processes' own CPU time, 0 without one; NextNS the wait
	// until the next window that it (or the sample period) sets.
	BudgetPPM uint32
	NextNS    uint64
	// Tail: no window, the end of the trace: the processes' CPU time
	// since the last window's end (TargetCPUNS over PeriodNS), which
	// the windows' cost is over too.
	Tail bool
}

func (*Window) Kind() Kind { return KindWindow }

// CostNS is what the window's probes cost the traced processes: the
// traps at their price and the programs' run time.
func (w *Window) CostNS() uint64 { return w.Traps*w.TrapNS + w.RunNS }

// QPCounters is a per-QP aggregate kept in the kernel by the low-overhead
// mode instead of per-call events. Values are totals of the QP's
// generation Gen since attach. PayloadBytes and PayloadSGEs are of the
// non-inline WRs that carry a payload out: a READ's or an atomic's SGEs
// receive its response and are not in them.
type QPCounters struct {
	Header
	QP            uint64
	QPNum         uint32
	PostCalls     uint64
	WRs           uint64
	Inline        uint64
	Signaled      uint64
	Doorbells     uint64
	Errors        uint64
	ENOMEM        uint64
	EINVAL        uint64
	InlineBytes   uint64
	PayloadBytes  uint64
	PayloadSGEs   uint64
	WRsPerCallMax uint64
	// What the tracer's bounds cut, as Post.WalkCapped and
	// WR.SGEsNotSummed say it per call in the events mode.
	// WalkCappedPosts counts post calls (failed ones too) whose list was
	// longer than the tracer walks: WRs and the byte counts are lower
	// bounds. SGECutWRs counts posted WRs with more SGEs (or inline
	// buffers) than the tracer sums, SGEsNotSummed their SGEs past the
	// bound (each WR's count saturates at 255): the byte counts are lower
	// bounds.
	WalkCappedPosts uint64
	SGECutWRs       uint64
	SGEsNotSummed   uint64
	Gen             uint64
	// RecvsCounted: the totals hold the QP's ibv_post_recv calls
	// (RecvCalls, of which RecvFailed returned non-zero) and the receive
	// WRs they posted (Recvs); recordings made before those were counted
	// have not.
	RecvsCounted                 bool
	RecvCalls, Recvs, RecvFailed uint64
	// SQ is the QP's send queue as the kernel keeps it (recordings made
	// before it was kept have none: SQ.Kept false).
	SQ SQModel
}

func (*QPCounters) Kind() Kind { return KindQPCounters }

// SQModel is a QP's send queue as the counters mode keeps it in the
// kernel: the WRs its ibv_post_send calls put in, those its send
// completions retired (polled by ibv_poll_cq: a completion retires its
// WR and every earlier one), and what its signaled WRs left outstanding.
type SQModel struct {
	// Kept: the kernel kept the model for this QP (false: a recording
	// made before, or no room in the kernel's map: Full says it).
	Kept bool
	// Posted and Retired: Posted - Retired WRs are outstanding. Peak is
	// the most outstanding after a post; LongestRun the longest run of
	// unsignaled WRs, CurRun the one since the last signaled WR, FirstRun
	// the one before the first signaled WR (so far, while none was).
	Posted, Retired, Peak, LongestRun, CurRun, FirstRun uint64
	// Signaled counts the signaled WRs posted (by their flag);
	// SigOutstanding those outstanding the kernel keeps (at most
	// SigRing), OldestSigNS when the oldest of them was posted (0: none).
	Signaled, SigOutstanding, OldestSigNS uint64
	// SendCQEs counts the QP's send completions seen, CQEErrors those
	// with an error, Unmatched those that matched no signaled WR kept,
	// Unkept the signaled WRs the kernel had no room to keep (while
	// SigRing were outstanding: their completions retire late).
	SendCQEs, CQEErrors, Unmatched, Unkept uint64
	// FailRepeats counts failed calls not sent as a PostFail: each like
	// the QP's last one sent (same errno, WRs accepted and outstanding).
	FailRepeats uint64
	SendCQ      uint64 // the QP's send CQ (struct ibv_cq *)
	// Synced: Posted - Retired is exact (the QP was created in the trace,
	// or a completion matched a WR posted in it); else a lower bound.
	// SigAll: an sq_sig_all QP. Err: an error completion matched no WR
	// kept (a flush of unsignaled WRs, or a receive's): what it retired is
	// not known. IDsRepeat: signaled WRs in a row shared a wr_id. WRAPI:
	// WRs went through the ibv_wr_* API, which the model does not follow.
	Synced, SigAll, Err, IDsRepeat, WRAPI bool
	// Of the whole trace, as the kernel counted them when this was read:
	// WCsPast, completions of polls past SigWCs the model did not look at;
	// Full, QPs the kernel's map had no room for.
	WCsPast, Full uint64
}

// The kernel's bounds of the send-queue model (bpf/events.h).
const (
	SigRing = 256 // signaled WRs kept per QP
	SigWCs  = 256 // completions of one poll looked at
)

// Outstanding is Posted - Retired (0 if the completions ran ahead).
func (m *SQModel) Outstanding() uint64 {
	if m.Retired > m.Posted {
		return 0
	}
	return m.Posted - m.Retired
}

// CQCounters is a per-CQ aggregate kept in the kernel by the low-overhead
// mode: every ibv_poll_cq call, the completions returned, and the calls
// that returned none. Values are totals of the CQ's generation Gen since
// attach.
type CQCounters struct {
	Header
	CQ    uint64
	Polls uint64
	CQEs  uint64
	Empty uint64
	Gen   uint64
	// ExCQEs: of CQEs, those of extended polls (ibv_start_poll and
	// ibv_next_poll), which the kernel's send-queue model does not see.
	ExCQEs uint64
}

func (*CQCounters) Kind() Kind { return KindCQCounters }

// CQCreate: a CQ was created; it is the CQ at its address until another
// CQ is created there. The counts of the CQ that held the address before
// come first, in EmptyPolls or CQCounters of that CQ's generation.
type CQCreate struct {
	Header
	CQ  uint64
	Gen uint64
	CQE uint32 // the entries it has (ibv_cq.cqe)
}

func (*CQCreate) Kind() Kind { return KindCQCreate }

// SRQCreate: a shared receive queue was created.
type SRQCreate struct {
	Header
	SRQ   uint64
	Gen   uint64
	MaxWR uint32 // what the SRQ got
}

func (*SRQCreate) Kind() Kind { return KindSRQCreate }

// SRQDestroy: a shared receive queue was destroyed (Ret 0).
type SRQDestroy struct {
	Header
	SRQ uint64
	Gen uint64
	Ret int32
}

func (*SRQDestroy) Kind() Kind { return KindSRQDestroy }

// End says why a trace ended: the last event of a session, and of its
// recording.
type End struct {
	Header
	Reason string // e.g. "the target exited with status 0", "interrupt signal received"
	Err    bool   // the trace ended on an error: what came before it is all there is
	// CutNS is when every probe stopped at once while the target ran on
	// (0: the trace was not cut): no call decided after it is in the trace
	// (a post at its entry, a poll at its return).
	CutNS uint64
	// InFlightUnseen counts the posts in flight at the cut whose return
	// came too late to be recorded.
	InFlightUnseen uint64
}

func (*End) Kind() Kind { return KindEnd }
