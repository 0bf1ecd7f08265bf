package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// requireBPF skips a test that needs to load BPF and place uprobes on a
// machine that cannot, and fails it instead when SQSCOPE_REQUIRE_BPF=1.
func requireBPF(t *testing.T) {
	t.Helper()
	bpftest.Require(t, Preflight)
}

var (
	targetOnce sync.Once
	targetDir  string
	targetBin  string
	targetErr  error
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(scanHelperEnv); mode != "" {
		scanHelper(mode) // memscan_test.go: a process to scan
		return
	}
	code := m.Run()
	if targetDir != "" {
		os.RemoveAll(targetDir)
	}
	os.Exit(code)
}

// buildTarget compiles testdata/target.c and its fake provider,
// testdata/target_provider.c, once per test run.
func buildTarget(t *testing.T) string {
	t.Helper()
	targetOnce.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			targetErr = fmt.Errorf("no C compiler (cc) to build testdata/target.c")
			return
		}
		targetDir, targetErr = os.MkdirTemp("", "sqscope-probe-test")
		if targetErr != nil {
			return
		}
		targetBin = filepath.Join(targetDir, "target")
		out, err := exec.Command(cc, "-O2", "-g", "-Wall", "-pthread", "-o", targetBin,
			"testdata/target.c", "testdata/target_provider.c", "-libverbs").CombinedOutput()
		if err != nil {
			targetErr = fmt.Errorf("building testdata/target.c: %v\n%s", err, out)
		}
	})
	if targetErr != nil {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
			t.Fatal(targetErr)
		}
		t.Skip(targetErr)
	}
	return targetBin
}

// targetStats is what testdata/target.c says it did.
type targetStats struct {
	QPs, Modifies, Destroys uint64
	PostCalls               uint64 `json:"post_calls"`
	PostWRs                 uint64 `json:"post_wrs"`
	PostAccepted            uint64 `json:"post_accepted"`
	PostErrors              uint64 `json:"post_errors"`
	PostTruncatedLists      uint64 `json:"post_truncated_lists"`
	Polls                   uint64
	EmptyPolls              uint64 `json:"empty_polls"`
	CQEs                    uint64
	WRBatches               uint64  `json:"wr_batches"`
	WRWRs                   uint64  `json:"wr_wrs"`
	WRAborted               uint64  `json:"wr_aborted"`
	WRInline                uint64  `json:"wr_inline"`
	RecvCalls               uint64  `json:"recv_calls"`
	RecvWRs                 uint64  `json:"recv_wrs"`
	SGEOverWRs              uint64  `json:"sge_over_wrs"`
	WalkCappedLists         uint64  `json:"walk_capped_lists"`
	NsPerIter               float64 `json:"ns_per_iter"`
}

func parseStats(t *testing.T, out []byte) targetStats {
	t.Helper()
	var s targetStats
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("target output %q: %v", out, err)
	}
	return s
}

// tally is what the decoded events say the target did.
type tally struct {
	targetStats
	Lost, Exits, ExitCode int64
	Attached              map[string]int
	AttachErrors          []string
	QPNums                map[uint32]bool
	Via                   map[string]int
	Counters              map[uint64]*trace.QPCounters
	CQCounters            map[uint64]*trace.CQCounters // latest totals per CQ
}

// checkCounts requires each named count of the trace to equal what the
// target says it did.
func checkCounts(t *testing.T, got tally, want targetStats, names ...string) {
	t.Helper()
	pairs := map[string][2]uint64{
		"qps":             {got.QPs, want.QPs},
		"modifies":        {got.Modifies, want.Modifies},
		"destroys":        {got.Destroys, want.Destroys},
		"post calls":      {got.PostCalls, want.PostCalls},
		"post WRs":        {got.PostWRs, want.PostWRs},
		"post accepted":   {got.PostAccepted, want.PostAccepted},
		"post errors":     {got.PostErrors, want.PostErrors},
		"truncated lists": {got.PostTruncatedLists, want.PostTruncatedLists},
		"non-empty polls": {got.Polls, want.Polls - want.EmptyPolls},
		"CQEs":            {got.CQEs, want.CQEs},
		"empty polls":     {got.EmptyPolls, want.EmptyPolls},
		"wr batches":      {got.WRBatches, want.WRBatches},
		"wr WRs":          {got.WRWRs, want.WRWRs},
		"wr aborted":      {got.WRAborted, want.WRAborted},
		"wr inline":       {got.WRInline, want.WRInline},
		"post_recv calls": {got.RecvCalls, want.RecvCalls},
		"post_recv WRs":   {got.RecvWRs, want.RecvWRs},
	}
	for _, n := range names {
		c, ok := pairs[n]
		if !ok {
			t.Fatalf("no count named %q", n)
		}
		if c[0] != c[1] {
			t.Errorf("%s: traced %d, target did %d", n, c[0], c[1])
		}
	}
}

func tallyEvents(evs []trace.Event) tally {
	var c tally
	c.Attached = map[string]int{}
	c.QPNums = map[uint32]bool{}
	c.Via = map[string]int{}
	c.Counters = map[uint64]*trace.QPCounters{}
	c.CQCounters = map[uint64]*trace.CQCounters{}
	for _, e := range evs {
		switch e := e.(type) {
		case *trace.QPCreate:
			c.QPs++
			c.QPNums[e.QPNum] = true
			c.Via[e.Via]++
		case *trace.QPModify:
			c.Modifies++
		case *trace.QPDestroy:
			c.Destroys++
		case *trace.Post:
			switch {
			case e.API == trace.APIWR && e.Aborted:
				c.WRAborted++
			case e.API == trace.APIWR:
				c.WRBatches++
				c.WRWRs += uint64(e.NumWRs())
				for _, w := range e.WRs {
					if w.Flags&ibv.SendInline != 0 {
						c.WRInline++
					}
				}
				if e.Ret != 0 {
					c.PostErrors++
				}
			default:
				c.PostCalls++
				c.PostWRs += uint64(e.NumWRs())
				c.PostAccepted += uint64(e.Accepted)
				if e.Ret != 0 {
					c.PostErrors++
				}
				if e.Truncated > 0 {
					c.PostTruncatedLists++
				}
			}
		case *trace.Poll:
			c.Polls++
			c.CQEs += uint64(len(e.WCs)) + uint64(e.Truncated)
			c.EmptyPolls += e.EmptyBefore
		case *trace.EmptyPolls:
			c.EmptyPolls += e.Count
		case *trace.PostRecv:
			c.RecvCalls++
			c.RecvWRs += uint64(e.NumWRs)
		case *trace.Lost:
			c.Lost += int64(e.Count)
		case *trace.Exit:
			c.Exits++
			c.ExitCode = int64(e.Code)
		case *trace.Attach:
			if e.Err != "" {
				c.AttachErrors = append(c.AttachErrors, e.Func+": "+e.Err)
			} else {
				c.Attached[e.Func+"/"+e.How]++
			}
		case *trace.CQCounters:
			c.CQCounters[e.CQ] = e
		case *trace.QPCounters:
			c.Counters[e.QP] = e
		}
	}
	return c
}

// traceRun runs the target held, traced with opts, and returns its output
// and the events.
func traceRun(t *testing.T, opts Options, args ...string) ([]byte, []trace.Event, *Tracer) {
	t.Helper()
	return traceCmd(t, opts, exec.Command(buildTarget(t), args...))
}

// traceCmd starts cmd held, traces it with opts until it exits (it must
// succeed), and returns its output, the events and the tracer.
func traceCmd(t *testing.T, opts Options, cmd *exec.Cmd) ([]byte, []trace.Event, *Tracer) {
	t.Helper()
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	child, err := StartHeldCmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	opts.Child = child
	t0 := time.Now()
	if opts.FlushInterval == 0 {
		opts.FlushInterval = 50 * time.Millisecond
	}
	tr, err := Open(opts)
	if err != nil {
		child.Kill()
		child.Wait()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		t1 := time.Now()
		tr.Close()
		t.Logf("Close took %v (%d attachments)", time.Since(t1), len(tr.Attachments()))
	})
	t.Logf("Open took %v", time.Since(t0))
	var evs []trace.Event
	ctx, cancel := context.WithTimeout(context.Background(), bpftest.Timeout(t, 60*time.Second))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, func(e trace.Event) { evs = append(evs, e) }) }()
	if err := child.Release(); err != nil {
		t.Fatal(err)
	}
	st, err := child.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Success() {
		t.Fatalf("target %v: %v", cmd.Args, st)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Run did not end with the target: %v", ctx.Err())
	}
	for _, w := range tr.Warnings() {
		t.Logf("tracer warning: %s", w)
	}
	return stdout.Bytes(), evs, tr
}

func TestTraceTargetEndToEnd(t *testing.T) {
	requireBPF(t)
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"uprobe_multi", Options{}},
		{"perf-event uprobes", Options{perfEventUprobes: true}},
		{"thread state in task storage", Options{noThreadSlots: true}},
		{"one thread slot for every thread", Options{oneThreadSlot: true}},
		{"one thread slot, the rest by tid", Options{oneThreadSlot: true, noTaskStorage: true}},
		{"thread state by tid", Options{noTaskStorage: true, noThreadSlots: true}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) { testEndToEnd(t, c.opts) })
	}
}

func testEndToEnd(t *testing.T, opts Options) {
	out, evs, tr := traceRun(t, opts, "run")
	want := parseStats(t, out)
	got := tallyEvents(evs)

	if len(got.AttachErrors) > 0 {
		t.Errorf("attach errors: %v", got.AttachErrors)
	}
	for _, f := range []string{"create_qp/symbol", "create_qp_ex/symbol", "modify_qp/symbol", "alloc_pd/symbol",
		"post_send/ops-table", "poll_cq/ops-table", "post_recv/ops-table", "wr_start/ops-table",
		"wr_complete/ops-table", "wr_send/ops-table", "wr_set_sge/ops-table",
		"create_qp_ex/ops-table", // the provider's, found through the verbs_context
	} {
		if got.Attached[f] == 0 {
			t.Errorf("no %s attachment; have %v", f, got.Attached)
		}
	}
	// sqsim_qp_to_qp_ex in the target and ibv_qp_to_qp_ex in libibverbs
	if got.Attached["qp_to_qp_ex/symbol"] != 2 {
		t.Errorf("qp_to_qp_ex attachments: %v", got.Attached)
	}
	if want := map[string]int{"sqsim_create_qp": 4, "sqsim_create_qp_ex": 1, "ibv_create_qp_ex": 1}; fmt.Sprint(got.Via) != fmt.Sprint(want) {
		t.Errorf("QPs created via %v, want %v", got.Via, want)
	}
	if got.Lost != 0 || tr.Lost() != 0 {
		t.Errorf("lost %d events (Lost() %d)", got.Lost, tr.Lost())
	}
	if got.Exits != 1 || got.ExitCode != 0 {
		t.Errorf("exits %d code %d, want 1 exit with 0", got.Exits, got.ExitCode)
	}
	checkCounts(t, got, want, "qps", "modifies", "destroys", "post calls", "post WRs", "post accepted",
		"post errors", "truncated lists", "non-empty polls", "CQEs", "empty polls", "wr batches", "wr WRs",
		"wr aborted", "wr inline", "post_recv calls", "post_recv WRs")
	t.Logf("%d events; target: %+v", len(evs), want)
}

// TestStopClosesAttachRace: the target posts right after the call that
// reveals post_send. With the stop, every post is seen even when attaching
// is slow; without it, the first posts run before their probe exists.
func TestStopClosesAttachRace(t *testing.T) {
	requireBPF(t)
	// the paced target posts every 100 us for 0.3 s on the reference
	// machine, longer on a slower host, so that its probes are placed
	// while it posts however long placing them takes here
	paced := int(bpftest.Timeout(t, 300*time.Millisecond) / (100 * time.Microsecond))
	for _, c := range []struct {
		name   string
		noStop bool
		exact  bool
		args   []string
	}{
		{"stop", false, true, []string{"run"}},
		{"no-stop", true, false, []string{"run"}},
		// posting on while the probes are placed one by one
		{"no-stop-paced", true, false, []string{"paced", fmt.Sprint(paced), "100"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, evs, tr := traceRun(t, Options{NoStop: c.noStop, attachDelay: 30 * time.Millisecond}, c.args...)
			got := tallyEvents(evs)
			if c.args[0] == "paced" {
				if got.PostCalls == 0 || got.PostCalls >= uint64(paced) {
					t.Errorf("%d posts of %d traced: want the probes placed while the target posted", got.PostCalls, paced)
				}
				t.Logf("posts traced %d of %d", got.PostCalls, paced)
			} else {
				want := parseStats(t, out)
				exact := got.PostCalls == want.PostCalls && got.Polls == want.Polls-want.EmptyPolls &&
					got.WRBatches == want.WRBatches
				t.Logf("stops %d; posts traced %d of %d, polls %d of %d, wr batches %d of %d",
					tr.stops, got.PostCalls, want.PostCalls, got.Polls, want.Polls-want.EmptyPolls, got.WRBatches, want.WRBatches)
				if exact != c.exact {
					t.Errorf("exact = %v, want %v", exact, c.exact)
				}
			}
			if (tr.stops > 0) == c.noStop {
				t.Errorf("%d stops with NoStop=%v", tr.stops, c.noStop)
			}
			// Stopped or not, the polls' probes are placed before the
			// posts': every signaled WR of a post seen has its completion
			// seen (the target polls them all), else a late QP's model
			// would hold it outstanding for ever.
			if missed, cut := unseenCompletions(evs); missed > 0 && !cut {
				t.Errorf("%d signaled WRs of traced posts have no traced completion: a post's probe was placed before its poll's", missed)
			}
		})
	}
}

// unseenCompletions counts the signaled WRs the traced posts accepted
// whose completions no traced poll returned, and whether some traced
// poll returned more completions than its record holds (which may be
// theirs).
func unseenCompletions(evs []trace.Event) (missed int, cut bool) {
	signaled := map[uint64]bool{}
	for _, e := range evs {
		switch e := e.(type) {
		case *trace.Post:
			for i, w := range e.WRs {
				if !e.Aborted && uint32(i) < e.Accepted && w.Flags&ibv.SendSignaled != 0 {
					signaled[w.ID] = true
				}
			}
			cut = cut || e.Truncated > 0
		case *trace.Poll:
			for _, wc := range e.WCs {
				delete(signaled, wc.ID)
			}
			cut = cut || e.Truncated > 0
		}
	}
	return len(signaled), cut
}

// TestDecodedValues checks field values of the events of known calls of
// the target, not just their counts.
func TestDecodedValues(t *testing.T) {
	requireBPF(t)
	_, evs, _ := traceRun(t, Options{CallTimes: true}, "run")
	var (
		creates  = map[uint32]*trace.QPCreate{}
		states   = map[uint32][]int32{}
		posts    []*trace.Post
		batches  []*trace.Post
		polls    []*trace.Poll
		recvs    []*trace.PostRecv
		signaled = map[uint64]uint32{} // wr_id of signaled accepted WRs -> QP number
	)
	for _, e := range evs {
		h := e.Hdr()
		if h.PID == 0 || h.TimeNS == 0 {
			t.Errorf("%s event without pid or time: %+v", e.Kind(), h)
		}
		switch e := e.(type) {
		case *trace.QPCreate:
			creates[e.QPNum] = e
		case *trace.QPModify:
			states[e.QPNum] = append(states[e.QPNum], e.State)
		case *trace.Post:
			if e.EntryNS == 0 || e.EntryNS > e.TimeNS {
				t.Errorf("post entry %d, return %d", e.EntryNS, e.TimeNS)
			}
			if e.API == trace.APIWR {
				batches = append(batches, e)
			} else {
				posts = append(posts, e)
			}
			if !e.Aborted {
				for i, w := range e.WRs {
					if uint32(i) < e.Accepted && w.Flags&ibv.SendSignaled != 0 {
						signaled[w.ID] = e.QPNum
					}
				}
			}
		case *trace.Poll:
			if e.EntryNS == 0 || e.EntryNS > e.TimeNS {
				t.Errorf("poll entry %d, return %d", e.EntryNS, e.TimeNS)
			}
			polls = append(polls, e)
		case *trace.PostRecv:
			recvs = append(recvs, e)
		}
	}

	t.Run("caps as the provider reported them", func(t *testing.T) {
		c := creates[0x100]
		if c == nil {
			t.Fatalf("no QPCreate for qp 0x100: %v", creates)
		}
		want := trace.Caps{MaxSendWR: 192, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 1, MaxInlineData: 124}
		if c.Caps != want || c.Type != trace.QPTypeRC || c.SigAll || c.SendCQ == 0 || c.QP == 0 {
			t.Errorf("got %+v", c)
		}
	})
	t.Run("modify states", func(t *testing.T) {
		if got := fmt.Sprint(states[0x100]); got != "[1 2 3]" {
			t.Errorf("qp 0x100 states %s, want INIT RTR RTS", got)
		}
	})
	t.Run("first post list", func(t *testing.T) {
		p := posts[0]
		if p.QPNum != 0x100 || len(p.WRs) != 1 || p.Ret != 0 || p.Accepted != 1 {
			t.Fatalf("got %+v", p)
		}
		if w := p.WRs[0]; w.Opcode != ibv.WRSend || w.Flags != ibv.SendSignaled || w.NumSGE != 1 || w.Bytes != 8 {
			t.Errorf("WR %+v, want SEND, SIGNALED, 1 SGE of 8 bytes", w)
		}
	})
	find := func(pred func(*trace.Post) bool) *trace.Post {
		for _, p := range posts {
			if pred(p) {
				return p
			}
		}
		t.Fatal("post not found")
		return nil
	}
	t.Run("list past the record bound", func(t *testing.T) {
		p := find(func(p *trace.Post) bool { return p.Truncated > 0 })
		if len(p.WRs) != 64 || p.Truncated != 6 || p.NumWRs() != 70 || p.Accepted != 70 || p.Ret != 0 {
			t.Errorf("got %d WRs + %d truncated, accepted %d, ret %d", len(p.WRs), p.Truncated, p.Accepted, p.Ret)
		}
	})
	t.Run("SGEs past the SGE bound", func(t *testing.T) {
		p := find(func(p *trace.Post) bool { return len(p.WRs) > 0 && p.WRs[0].NumSGE == 20 })
		var want uint32
		for j := 0; j < 16; j++ {
			want += uint32(8 + j) // WR 0: lengths 8+j, only the first 16 summed
		}
		if p.WRs[0].Bytes != want {
			t.Errorf("bytes %d, want %d", p.WRs[0].Bytes, want)
		}
	})
	t.Run("SQ full: ENOMEM with bad_wr", func(t *testing.T) {
		p := find(func(p *trace.Post) bool { return p.Ret != 0 })
		if p.Ret != ibv.ENOMEM || p.Accepted != 9 || p.NumWRs() != 12 || p.WRs[9].ID != 500009 {
			t.Errorf("ret %d accepted %d of %d", p.Ret, p.Accepted, p.NumWRs())
		}
	})
	t.Run("wr batches", func(t *testing.T) {
		b := batches[0] // batch 0: one SEND, inline 32 bytes
		if len(b.WRs) != 1 || b.WRs[0].Opcode != ibv.WRSend || b.WRs[0].Flags != ibv.SendSignaled|ibv.SendInline || b.WRs[0].Bytes != 32 || b.Accepted != 1 {
			t.Errorf("batch 0: %+v", b)
		}
		b = batches[1] // batch 1: SEND, RDMA_WRITE with one 4096-byte SGE
		if len(b.WRs) != 2 || b.WRs[1].Opcode != ibv.WRRDMAWrite || b.WRs[1].Bytes != 4096 || b.WRs[1].NumSGE != 1 || b.WRs[1].Flags&ibv.SendInline != 0 {
			t.Errorf("batch 1: %+v", b)
		}
		b = batches[2] // batch 2: three WRs with an SGE list of 3
		if len(b.WRs) != 3 || b.WRs[2].Bytes != 600 || b.WRs[2].NumSGE != 3 {
			t.Errorf("batch 2: %+v", b)
		}
		var aborted int
		for _, b := range batches {
			if b.Aborted {
				aborted++
				if b.Accepted != 0 || b.Ret != 0 {
					t.Errorf("aborted batch %+v", b)
				}
			}
		}
		if aborted != 2 {
			t.Errorf("%d aborted batches", aborted)
		}
	})
	t.Run("completions name signaled WRs", func(t *testing.T) {
		truncatedQP := map[uint32]bool{}
		for _, p := range posts {
			if p.Truncated > 0 {
				truncatedQP[p.QPNum] = true
			}
		}
		n, unseen := 0, 0
		for _, p := range polls {
			if p.Ret != int32(len(p.WCs))+int32(p.Truncated) || p.Max != 16 {
				t.Errorf("poll ret %d max %d with %d WCs", p.Ret, p.Max, len(p.WCs))
			}
			for _, wc := range p.WCs {
				n++
				qpn, ok := signaled[wc.ID]
				if !ok && truncatedQP[wc.QPNum] {
					unseen++ // its WR was past the record bound
					continue
				}
				if !ok || qpn != wc.QPNum || wc.Status != ibv.WCSuccess {
					t.Errorf("completion %+v of no signaled WR (qp %#x, %v)", wc, qpn, ok)
				}
			}
		}
		if n != len(signaled)+unseen || unseen != 1 {
			t.Errorf("%d completions for %d signaled WRs (+%d past the bound)", n, len(signaled), unseen)
		}
	})
	t.Run("post_recv", func(t *testing.T) {
		if len(recvs) != 10 || recvs[0].NumWRs != 2 || recvs[0].Accepted != 2 || recvs[0].QPNum != 0x100 {
			t.Errorf("%d post_recv, first %+v", len(recvs), recvs[0])
		}
	})
}

// Without CallTimes the data-path records carry no entry time (the BPF
// side takes no clock reading at entry).
func TestNoCallTimes(t *testing.T) {
	requireBPF(t)
	_, evs, _ := traceRun(t, Options{}, "run")
	var posts, polls int
	for _, e := range evs {
		switch e := e.(type) {
		case *trace.Post:
			posts++
			if e.EntryNS != 0 {
				t.Errorf("post with entry time %d", e.EntryNS)
			}
		case *trace.Poll:
			polls++
			if e.EntryNS != 0 {
				t.Errorf("poll with entry time %d", e.EntryNS)
			}
		}
	}
	if posts == 0 || polls == 0 {
		t.Fatalf("%d posts, %d polls traced", posts, polls)
	}
}

// With ReuseEvents every post is delivered in the same *trace.Post (and
// every poll in the same *trace.Poll); without it each has its own.
func TestReuseEvents(t *testing.T) {
	requireBPF(t)
	for _, reuse := range []bool{false, true} {
		t.Run(fmt.Sprint("reuse=", reuse), func(t *testing.T) {
			_, evs, _ := traceRun(t, Options{ReuseEvents: reuse}, "run")
			posts := map[*trace.Post]bool{}
			polls := map[*trace.Poll]bool{}
			n := 0
			for _, e := range evs {
				switch e := e.(type) {
				case *trace.Post:
					n++
					posts[e] = true
				case *trace.Poll:
					polls[e] = true
				}
			}
			if n < 2 || len(polls) == 0 {
				t.Fatalf("%d posts, %d polls traced", n, len(polls))
			}
			if want := map[bool]int{false: n, true: 1}[reuse]; len(posts) != want {
				t.Errorf("%d posts in %d distinct events, want %d", n, len(posts), want)
			}
			if reuse && len(polls) != 1 {
				t.Errorf("polls in %d distinct events, want 1", len(polls))
			}
		})
	}
}
