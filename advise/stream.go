// Package advise answers, for one recording, which inline threshold,
// signal interval, post-list length and send-queue depth would have served
// each QP's traffic best: it replays the recorded WR stream under candidate
// settings through the simulated HCA's NIC timing model (nicmodel.Model,
// the formula of verbs/sim_post.c) and the analyzer's mlx5 model, and keeps the
// overflow-free candidates no other beats on both throughput and PCIe
// bytes.
package advise

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

// WR is one work request as the application asked for it: what the
// settings under study leave alone.
type WR struct {
	Opcode uint8
	Bytes  uint32
	NumSGE uint32
}

// carriesPayload: sends and RDMA writes send their local bytes, which
// IBV_SEND_INLINE may copy into the WQE (a READ's or an atomic's local
// buffer is where the response lands).
func (w WR) carriesPayload() bool {
	switch w.Opcode {
	case ibv.WRSend, ibv.WRSendWithImm, ibv.WRSendWithInv, ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm:
		return w.Bytes > 0
	}
	return false
}

// Settings are the knobs advise varies, in the application's terms.
type Settings struct {
	// InlineUpTo: WRs carrying at most this many payload bytes are posted
	// with IBV_SEND_INLINE (0: none).
	InlineUpTo uint32 `json:"inline_up_to_bytes"`
	// SignalEvery: one WR in every N is posted with IBV_SEND_SIGNALED (0:
	// none is).
	SignalEvery uint32 `json:"signal_every"`
	// PostList: WRs per post call (one doorbell).
	PostList uint32 `json:"wrs_per_post"`
	// MaxSendWR is the depth the QP is created with; the application is
	// taken to keep at most that many WRs outstanding.
	MaxSendWR uint32 `json:"max_send_wr"`
}

// Stream is one QP's recorded send traffic and what the recording measured.
type Stream struct {
	PID    uint32       `json:"pid"`
	QPNum  uint32       `json:"qp_num"`
	Type   trace.QPType `json:"-"`
	Caps   trace.Caps   `json:"caps"`
	SigAll bool         `json:"sq_sig_all"`
	// WRs are every WR the application tried to post, in order, failed
	// posts included: its demand, which the replay posts in full.
	WRs []WR `json:"-"`
	// Current are the settings the recording shows.
	Current Settings `json:"current"`
	// Measured is what the analyzer rebuilt from the recording.
	Measured analyzer.QP `json:"measured"`
	// Overhead is the WQE bytes before data the QP's caps imply (mlx5's
	// sq_overhead), which sizes a QP created with other caps.
	Overhead uint32 `json:"wqe_overhead_bytes"`
	// NotRecorded counts WRs the recording holds no detail of (past the
	// record bound, or a list longer than the walk bound): not replayed.
	NotRecorded uint64 `json:"wrs_not_recorded"`
	lists       map[uint32]uint64
	// via and lib are what the QP's create named (the provider's call and
	// library): the replay's create names them too, so the analyzer
	// applies the same provider's rules
	via, lib string
	tooLong  bool // past Select's MaxWRs: not held, not advised on
}

// ErrNoDetail, ErrNoCaps and ErrNotMlx5 say why a recording cannot be
// replayed; ErrTooLong why a stream past Select's bound is not.
var (
	ErrNoDetail = errors.New("the recording has no per-WR detail (it was made with --mode counters): record in events mode, the default")
	ErrNoCaps   = errors.New("the recording has no QP create, so no caps (max_send_wr, max_inline_data): start tracing before the QPs are created (-c CMD or --workload)")
	ErrNotMlx5  = errors.New("advise replays through the mlx5 model (mlx5 and the simulated HCA), which does not apply to it")
	ErrTooLong  = errors.New("its WR stream is longer than this replays: run sqscope advise on the recording")
)

// Select bounds what LoadSome keeps: the streams of the QPs Keep
// accepts (all when nil), each of at most MaxWRs WRs (0: no bound; a
// longer one is not advised on, ErrTooLong), so that a page advising on
// a few QPs of a long recording holds only theirs.
type Select struct {
	Keep   func(pid, qpNum uint32) bool
	MaxWRs int
}

// NotAdvised is a QP of the recording that posted WRs and cannot be
// replayed, and why.
type NotAdvised struct {
	PID      uint32 `json:"pid"`
	QPNum    uint32 `json:"qp_num"`
	Provider string `json:"provider,omitempty"`
	Why      string `json:"why"`
	// Err is the reason: ErrNoDetail, ErrNoCaps or ErrNotMlx5.
	Err error `json:"-"`
}

// error is n as the error of a recording with nothing else to advise on.
func (n NotAdvised) error() error {
	if n.Provider != "" {
		return fmt.Errorf("QP %#x (pid %d) runs on provider %s: %w", n.QPNum, n.PID, n.Provider, n.Err)
	}
	return fmt.Errorf("QP %#x (pid %d): %w", n.QPNum, n.PID, n.Err)
}

func notAdvised(q *analyzer.QP, err error) NotAdvised {
	n := NotAdvised{PID: q.PID, QPNum: q.QPNum, Why: err.Error(), Err: err}
	if errors.Is(err, ErrNotMlx5) {
		n.Provider = q.Provider
		n.Why = "it runs on provider " + q.Provider + ": " + err.Error()
	}
	return n
}

// Load reads a recording's QPs: the streams it can replay and the QPs it
// cannot, with why. A QP that posted nothing is left out. A recording of
// no QP to replay is an error saying what is needed (the first QP's
// reason).
func Load(ctx context.Context, r *trace.Reader, bf analyzer.BFConfig) ([]*Stream, []NotAdvised, session.ReadResult, error) {
	return LoadSome(ctx, r, bf, Select{})
}

// LoadSome is Load of the QPs sel keeps; the others are left out, as
// QPs that posted nothing.
func LoadSome(ctx context.Context, r *trace.Reader, bf analyzer.BFConfig, sel Select) ([]*Stream, []NotAdvised, session.ReadResult, error) {
	a := analyzer.New(analyzer.Options{BF: bf, HistoryLen: -1})
	type key struct{ pid, qp uint32 }
	byQP := map[key]*Stream{}
	var order []*Stream
	counters := false
	created := map[key][2]string{}
	res, err := session.ReadAll(ctx, r, func(ev trace.Event) {
		a.Ingest(ev)
		switch e := ev.(type) {
		case *trace.QPCounters:
			counters = true
		case *trace.QPCreate:
			created[key{e.PID, e.QPNum}] = [2]string{e.Via, e.Lib}
		case *trace.Post:
			if sel.Keep != nil && !sel.Keep(e.PID, e.QPNum) {
				break
			}
			k := key{e.PID, e.QPNum}
			s := byQP[k]
			if s == nil {
				s = &Stream{PID: e.PID, QPNum: e.QPNum, lists: map[uint32]uint64{}}
				byQP[k] = s
				order = append(order, s)
			}
			if len(e.WRs) > 0 {
				s.lists[uint32(len(e.WRs))+e.Truncated]++
			}
			s.NotRecorded += uint64(e.Truncated)
			if e.WalkCapped {
				s.NotRecorded++ // at least one
			}
			if s.tooLong = s.tooLong || sel.MaxWRs > 0 && len(s.WRs)+len(e.WRs) > sel.MaxWRs; s.tooLong {
				s.WRs = nil // never replayed: not held
				break
			}
			for i := range e.WRs {
				w := &e.WRs[i]
				s.WRs = append(s.WRs, WR{Opcode: w.Opcode, Bytes: w.Bytes, NumSGE: w.NumSGE})
				if w.Flags&ibv.SendInline != 0 && w.Bytes > s.Current.InlineUpTo {
					s.Current.InlineUpTo = w.Bytes
				}
			}
		}
	})
	if err != nil {
		return nil, nil, res, err
	}
	snap := a.Snapshot()
	var out []*Stream
	var not []NotAdvised
	for i := range snap.QPs {
		q := &snap.QPs[i]
		s := byQP[key{q.PID, q.QPNum}]
		switch {
		case q.CountersOnly && q.PostCalls > 0 && (sel.Keep == nil || sel.Keep(q.PID, q.QPNum)):
			not = append(not, notAdvised(q, ErrNoDetail))
			continue
		case s != nil && s.tooLong:
			not = append(not, notAdvised(q, ErrTooLong))
			continue
		case s == nil || len(s.WRs) == 0:
			continue
		case !q.CapsKnown || q.CapsInferred:
			not = append(not, notAdvised(q, ErrNoCaps))
			continue
		case q.Model != analyzer.Mlx5Model:
			not = append(not, notAdvised(q, ErrNotMlx5))
			continue
		}
		c := created[key{q.PID, q.QPNum}]
		s.via, s.lib = c[0], c[1]
		s.Measured = *q
		s.Caps = trace.Caps{MaxSendWR: q.MaxSendWR, MaxInlineData: q.MaxInline, MaxSendSGE: q.MaxSendSGE}
		s.Type, s.SigAll = qpType(q.Type), q.SigAll
		s.Overhead = overhead(s.Type, s.Caps)
		s.Current.SignalEvery = uint32(q.SignalInterval)
		if s.SigAll {
			s.Current.SignalEvery = 1
		}
		s.Current.PostList = typicalList(s.lists)
		s.Current.MaxSendWR = q.MaxSendWR
		out = append(out, s)
	}
	switch {
	case len(out) > 0:
	case len(not) > 0:
		return nil, not, res, not[0].error()
	case counters:
		return nil, nil, res, ErrNoDetail
	default:
		return nil, nil, res, errors.New("the recording holds no posted WR to replay")
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].QPNum < out[j].QPNum
	})
	return out, not, res, nil
}

// typicalList is the most common post-list length (the longer on a tie).
func typicalList(lists map[uint32]uint64) uint32 {
	var best uint32
	for n, c := range lists {
		if c > lists[best] || (c == lists[best] && n > best) {
			best = n
		}
	}
	return best
}

// qpType turns the snapshot's type name back into the trace's.
func qpType(name string) trace.QPType {
	if name == trace.QPTypeUD.String() {
		return trace.QPTypeUD
	}
	return trace.QPTypeRC
}
