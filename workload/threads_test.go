package workload

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/verbs"
)

// limitedDev is a real device's limits, and nothing else.
type limitedDev struct {
	verbs.Device
	lim verbs.Limits
}

func (d limitedDev) Name() string         { return "rxe0" }
func (d limitedDev) Simulated() bool      { return false }
func (d limitedDev) Limits() verbs.Limits { return d.lim }

// rxe's limits, as its kernel reports them, but for the ones a case lowers.
var rxeLimits = verbs.Limits{MaxQP: 1 << 20, MaxCQ: 1 << 20, MaxCQE: 32767, MaxSRQ: 1 << 20, MaxSRQWR: 1 << 20}

func TestCheckLimits(t *testing.T) {
	tests := []struct {
		name    string
		qps     int
		threads int
		shared  bool
		srq     bool
		cqDepth uint32
		lim     func(*verbs.Limits)
		want    string // "" when the run fits
	}{
		{"fits", 16, 2, true, true, 0, nil, ""},
		{"a QP and its peer each", 8, 0, false, false, 0, func(l *verbs.Limits) { l.MaxQP = 15 },
			"--qps 8 needs 16 QPs on rxe0 (each QP and its receiving peer), over its max_qp 15"},
		{"three CQs per QP", 8, 0, false, false, 0, func(l *verbs.Limits) { l.MaxCQ = 23 },
			"--qps 8 needs 24 CQs on rxe0 (send CQs 8, the peers' send CQs 8, their receive CQs 8), over its max_cq 23"},
		{"shared CQs and SRQs save CQs", 8, 2, true, true, 0, func(l *verbs.Limits) { l.MaxCQ = 12 }, ""},
		{"shared CQ over max_cqe", 128, 1, true, false, 0, nil,
			"a send CQ shared by 128 QPs of -t 128 needs 34816 entries"},
		{"the largest thread counts", 65, 2, true, false, 0, func(l *verbs.Limits) { l.MaxCQE = 8703 },
			"a send CQ shared by 33 QPs of -t 128 needs 8976 entries, over rxe0's max_cqe 8703: use more --threads, a smaller -t or --cq-depth"},
		{"cq-depth over max_cqe", 4, 1, true, false, 40000, nil, "--cq-depth 40000 is over rxe0's max_cqe 32767"},
		{"cq-depth within max_cqe", 64, 1, true, false, 4096, nil, ""},
		{"an SRQ per thread", 8, 4, false, true, 0, func(l *verbs.Limits) { l.MaxSRQ = 3 },
			"--srq needs 4 SRQs on rxe0 (one per thread), over its max_srq 3"},
		{"no SRQs", 2, 1, false, true, 0, func(l *verbs.Limits) { l.MaxSRQ = 0 },
			"--srq needs 1 SRQs on rxe0 (one per thread), over its max_srq 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.QPs, c.Threads, c.SharedCQ, c.SRQ, c.CQDepth = tc.qps, tc.threads, tc.shared, tc.srq, tc.cqDepth
			lim := rxeLimits
			if tc.lim != nil {
				tc.lim(&lim)
			}
			err := checkLimits(c, limitedDev{lim: lim}, c.threadsOf())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted, want %q", tc.want)
			case err != nil && (!strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("error %q, want one line starting %q", err, tc.want)
			}
		})
	}
	// the simulated HCA checks each object as it is created
	if sim, err := verbs.OpenSim(verbs.DefaultNICModel()); err == nil {
		c := Defaults()
		c.QPs, c.Threads, c.SharedCQ = 4096, 1, true
		if err := checkLimits(c, sim, 1); err != nil {
			t.Errorf("the simulated HCA: %v", err)
		}
		sim.Close()
	}
}

// An SRQ's depth on a device stays within max_srq_wr and within the CQ
// its receives complete on.
func TestSRQDepthOnDevice(t *testing.T) {
	c := Defaults()
	lim := rxeLimits
	if got := srqDepth(c, limitedDev{lim: lim}, 8); got != 8*128 {
		t.Errorf("8 QPs of -t 128: depth %d, want 1024", got)
	}
	lim.MaxSRQWR = 500
	if got := srqDepth(c, limitedDev{lim: lim}, 8); got != 500 {
		t.Errorf("max_srq_wr 500: depth %d", got)
	}
	lim.MaxCQE = 300
	if got := srqDepth(c, limitedDev{lim: lim}, 8); got != 284 {
		t.Errorf("max_cqe 300: depth %d, want 284", got)
	}
}

// A device's CQ and SRQ truth says it is the application's and leaves out
// what only an HCA knows; the simulator's gives everything.
func TestQueueTruthJSON(t *testing.T) {
	cq := verbs.CQCounters{Polls: 9, EmptyPolls: 4, CQEs: 10, Depth: 63}
	srq := verbs.SRQCounters{Posted: 1100, Outstanding: 1024}
	tests := []struct {
		name      string
		v         any
		want      []string
		wantTruth string
	}{
		{"device CQ", CQTruth{Addr: 1, CQCounters: cq, App: true}, []string{"addr", "cqe", "cqes", "empty_polls", "polls", "truth"}, "application"},
		{"sim CQ", CQTruth{Addr: 1, CQCounters: cq}, []string{"addr", "cqe", "cqes", "empty_polls", "mod_count", "mod_period_us", "modifies", "overruns", "polls", "resizes", "truth"}, "hca"},
		{"device SRQ", SRQTruth{Addr: 2, Filled: 1024, SRQCounters: srq, App: true}, []string{"addr", "filled", "outstanding", "posted", "truth"}, "application"},
		{"sim SRQ", SRQTruth{Addr: 2, Filled: 1024, SRQCounters: srq}, []string{"addr", "filled", "outstanding", "posted", "truth"}, "hca"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.want) || m["truth"] != tc.wantTruth {
				t.Errorf("%s: keys %v, want %v with truth %q", b, keys, tc.want, tc.wantTruth)
			}
			if tc.name == "device CQ" && (m["polls"] != 9.0 || m["empty_polls"] != 4.0 || m["cqes"] != 10.0) {
				t.Errorf("%s", b)
			}
		})
	}
}

// A thread's QPs' application counts: each its own CQ's, or their sum on
// the CQ they share; the SRQ's receives are its fill and the reposts.
func TestAppQueueCounts(t *testing.T) {
	out := []QPResult{
		{App: AppCounters{Polls: 10, EmptyPolls: 3, CQEsPolled: 7, RecvsPosted: 5, RecvCQEs: 6}},
		{App: AppCounters{Polls: 20, EmptyPolls: 1, CQEsPolled: 19, RecvsPosted: 8, RecvCQEs: 8}},
	}
	own := appCQCounts(out, false)
	if own[0].Polls != 10 || own[0].EmptyPolls != 3 || own[0].CQEs != 7 || own[1].Polls != 20 || own[1].CQEs != 19 {
		t.Errorf("own CQs %+v", own)
	}
	for _, c := range appCQCounts(out, true) {
		if c.Polls != 30 || c.EmptyPolls != 4 || c.CQEs != 26 {
			t.Errorf("shared CQ %+v, want polls 30, empty 4, CQEs 26", c)
		}
	}
	if got := appSRQCounts(out, 100); got != (verbs.SRQCounters{Posted: 113, Outstanding: 99}) {
		t.Errorf("SRQ %+v, want posted 113 (100 filled, 13 reposted), outstanding 99", got)
	}
}
