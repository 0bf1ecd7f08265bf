// Package workload is sqscope's traffic generator: perftest-style inline and
// unsignaled send traffic on the simulated HCA or a real verbs device, with
// fault modes that reproduce the classic send-queue bugs. Each QP runs on its
// own thread in a C loop (loop.c) that posts through the unmodified inline
// verbs calls, so a tracer sees exactly what it would see in a real
// application.
package workload

/*
#cgo CFLAGS: -O2 -g -Wall
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include "loop.h"
#include "../verbs/wrbuild.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/verbs"
)

// Fault is a classic send-queue bug the workload can reproduce.
type Fault int

const (
	FaultNone Fault = iota
	FaultNeverSignal
	FaultLazyPoll
	FaultInlineTooBig
	FaultTooManySGE
	FaultBadOpcode
	// FaultPostBeforeRTS leaves the QP in RTR, as an application that
	// posts before its connection is set up.
	FaultPostBeforeRTS
	// FaultCQOverrun reaps the CQ only when the application's own limit
	// of outstanding WRs is reached: with a CQ smaller than the signaled
	// WRs that allows (--cq-depth), the CQ overruns.
	FaultCQOverrun
	// FaultRQStarve: the receiver of a SEND stream reaps its receive
	// completions but posts no new receives, and the sender trusts its SQ
	// (no limit of its own): SENDs wait on RNR retries and the SQ fills.
	FaultRQStarve
)

var faultNames = map[Fault]string{
	FaultNone: "none", FaultNeverSignal: "never-signal", FaultLazyPoll: "lazy-poll",
	FaultInlineTooBig: "inline-too-big", FaultTooManySGE: "too-many-sge", FaultBadOpcode: "bad-opcode",
	FaultPostBeforeRTS: "post-before-rts", FaultCQOverrun: "cq-overrun", FaultRQStarve: "rq-starve",
}

func (f Fault) String() string { return faultNames[f] }

// ParseFault parses --fault: never-signal, lazy-poll=N, inline-too-big,
// too-many-sge, bad-opcode, post-before-rts, cq-overrun, rq-starve.
func ParseFault(s string) (Fault, uint32, error) {
	name, arg, hasArg := strings.Cut(s, "=")
	for f, n := range faultNames {
		if n != name || f == FaultNone {
			continue
		}
		if f == FaultLazyPoll {
			if !hasArg {
				return 0, 0, fmt.Errorf("--fault lazy-poll needs a count: lazy-poll=N (poll every N posts)")
			}
			v, err := strconv.ParseUint(arg, 10, 32)
			if err != nil || v < 2 {
				return 0, 0, fmt.Errorf("--fault lazy-poll=%s: want an integer >= 2", arg)
			}
			return f, uint32(v), nil
		}
		if hasArg {
			return 0, 0, fmt.Errorf("--fault %s takes no value", name)
		}
		return f, 0, nil
	}
	return 0, 0, fmt.Errorf("unknown fault %q (want never-signal, lazy-poll=N, inline-too-big, too-many-sge, bad-opcode, post-before-rts, cq-overrun or rq-starve)", s)
}

// Config is one workload run. Names follow perftest where it has the knob.
type Config struct {
	Device     string // -d: "sim" or a verbs device name
	GIDIndex   int    // -x: -1 chooses a RoCE v2 GID
	Port       int
	Size       uint32 // -s
	InlineSize uint32 // -I: WRs of Size <= InlineSize are posted inline
	CQMod      uint32 // -Q: signal every CQMod-th WR
	TxDepth    uint32 // -t: SQ depth asked for, and the outstanding limit
	PostList   uint32 // -l: WRs per post call
	Iters      uint64 // -n: WRs per QP
	Duration   time.Duration
	QPs        int
	Conn       verbs.QPType
	// Opcodes are posted in turn, WR by WR (--opcode send,read,...).
	Opcodes   []int
	API       string
	PollBatch uint32
	// CQEx creates the send CQ with ibv_create_cq_ex and polls it with
	// ibv_start_poll, ibv_next_poll and ibv_end_poll (--cq-ex).
	CQEx bool
	// CQDepth is the entries asked for each send CQ (--cq-depth); 0 gives
	// room for every WR the SQ holds (every SQ of a shared CQ).
	CQDepth uint32
	// Threads spreads the QPs over this many threads, each posting to its
	// QPs in turn (--threads; 0: one thread per QP). SharedCQ gives each
	// thread one send CQ shared by its QPs (--shared-cq); SRQ gives the
	// receiving peers of each thread's QPs one shared receive queue
	// (--srq, with SENDs; it implies Receiver).
	Threads  int
	SharedCQ bool
	SRQ      bool
	// Receiver gives each QP on the simulator a receiving peer whose
	// receives its SENDs take (--receiver; a device's QPs always have
	// one); RNRRetry is the sender's rnr_retry (--rnr-retry, 7: forever).
	Receiver bool
	RNRRetry uint32
	Rate     uint64 // WR/s per QP
	SigAll   bool
	Fault    Fault
	LazyPoll uint32
	// FaultAfter delays the fault into the run; FaultQP limits it to one
	// QP index (-1: all QPs).
	FaultAfter time.Duration
	FaultQP    int
	NumSGE     uint32
	Sim        verbs.NICModel
	ReadyFile  string
	WaitSignal bool
	// ThreadChurn runs threads that start and exit beside the traffic,
	// about a thousand a second (--thread-churn).
	ThreadChurn bool
	// DrainTimeout bounds the wait for outstanding CQEs at the end.
	DrainTimeout time.Duration
}

// Defaults returns perftest-like defaults.
func Defaults() Config {
	return Config{
		Device: verbs.SimName, GIDIndex: -1, Port: 1,
		Size: 64, InlineSize: 0, CQMod: 100, TxDepth: 128, PostList: 1, Iters: 5000,
		QPs: 1, Conn: verbs.RC, Opcodes: []int{verbs.OpSend}, API: "post_send", PollBatch: 16,
		NumSGE: 1, Sim: verbs.DefaultNICModel(), DrainTimeout: 2 * time.Second, FaultQP: -1,
		RNRRetry: 7,
	}
}

// UsageError is a bad flag value: the command exits with status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, a ...any) error { return &UsageError{fmt.Sprintf(format, a...)} }

// cqModExplicit is set by the flag parser when -Q was given, so that the
// perftest default (100) is capped to the depth silently but an explicit
// value larger than the depth is an error.
func (c *Config) Validate(cqModExplicit bool) error {
	switch {
	case c.TxDepth == 0:
		return usagef("-t/--tx-depth must be at least 1")
	case c.PostList == 0:
		return usagef("-l/--post_list must be at least 1")
	case c.PostList > c.TxDepth:
		return usagef("-l/--post_list %d is larger than -t/--tx-depth %d", c.PostList, c.TxDepth)
	case c.PostList > 4096:
		return usagef("-l/--post_list %d is over the limit of 4096", c.PostList)
	case c.CQMod == 0:
		return usagef("-Q/--cq-mod must be at least 1")
	case c.Size == 0 && c.InlineSize > 0:
		return usagef("-s/--size 0 with -I/--inline_size %d: an inline WR needs a payload", c.InlineSize)
	case c.Iters == 0 && c.Duration == 0:
		return usagef("-n/--iters must be at least 1 (or give -D/--duration)")
	case c.QPs < 1 || c.QPs > MaxQPs:
		return usagef("--qps %d out of range 1..%d", c.QPs, MaxQPs)
	case c.Threads < 0 || c.Threads > c.QPs:
		return usagef("--threads %d out of range 1..%d (the QPs, --qps)", c.Threads, c.QPs)
	case c.PollBatch == 0 || c.PollBatch > 4096:
		return usagef("--poll-batch %d out of range 1..4096", c.PollBatch)
	case c.API != "post_send" && c.API != "wr" && c.API != "direct":
		return usagef("--api %q: want post_send, wr or direct", c.API)
	case c.API == "direct" && c.Device != verbs.SimName:
		return usagef("--api direct posts through the simulated HCA's direct path: -d %s has none (give -d %s)", c.Device, verbs.SimName)
	case c.Size > 1<<24:
		return usagef("-s/--size %d over the limit of 16 MiB", c.Size)
	case c.Duration < 0:
		return usagef("-D/--duration must be positive")
	}
	if err := c.checkOpcodes(); err != nil {
		return err
	}
	if c.CQMod > c.TxDepth {
		if cqModExplicit {
			return usagef("-Q/--cq-mod %d is larger than -t/--tx-depth %d: the SQ would fill before a CQE is requested", c.CQMod, c.TxDepth)
		}
		c.CQMod = c.TxDepth
	}
	// The application's flow control (loop.c) posts a list of -l WRs only
	// when they fit under -t beside those outstanding; the WRs posted
	// since the last signaled one stay outstanding until a later CQE, up
	// to Q - gcd(l, Q) of them when a list starts: with more, no list
	// fits again and the run stalls. perftest makes -Q the post list
	// size by default, and refuses a post list that is not a multiple
	// of -Q.
	if stall := c.CQMod - gcd(c.PostList, c.CQMod); stall+c.PostList > c.TxDepth {
		if cqModExplicit {
			return usagef("-Q/--cq-mod %d with -l/--post_list %d leaves up to %d unsignaled WRs outstanding, and a list beside them needs -t/--tx-depth >= %d (or make -l a multiple of -Q, as perftest does)",
				c.CQMod, c.PostList, stall, stall+c.PostList)
		}
		c.CQMod = c.PostList
	}
	if c.Fault == FaultLazyPoll && c.LazyPoll < 2 {
		return usagef("--fault lazy-poll needs N >= 2")
	}
	if c.FaultQP < -1 || c.FaultQP >= c.QPs {
		return usagef("--fault-qp %d out of range (QP indexes 0..%d, or -1 for all)", c.FaultQP, c.QPs-1)
	}
	if (c.FaultAfter != 0 || c.FaultQP >= 0) && c.Fault == FaultNone {
		return usagef("--fault-after and --fault-qp need --fault")
	}
	if c.FaultAfter < 0 {
		return usagef("--fault-after must be positive")
	}
	if c.Fault == FaultPostBeforeRTS && c.FaultAfter != 0 {
		return usagef("--fault post-before-rts takes no --fault-after: the QP never reaches RTS")
	}
	if c.Fault == FaultRQStarve {
		if c.Conn != verbs.RC || !sendsOnly(c.Opcodes) {
			return usagef("--fault rq-starve needs RC and --opcode send or send_imm (the opcodes that take the receiver's receives)")
		}
		c.Receiver = true
	}
	if c.SRQ {
		if c.Conn != verbs.RC || !sendsOnly(c.Opcodes) {
			return usagef("--srq needs RC and --opcode send or send_imm (the opcodes that take the receiver's receives)")
		}
		c.Receiver = true
	}
	if c.Receiver && c.Conn != verbs.RC {
		return usagef("--receiver needs --connection RC")
	}
	if c.RNRRetry > 7 {
		return usagef("--rnr-retry %d out of range 0..7 (7: retry forever)", c.RNRRetry)
	}
	if c.CQDepth > 4194304 {
		return usagef("--cq-depth %d over the limit of 4194304", c.CQDepth)
	}
	if c.Fault == FaultCQOverrun && (c.CQDepth == 0 || c.CQDepth >= c.TxDepth/c.CQMod) {
		return usagef("--fault cq-overrun needs --cq-depth N below the signaled WRs -t/-Q allows outstanding (%d)", c.TxDepth/c.CQMod)
	}
	return nil
}

func gcd(a, b uint32) uint32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// AppCounters is what the application side knows, on any device.
type AppCounters struct {
	Attempts        uint64  `json:"attempts"`
	WRs             uint64  `json:"wrs"`
	PostCalls       uint64  `json:"post_calls"`
	Doorbells       uint64  `json:"doorbells"`
	Inline          uint64  `json:"inline"`
	Signaled        uint64  `json:"signaled"`
	CQEsPolled      uint64  `json:"cqes_polled"`
	CQEErrors       uint64  `json:"cqe_errors"`
	Polls           uint64  `json:"polls"`
	EmptyPolls      uint64  `json:"empty_polls"`
	ENOMEM          uint64  `json:"enomem"`
	EINVAL          uint64  `json:"einval"`
	OtherErrors     uint64  `json:"other_errors"`
	FirstErrno      int     `json:"first_errno"`
	FirstErrorAt    uint64  `json:"first_error_at"`
	PeakOutstanding uint64  `json:"peak_outstanding"`
	Undrained       uint64  `json:"undrained"`
	AvgPostNS       float64 `json:"avg_post_ns"`
	AvgLatencyNS    float64 `json:"avg_latency_ns"`
	MaxLatencyNS    uint64  `json:"max_latency_ns"`
	Seconds         float64 `json:"seconds"`
	// WRsPerS is WRs over Seconds (absent when the run took no
	// measurable time).
	WRsPerS *float64 `json:"wrs_per_s,omitempty"`
	// CPUSeconds is the CPU time the QP's thread used over Seconds: its
	// whole run when it drives several QPs, the probes' work included.
	CPUSeconds  float64 `json:"cpu_seconds"`
	RecvsPosted uint64  `json:"recvs_posted"`
	// RecvCQEs: completions of the peer's receives polled (its own CQ's,
	// or those of its SRQ's CQ this QP's turns polled)
	RecvCQEs uint64 `json:"recv_cqes"`
	// Stalled: the run stopped early, held by its own limit of
	// outstanding WRs while no completion came for the drain timeout, or
	// could come: StalledUnsignaled WRs were outstanding and none of them
	// signaled (a failed list dropped its signaled WR).
	Stalled           bool   `json:"stalled,omitempty"`
	StalledUnsignaled uint64 `json:"stalled_unsignaled,omitempty"`
	// FaultStartSeconds is when the fault became active (0: from the start
	// or never); FaultStartWR how many WRs were attempted before.
	FaultStartSeconds float64 `json:"fault_start_s,omitempty"`
	FaultStartWR      uint64  `json:"fault_start_wr,omitempty"`
	Fault             string  `json:"fault,omitempty"`
}

// QPResult is one QP's outcome. Counters are the simulator's ground truth on
// the sim device; on a real device they hold only what the application side
// can know (HCA-only fields are omitted from JSON).
type QPResult struct {
	Index    int
	Counters verbs.Counters
	HCATruth bool
	Caps     verbs.Caps
	Type     verbs.QPType
	App      AppCounters
	WRSize   uint32 // local bytes per WR actually used (an atomic's 8, whatever -s says)
	// SizesVary: the opcodes take different sizes (-s, an atomic's 8):
	// WRSize is -s, and no size or MB/s is given for the run as a whole
	SizesVary bool
	InlineOn  bool
	NumSGE    uint32
	// Receiver is the simulated receiving peer's ground truth, when it has one.
	Receiver *verbs.Counters
	// CQ is the send CQ's ground truth (shared by the QPs of a thread
	// with --shared-cq); SRQ the receiving peers' SRQ's, with --srq: the
	// simulated HCA's, or on a device the application's own counts.
	CQ  *CQTruth
	SRQ *SRQTruth
}

// Result is a whole run.
type Result struct {
	Config Config
	Device string
	QPs    []QPResult
	// Stopped is set when the run ended early on a signal.
	Stopped bool
}

var runMu sync.Mutex

// Run opens the device, creates the QPs, optionally announces readiness and
// waits for SIGUSR1, then runs one traffic thread per QP until each has
// attempted Iters WRs (or Duration passed, or ctx is done), and destroys
// what it created.
func Run(ctx context.Context, cfg Config) (_ *Result, err error) {
	runMu.Lock()
	defer runMu.Unlock()

	dev, err := open(cfg)
	if err != nil {
		return nil, err
	}
	// everything is destroyed, on success and on error; a provider that
	// refuses (a QP still on a CQ or SRQ) fails the run
	defer func() {
		if cerr := dev.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("releasing %s: %w", dev.Name(), cerr)
		}
	}()

	inline := cfg.InlineSize > 0 && cfg.Size <= cfg.InlineSize
	qcfg := verbs.QPConfig{
		Type:       cfg.Conn,
		MaxSendWR:  cfg.TxDepth,
		MaxRecvWR:  cfg.TxDepth,
		MaxSendSGE: 1,
		MaxInline:  cfg.InlineSize,
		SigAll:     cfg.SigAll,
		WRAPI:      cfg.API == "wr",
		CQEx:       cfg.CQEx,
		// the peer takes atomics only when asked to when connected
		RemoteAtomic: atomics(cfg.Opcodes),
		BufSize:      int(cfg.Size)*4 + 4096,
		CQDepth:      cfg.CQDepth,
		Receiver:     cfg.Receiver && dev.Simulated(),
		RNRRetry:     uint8(cfg.RNRRetry),
	}
	if qcfg.WRAPI {
		qcfg.SendOps = sendOps(cfg.Opcodes)
		if cfg.Conn == verbs.RC {
			// as before the other opcodes: the mlx5 overhead of WRITE
			qcfg.SendOps |= withSend | withRDMAWrite
		}
	}
	if cfg.NumSGE > 1 {
		qcfg.MaxSendSGE = cfg.NumSGE
	}
	if cfg.Fault == FaultInlineTooBig && cfg.InlineSize == 0 {
		qcfg.MaxInline = 64
	}
	threads := cfg.threadsOf()
	if err := checkLimits(cfg, dev, threads); err != nil {
		return nil, err
	}
	shared, err := newShared(cfg, dev, threads)
	if err != nil {
		return nil, err
	}
	eps := make([]*verbs.Endpoint, cfg.QPs)
	for i := range eps {
		qc := qcfg
		qc.StopAtRTR = cfg.Fault == FaultPostBeforeRTS && (cfg.FaultQP < 0 || cfg.FaultQP == i)
		qc.SendCQ, qc.SRQ = shared.of(threadOf(i, cfg.QPs, threads))
		ep, err := dev.NewEndpoint(qc)
		if err != nil {
			return nil, fmt.Errorf("QP %d of %d: %w", i+1, cfg.QPs, err)
		}
		eps[i] = ep
	}

	// Per-QP WR shapes: healthy, and while the fault is active (fixed by
	// the fault mode against the reported caps).
	healthy := shape{size: cfg.Size, inline: inline, sge: max(cfg.NumSGE, 1)}
	shapes := make([]shape, len(eps))
	for i, ep := range eps {
		sh := healthy
		switch cfg.Fault {
		case FaultInlineTooBig:
			sh.inline = true
			if sh.size <= ep.Caps.MaxInlineData {
				sh.size = ep.Caps.MaxInlineData + 1
			}
		case FaultTooManySGE:
			sh.sge = ep.Caps.MaxSendSGE + 1
			if sh.size < sh.sge {
				sh.size = sh.sge
			}
		}
		if int(sh.size) > qcfg.BufSize {
			return nil, fmt.Errorf("payload %d B exceeds the registered buffer", sh.size)
		}
		shapes[i] = sh
	}

	var usr1 *usr1Waiter
	if cfg.WaitSignal {
		usr1 = armUSR1()
	}
	if cfg.ThreadChurn {
		c := C.wl_churn_start()
		if c == nil {
			return nil, errors.New("--thread-churn: no thread could be started")
		}
		defer C.wl_churn_stop(c)
	}
	if cfg.ReadyFile != "" {
		if err := writeReady(cfg.ReadyFile, eps); err != nil {
			return nil, err
		}
	}
	if usr1 != nil {
		if err := usr1.wait(ctx); err != nil {
			return nil, fmt.Errorf("waiting for SIGUSR1: %w", err)
		}
	}

	C.wl_reset_stop()
	stopWatch := make(chan struct{})
	var stopped bool
	var stopMu sync.Mutex
	go func() {
		select {
		case <-ctx.Done():
			stopMu.Lock()
			stopped = true
			stopMu.Unlock()
			C.wl_request_stop()
		case <-stopWatch:
		}
	}()

	res := &Result{Config: cfg, Device: dev.Name(), QPs: make([]QPResult, len(eps))}
	var wg sync.WaitGroup
	errs := make([]error, threads)
	for t := range threads {
		first, end := threadQPs(t, cfg.QPs, threads)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[t] = runThread(cfg, dev, eps, shapes, healthy, first, end, shared, res.QPs)
		}()
	}
	wg.Wait()
	close(stopWatch)
	stopMu.Lock()
	res.Stopped = stopped
	stopMu.Unlock()
	return res, errors.Join(errs...)
}

func open(cfg Config) (verbs.Device, error) {
	if cfg.Device == verbs.SimName {
		return verbs.OpenSim(cfg.Sim)
	}
	return verbs.OpenDevice(cfg.Device, verbs.DeviceOptions{Port: cfg.Port, GIDIndex: cfg.GIDIndex})
}

// localSize is the local bytes of each WR of the opcodes when asked for
// size, by the rule of verbs/wrbuild.h (an atomic's 8 bytes); size and
// true when the opcodes take different sizes.
func localSize(ops []int, size uint32) (uint32, bool) {
	first := uint32(C.sq_wr_local_len(C.int(ops[0]), C.uint32_t(size)))
	for _, op := range ops[1:] {
		if uint32(C.sq_wr_local_len(C.int(op), C.uint32_t(size))) != first {
			return size, true
		}
	}
	return first, false
}

// shape is what every WR of a phase looks like.
type shape struct {
	size   uint32
	inline bool
	sge    uint32
}

// appSideCounters fills the shared counter names with what an application
// knows on a real device. The ENOMEM cause is the application's own
// inference from the WR it posted and the caps its QP reported.
func appSideCounters(ep *verbs.Endpoint, a AppCounters, fault Fault, size, nsge uint32) verbs.Counters {
	c := verbs.Counters{
		QPNum: ep.QPNum, MaxSendWR: ep.Caps.MaxSendWR, MaxInlineData: ep.Caps.MaxInlineData,
		WRs: a.WRs, PostCalls: a.PostCalls, Inline: a.Inline, Signaled: a.Signaled,
		Doorbells: a.Doorbells, EINVAL: a.EINVAL, PeakOutstanding: a.PeakOutstanding,
		CQEsPolled: a.CQEsPolled,
	}
	if ep.SigAll {
		c.Signaled = a.WRs
	}
	switch {
	case fault == FaultPostBeforeRTS:
		c.NotRTS = a.ENOMEM + a.EINVAL
	case fault == FaultInlineTooBig && size > ep.Caps.MaxInlineData:
		c.ENOMEMInline = a.ENOMEM
	case nsge > ep.Caps.MaxSendSGE:
		c.ENOMEMSGE = a.ENOMEM
	default:
		c.ENOMEMSQFull = a.ENOMEM
	}
	return c
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// writeReady writes the QP numbers, one per line, whole or not at all and
// by the rules of every output file (outfile.WriteFile: never through a
// link, as the workload may run as root under a tracer).
func writeReady(path string, eps []*verbs.Endpoint) error {
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d\n", os.Getpid())
	for _, ep := range eps {
		fmt.Fprintf(&b, "qp %#x %s max_send_wr %d max_inline_data %d\n", ep.QPNum, ep.Type, ep.Caps.MaxSendWR, ep.Caps.MaxInlineData)
	}
	if err := outfile.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing --ready-file: %w", err)
	}
	return nil
}

// sendsOnly reports whether every opcode takes a receive at the responder
// and is one the traffic loop sends with a payload (SEND, SEND with
// immediate).
func sendsOnly(ops []int) bool {
	for _, op := range ops {
		if op != verbs.OpSend && op != ibv.WRSendWithImm {
			return false
		}
	}
	return len(ops) > 0
}
