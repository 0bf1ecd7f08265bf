package probe

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// entryStats is what `target entry` says it did.
type entryStats struct {
	QPs        uint64
	WRBatches  uint64   `json:"wr_batches"`
	WRWRs      uint64   `json:"wr_wrs"`
	PostErrors uint64   `json:"post_errors"`
	OpWRs      []uint64 `json:"op_wrs"`
	ExPolls    uint64   `json:"ex_polls"`
	ExEmpty    uint64   `json:"ex_empty"`
	ExCQEs     uint64   `json:"ex_cqes"`
	SRQCalls   uint64   `json:"srq_calls"`
	SRQWRs     uint64   `json:"srq_wrs"`
	CQCreates  uint64   `json:"cq_creates"`
	CQModifies uint64   `json:"cq_modifies"`
	CQResizes  uint64   `json:"cq_resizes"`
	CQDestroys uint64   `json:"cq_destroys"`
}

// entryOps are the opcodes of the builders `target entry` calls in turn.
var entryOps = []uint8{ibv.WRSend, ibv.WRSendWithImm, ibv.WRSendWithInv, ibv.WRRDMAWrite, ibv.WRRDMAWriteWithImm,
	ibv.WRRDMARead, ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd, ibv.WRAtomicWrite, ibv.WRBindMW, ibv.WRLocalInv, ibv.WRTSO}

func traceEntry(t *testing.T, opts Options) (entryStats, []trace.Event) {
	t.Helper()
	out, evs, _ := traceRun(t, opts, "entry")
	var want entryStats
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &want); err != nil || len(want.OpWRs) != len(entryOps) {
		t.Fatalf("target output %q: %v", out, err)
	}
	return want, evs
}

// Every data-path entry point a provider's ibv_qp_ex, ibv_cq_ex, ops table
// and verbs_context hold, on the fake provider (found as a stripped one's
// are): each builder's WRs, each extended poll session, the CQ calls and
// the SRQ posts are traced as the target made them, and what is learned
// but not probed is listed with what it hides.
func TestTraceEveryEntryPoint(t *testing.T) {
	requireBPF(t)
	want, evs := traceEntry(t, Options{})
	ops := map[uint8]uint64{}
	var batches, wrs, sessions, cqes, empty, srqCalls, srqWRs, lost uint64
	cqCalls := map[trace.CQOp][]*trace.CQChange{}
	how := map[string]string{}
	for _, e := range evs {
		switch e := e.(type) {
		case *trace.Post:
			batches++
			wrs += uint64(e.NumWRs())
			for _, w := range e.WRs {
				ops[w.Opcode]++
			}
		case *trace.Poll:
			if !e.Ex {
				t.Errorf("a poll not of an extended session: %+v", e)
			}
			sessions++
			cqes += uint64(len(e.WCs)) + uint64(e.Truncated)
			empty += e.EmptyBefore
			for _, wc := range e.WCs {
				if wc.QPNum != 0 || wc.Opcode != 0 || wc.ID < 5000000 {
					t.Errorf("extended-poll completion %+v: want a wr_id of the target and nothing else", wc)
				}
			}
		case *trace.EmptyPolls:
			empty += e.Count
		case *trace.PostRecv:
			if !e.SRQ || e.QPNum != 0 {
				t.Errorf("post_recv %+v: want an SRQ post", e)
			}
			srqCalls++
			srqWRs += uint64(e.NumWRs)
		case *trace.CQChange:
			cqCalls[e.Op] = append(cqCalls[e.Op], e)
		case *trace.Attach:
			how[e.Func] = e.How
			if e.Err != "" {
				how[e.Func] = e.Err
			}
		case *trace.Lost:
			lost += e.Count
		}
	}
	if lost != 0 {
		t.Fatalf("%d events lost", lost)
	}
	for k, op := range entryOps {
		if ops[op] != want.OpWRs[k] {
			t.Errorf("%s WRs: traced %d, target built %d", ibv.OpName(op), ops[op], want.OpWRs[k])
		}
	}
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"wr batches", batches, want.WRBatches},
		{"wr WRs", wrs, want.WRWRs},
		{"extended poll sessions with completions", sessions, want.ExPolls - want.ExEmpty},
		{"extended poll completions", cqes, want.ExCQEs},
		{"empty polls", empty, want.ExEmpty},
		{"ibv_post_srq_recv calls", srqCalls, want.SRQCalls},
		{"SRQ receive WRs", srqWRs, want.SRQWRs},
		{"CQ creates", uint64(len(cqCalls[trace.CQOpCreate]) + len(cqCalls[trace.CQOpCreateEx])), want.CQCreates},
		{"CQ modifies", uint64(len(cqCalls[trace.CQOpModify])), want.CQModifies},
		{"CQ resizes", uint64(len(cqCalls[trace.CQOpResize])), want.CQResizes},
		{"CQ destroys", uint64(len(cqCalls[trace.CQOpDestroy])), want.CQDestroys},
	} {
		if c.got != c.want {
			t.Errorf("%s: traced %d, target did %d", c.name, c.got, c.want)
		}
	}
	if x := cqCalls[trace.CQOpCreateEx]; len(x) != 1 || x[0].CQE != 255 || x[0].Via != "ibv_create_cq_ex" {
		t.Errorf("extended CQ creation %+v: want depth 255 through the verbs_context", x)
	}
	if x := cqCalls[trace.CQOpModify]; len(x) != 1 || x[0].ModCount != 8 || x[0].ModPeriodUS != 16 || x[0].Via != "ibv_modify_cq" {
		t.Errorf("modify %+v: want moderation 8/16 through the verbs_context", x)
	}
	if x := cqCalls[trace.CQOpResize]; len(x) != 1 || x[0].CQE != 301 || x[0].Via != "sqsim_resize_cq" {
		t.Errorf("resize %+v: want the depth the provider made of 300", x)
	}
	for _, f := range []string{"start_poll", "next_poll", "end_poll", "create_cq_ex", "modify_cq", "post_srq_recv",
		"wr_send_imm", "wr_send_inv", "wr_rdma_write_imm", "wr_rdma_read", "wr_atomic_cmp_swp", "wr_atomic_fetch_add",
		"wr_atomic_write", "wr_bind_mw", "wr_local_inv", "wr_send_tso"} {
		if how[f] != "ops-table" {
			t.Errorf("%s: %q, want attached through the pointers the control path revealed", f, how[f])
		}
	}
	for _, f := range []string{"wr_set_ud_addr", "wr_set_xrc_srqn", "cq_read_opcode", "cq_read_byte_len", "cq_read_qp_num"} {
		if !strings.HasPrefix(how[f], notTracedPrefix) || len(how[f]) < len(notTracedPrefix)+20 {
			t.Errorf("%s: %q, want listed as not traced, with what that hides", f, how[f])
		}
	}

	// and the analyzer matches every completion to its WR
	a := analyzer.New(analyzer.Options{BF: analyzer.DefaultBF})
	a.IngestAll(evs)
	snap := analyzertest.Snapshot(t, a)
	if len(snap.QPs) != 1 {
		t.Fatalf("QPs %+v", snap.QPs)
	}
	q := snap.QPs[0]
	if q.WRs != want.WRWRs || q.CQEsPolled != want.ExCQEs || q.Outstanding != 0 || q.UnmatchedCQEs != 0 || len(snap.Diagnoses) != 0 {
		t.Errorf("analyzer: WRs %d, CQEs %d, outstanding %d, unmatched %d, diagnoses %v; want %d, %d, 0, 0, none",
			q.WRs, q.CQEsPolled, q.Outstanding, q.UnmatchedCQEs, snap.Diagnoses, want.WRWRs, want.ExCQEs)
	}
	if snap.SRQRecvs == nil || *snap.SRQRecvs != want.SRQWRs {
		t.Errorf("analyzer: SRQ receives %v, want %d", snap.SRQRecvs, want.SRQWRs)
	}
}

// The counters mode counts every builder's WRs and every extended poll.
func TestTraceEveryEntryPointCounters(t *testing.T) {
	requireBPF(t)
	want, evs := traceEntry(t, Options{Mode: ModeCounters})
	got := tallyEvents(evs)
	var wrs uint64
	for _, c := range got.Counters {
		wrs = max(wrs, c.WRs)
	}
	var polls, cqes, empty uint64
	for _, c := range got.CQCounters {
		polls, cqes, empty = polls+c.Polls, cqes+c.CQEs, empty+c.Empty
	}
	if wrs != want.WRWRs || polls != want.ExPolls || cqes != want.ExCQEs || empty != want.ExEmpty {
		t.Errorf("counters: WRs %d, polls %d, CQEs %d, empty %d; target: %d, %d, %d, %d",
			wrs, polls, cqes, empty, want.WRWRs, want.ExPolls, want.ExCQEs, want.ExEmpty)
	}
}
