package advise

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/verbs/nicmodel"
)

func TestCapsFor(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		ovh, wr, inl, sge      uint32
		ok                     bool
		maxWR, maxInl, maxSGEs uint32
	}{
		{"legacy RC, no inline", 192, 128, 0, 1, true, 128, 60, 1},
		{"legacy RC, 256 B inline", 192, 128, 256, 1, true, 128, 316, 1},
		{"legacy RC, 100 WRs round up", 192, 100, 0, 1, true, 128, 60, 1},
		{"sends only", 16, 100, 0, 1, true, 128, 44, 1},
		{"UD 64 inline, 192 B WQEs", 64, 64, 64, 1, true, 85, 124, 1},
		{"past the WQE limit", 192, 128, 1000, 1, false, 0, 0, 0},
		{"past max_qp_wr", 192, 65536, 0, 1, false, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := capsFor(tc.ovh, tc.wr, tc.inl, tc.sge)
			if ok != tc.ok || c.MaxSendWR != tc.maxWR || c.MaxInlineData != tc.maxInl || c.MaxSendSGE != tc.maxSGEs {
				t.Errorf("capsFor = %+v, %t; want max_send_wr %d, max_inline_data %d, max_send_sge %d, %t",
					c, ok, tc.maxWR, tc.maxInl, tc.maxSGEs, tc.ok)
			}
		})
	}
}

func TestOverhead(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  trace.QPType
		caps trace.Caps
		want uint32
	}{
		{"legacy RC", trace.QPTypeRC, trace.Caps{MaxInlineData: 60, MaxSendSGE: 1}, 192},
		{"legacy RC with inline", trace.QPTypeRC, trace.Caps{MaxInlineData: 316, MaxSendSGE: 1}, 192},
		{"sends only", trace.QPTypeRC, trace.Caps{MaxInlineData: 44, MaxSendSGE: 1}, 16},
		{"RDMA", trace.QPTypeRC, trace.Caps{MaxInlineData: 28, MaxSendSGE: 1}, 32},
		{"UD", trace.QPTypeUD, trace.Caps{MaxInlineData: 188, MaxSendSGE: 1}, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := overhead(tc.typ, tc.caps); got != tc.want {
				t.Errorf("overhead = %d, want %d", got, tc.want)
			}
		})
	}
}

// sends is a legacy RC stream of n SENDs of size bytes, one SGE each.
func sends(n int, size uint32) *Stream {
	s := &Stream{PID: 7, QPNum: 0x10, Type: trace.QPTypeRC, Caps: trace.Caps{MaxSendWR: 128, MaxInlineData: 60, MaxSendSGE: 1}, Overhead: 192, via: "sqsim_create_qp"}
	for range n {
		s.WRs = append(s.WRs, WR{Opcode: ibv.WRSend, Bytes: size, NumSGE: 1})
	}
	return s
}

func testModel() Model {
	return Model{NIC: nicmodel.Model{LinkGbps: 1, WQENS: 10, DMAReadNS: 450, RTTNS: 1500}, BF: analyzer.DefaultBF}
}

func TestReplay(t *testing.T) {
	const occ = 10 + 256*8 // ns per 256 B WR on a 1 Gb/s link
	for _, tc := range []struct {
		name                              string
		set                               Settings
		doorbells, bf, wqe, payload, cqes uint64
		peak                              uint64
		ns                                uint64 // first post to last completion
		overflow                          bool
	}{
		// one WR per call: BlueFlame (a 32 B WQE), payload read, a CQE each
		{"naive", Settings{0, 1, 1, 16}, 64, 64, 0, 64, 64, 16, 450 + 64*occ + 1500, false},
		// 8 per call: a WQE fetch per call; inline: no payload read;
		// signal 1/16: 4 CQEs (the last WR is the 64th)
		{"batched inline", Settings{256, 16, 8, 32}, 8, 0, 8, 0, 4, 32, 450 + 64*occ + 1500, false},
		// all 64 in one call, depth 64: the engine is never idle
		{"one call", Settings{256, 64, 64, 64}, 1, 0, 1, 0, 1, 64, 450 + 64*occ + 1500, false},
		// never signaled, the SQ fills with no completion due
		{"never signaled", Settings{0, 0, 1, 16}, 0, 0, 0, 0, 0, 0, 0, true},
		// a signal interval the depth cannot reach with lists of 3
		{"interval past the depth", Settings{0, 16, 3, 16}, 0, 0, 0, 0, 0, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := replay(sends(64, 256), tc.set, testModel(), 0)
			if (p.Overflow != "") != tc.overflow {
				t.Fatalf("overflow %q, want %t", p.Overflow, tc.overflow)
			}
			if tc.overflow {
				return
			}
			if p.Doorbells != tc.doorbells || p.BFWrites != tc.bf || p.DMAReadsWQE != tc.wqe || p.DMAReadsPayload != tc.payload ||
				p.CQEWrites != tc.cqes || p.PeakOutstanding != tc.peak || p.ReplayedWRs != 64 {
				t.Errorf("got doorbells %d bf %d wqe %d payload %d cqes %d peak %d wrs %d; want %d %d %d %d %d %d 64",
					p.Doorbells, p.BFWrites, p.DMAReadsWQE, p.DMAReadsPayload, p.CQEWrites, p.PeakOutstanding, p.ReplayedWRs,
					tc.doorbells, tc.bf, tc.wqe, tc.payload, tc.cqes, tc.peak)
			}
			if tc.set.MaxSendWR == 64 && p.Seconds != float64(tc.ns)/1e9 {
				t.Errorf("NIC time %v s, want %v", p.Seconds, float64(tc.ns)/1e9)
			}
		})
	}
}

// A queue too shallow for the round trip: a window of 16 WRs signaled
// every 16th runs 16 WRs per cycle of the gather (the WQE comes by
// BlueFlame), 16 WRs on the wire and the ACK.
func TestReplayWindowBound(t *testing.T) {
	const occ = 10 + 256*8
	p := replay(sends(64, 256), Settings{0, 16, 1, 16}, testModel(), 0)
	cycle := float64(450+16*occ+1500) / 1e9
	want := 64 / (4 * cycle)
	if d := p.WRsPerSec/want - 1; d > 0.01 || d < -0.01 {
		t.Errorf("WR/s %.0f, want %.0f within 1%%", p.WRsPerSec, want)
	}
}

func TestPareto(t *testing.T) {
	pred := func(rate float64, bytes uint64, overflow string) Prediction {
		return Prediction{WRsPerSec: rate, PCIeBytes: bytes, ReplayedWRs: 1, Overflow: overflow}
	}
	for _, tc := range []struct {
		name string
		in   []Prediction
		want []int // indices kept
	}{
		{"dominated", []Prediction{pred(100, 500, ""), pred(200, 400, "")}, []int{1}},
		{"trade-off", []Prediction{pred(100, 300, ""), pred(200, 400, "")}, []int{0, 1}},
		{"overflow left out", []Prediction{pred(100, 500, ""), pred(300, 100, "ENOMEM")}, []int{0}},
		{"equal within the rate's resolution: fewer bytes", []Prediction{pred(1000, 500, ""), pred(995, 400, "")}, []int{1}},
		{"equal: the first", []Prediction{pred(100, 400, ""), pred(100, 400, "")}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pareto(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("kept %d, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				if got[i] != tc.in[w] {
					t.Errorf("kept #%d = %+v, want %+v", i, got[i], tc.in[w])
				}
			}
		})
	}
}

func TestChanges(t *testing.T) {
	s := sends(1, 256)
	cur := Settings{0, 1, 1, 128}
	p := Prediction{Settings: Settings{256, 32, 8, 256}}
	got := changes(s, cur, p)
	want := []string{
		"post WRs of <= 256 B with IBV_SEND_INLINE (create the QP with max_inline_data >= 256)",
		"signal one WR in every 32",
		"post 8 WRs per call (a list linked by next, or one ibv_wr_start..ibv_wr_complete)",
		"create the QP with max_send_wr >= 256 and keep at most that many outstanding",
	}
	if len(got) != len(want) {
		t.Fatalf("changes = %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d = %q, want %q", i, got[i], want[i])
		}
	}
	if got := changes(s, cur, Prediction{Settings: cur}); len(got) != 1 || got[0] != "keep the current settings" {
		t.Errorf("no change = %q", got)
	}
}

// record writes evs as a recording and opens it.
func record(t *testing.T, evs ...trace.Event) *trace.Reader {
	t.Helper()
	r, err := trace.Open(recording(t, evs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// recording writes evs as a recording and returns its path.
func recording(t *testing.T, evs ...trace.Event) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.sqscope")
	w, err := trace.Create(path, trace.FileInfo{Target: "app", TargetPID: 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad(t *testing.T) {
	h := func(ns uint64) trace.Header { return trace.Header{TimeNS: ns, PID: 7, TID: 7} }
	create := &trace.QPCreate{Header: h(1), QP: 1, QPNum: 0x10, Type: trace.QPTypeRC, SendCQ: 2, RecvCQ: 2,
		Caps: trace.Caps{MaxSendWR: 128, MaxInlineData: 60, MaxSendSGE: 1}, Via: "ibv_create_qp", Lib: "/usr/lib/libmlx5.so.1"}
	rxe := *create
	rxe.Lib = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
	post := func(ns uint64, flags uint32, n int) *trace.Post {
		p := &trace.Post{Header: h(ns), QP: 1, QPNum: 0x10, Accepted: uint32(n)}
		for i := range n {
			p.WRs = append(p.WRs, trace.WR{ID: ns*100 + uint64(i), Opcode: ibv.WRSend, Flags: flags, NumSGE: 1, Bytes: 48})
		}
		return p
	}
	rxe2 := rxe
	rxe2.QP, rxe2.QPNum = 2, 0x20
	rxePost := post(40, 0, 3)
	rxePost.QP, rxePost.QPNum = 2, 0x20
	for _, tc := range []struct {
		name string
		evs  []trace.Event
		err  error
		cur  Settings
		not  []NotAdvised
	}{
		{"events", []trace.Event{create, post(10, ibv.SendInline, 4), post(20, ibv.SendInline|ibv.SendSignaled, 4), post(30, 0, 2)}, nil,
			Settings{InlineUpTo: 48, SignalEvery: 0, PostList: 4, MaxSendWR: 128}, nil},
		{"counters mode", []trace.Event{create, &trace.QPCounters{Header: h(10), QP: 1, QPNum: 0x10, PostCalls: 4, WRs: 4, Doorbells: 4}}, ErrNoDetail, Settings{},
			[]NotAdvised{{PID: 7, QPNum: 0x10, Err: ErrNoDetail}}},
		{"no create", []trace.Event{post(10, 0, 1)}, ErrNoCaps, Settings{}, []NotAdvised{{PID: 7, QPNum: 0x10, Err: ErrNoCaps}}},
		{"rxe", []trace.Event{&rxe, post(10, 0, 1)}, ErrNotMlx5, Settings{}, []NotAdvised{{PID: 7, QPNum: 0x10, Provider: "rxe", Err: ErrNotMlx5}}},
		{"mlx5 and rxe: the mlx5 QP advised, the rxe one said", []trace.Event{create, &rxe2, post(10, ibv.SendInline, 4),
			post(20, ibv.SendInline|ibv.SendSignaled, 4), rxePost, post(30, 0, 2)}, nil,
			Settings{InlineUpTo: 48, SignalEvery: 0, PostList: 4, MaxSendWR: 128}, []NotAdvised{{PID: 7, QPNum: 0x20, Provider: "rxe", Err: ErrNotMlx5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, not, _, err := Load(context.Background(), record(t, tc.evs...), analyzer.DefaultBF)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Load: %v, want %v", err, tc.err)
			}
			if len(not) != len(tc.not) {
				t.Fatalf("not advised %+v, want %+v", not, tc.not)
			}
			for i, n := range not {
				w := tc.not[i]
				if n.PID != w.PID || n.QPNum != w.QPNum || n.Provider != w.Provider || n.Err != w.Err || !strings.Contains(n.Why, w.Err.Error()) {
					t.Errorf("not advised %+v, want %+v", n, w)
				}
			}
			if err != nil {
				return
			}
			if len(ss) != 1 || len(ss[0].WRs) != 10 || ss[0].Overhead != 192 {
				t.Fatalf("streams %d, WRs %d, overhead %d", len(ss), len(ss[0].WRs), ss[0].Overhead)
			}
			if ss[0].Current.InlineUpTo != tc.cur.InlineUpTo || ss[0].Current.PostList != tc.cur.PostList || ss[0].Current.MaxSendWR != tc.cur.MaxSendWR {
				t.Errorf("current %+v, want %+v", ss[0].Current, tc.cur)
			}
		})
	}
}

// LoadSome keeps only the streams of the QPs selected, each up to the
// bound: the others are left out, a longer one is not advised on
// (ErrTooLong) and its WRs are not held.
func TestLoadSome(t *testing.T) {
	h := func(ns uint64) trace.Header { return trace.Header{TimeNS: ns, PID: 7, TID: 7} }
	create := func(qp uint64, qpn uint32, lib string) *trace.QPCreate {
		return &trace.QPCreate{Header: h(1), QP: qp, QPNum: qpn, Type: trace.QPTypeRC, SendCQ: 2, RecvCQ: 2,
			Caps: trace.Caps{MaxSendWR: 128, MaxInlineData: 60, MaxSendSGE: 1}, Via: "ibv_create_qp", Lib: lib}
	}
	post := func(ns, qp uint64, qpn uint32, n int) *trace.Post {
		p := &trace.Post{Header: h(ns), QP: qp, QPNum: qpn, Accepted: uint32(n)}
		for i := range n {
			p.WRs = append(p.WRs, trace.WR{ID: ns*100 + uint64(i), Opcode: ibv.WRSend, NumSGE: 1, Bytes: 48})
		}
		return p
	}
	const mlx5, rxe = "/usr/lib/libmlx5.so.1", "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
	// QP 0x10: 10 WRs in three posts; 0x30: 3 WRs; 0x20 on rxe
	evs := []trace.Event{create(1, 0x10, mlx5), create(2, 0x20, rxe), create(3, 0x30, mlx5),
		post(10, 1, 0x10, 4), post(20, 2, 0x20, 2), post(30, 3, 0x30, 3), post(40, 1, 0x10, 4), post(50, 1, 0x10, 2)}
	only := func(qpns ...uint32) func(pid, qpn uint32) bool {
		return func(pid, qpn uint32) bool { return pid == 7 && slices.Contains(qpns, qpn) }
	}
	for _, tc := range []struct {
		name    string
		sel     Select
		err     error
		streams map[uint32]int // WRs of each stream kept
		not     map[uint32]error
	}{
		{"all", Select{}, nil, map[uint32]int{0x10: 10, 0x30: 3}, map[uint32]error{0x20: ErrNotMlx5}},
		{"one QP", Select{Keep: only(0x30)}, nil, map[uint32]int{0x30: 3}, nil},
		{"the bound", Select{MaxWRs: 5}, nil, map[uint32]int{0x30: 3}, map[uint32]error{0x10: ErrTooLong, 0x20: ErrNotMlx5}},
		{"at the bound", Select{Keep: only(0x10), MaxWRs: 10}, nil, map[uint32]int{0x10: 10}, nil},
		{"only one past the bound", Select{Keep: only(0x10), MaxWRs: 9}, ErrTooLong, nil, map[uint32]error{0x10: ErrTooLong}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, not, _, err := LoadSome(context.Background(), record(t, evs...), analyzer.DefaultBF, tc.sel)
			if !errors.Is(err, tc.err) {
				t.Fatalf("LoadSome: %v, want %v", err, tc.err)
			}
			got := map[uint32]int{}
			for _, s := range ss {
				got[s.QPNum] = len(s.WRs)
			}
			if len(got) != len(tc.streams) {
				t.Fatalf("streams %v, want %v", got, tc.streams)
			}
			for q, n := range tc.streams {
				if got[q] != n {
					t.Errorf("QP %#x: %d WRs, want %d", q, got[q], n)
				}
			}
			if len(not) != len(tc.not) {
				t.Fatalf("not advised %+v, want %v", not, tc.not)
			}
			for _, n := range not {
				if n.Err != tc.not[n.QPNum] || n.Why == "" {
					t.Errorf("QP %#x not advised: %v (%q), want %v", n.QPNum, n.Err, n.Why, tc.not[n.QPNum])
				}
			}
		})
	}
}

// advise --json writes one JSON document however it ends: the advice, the
// QPs it cannot advise on and why, and the error that ends it, which Run
// returns too (exit status 1).
func TestRunJSON(t *testing.T) {
	h := func(ns uint64) trace.Header { return trace.Header{TimeNS: ns, PID: 7, TID: 7} }
	caps := trace.Caps{MaxSendWR: 128, MaxInlineData: 60, MaxSendSGE: 1}
	create := func(qp uint64, qpn uint32, lib string) *trace.QPCreate {
		return &trace.QPCreate{Header: h(1), QP: qp, QPNum: qpn, Type: trace.QPTypeRC, SendCQ: 9, RecvCQ: 9, Caps: caps, Via: "ibv_create_qp", Lib: lib}
	}
	post := func(ns, qp uint64, qpn uint32) *trace.Post {
		p := &trace.Post{Header: h(ns), QP: qp, QPNum: qpn, Accepted: 2}
		for i := range 2 {
			p.WRs = append(p.WRs, trace.WR{ID: ns*10 + uint64(i), Opcode: ibv.WRSend, Flags: ibv.SendSignaled, NumSGE: 1, Bytes: 64})
		}
		return p
	}
	const rxeLib = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
	rxeOnly := recording(t, create(1, 0x10, rxeLib), post(10, 1, 0x10), post(20, 1, 0x10))
	mixed := recording(t, create(1, 0x10, rxeLib), create(2, 0x11, "/usr/lib/libmlx5.so.1"), post(10, 1, 0x10), post(20, 2, 0x11), post(30, 2, 0x11))
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, []byte("not a recording"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{Model: Model{NIC: nicmodel.Model{LinkGbps: 100, WQENS: 50, DMAReadNS: 300, RTTNS: 2000}},
		BF: func(trace.FileInfo) analyzer.BFConfig { return analyzer.DefaultBF }}
	for _, tc := range []struct {
		name, path string
		json       bool
		errIs      error  // Run's error
		errText    string // in Run's error and the document's
		qps        int
		notAdvised string // the provider of the one QP not advised on
		text       string // in the text on stdout
	}{
		{"rxe only", rxeOnly, true, ErrNotMlx5, "QP 0x10 (pid 7) runs on provider rxe", 0, "rxe", ""},
		{"rxe and mlx5", mixed, true, nil, "", 1, "rxe", ""},
		{"not a recording", junk, true, nil, "advise: ", 0, "", ""},
		{"rxe only, text", rxeOnly, false, ErrNotMlx5, "runs on provider rxe", 0, "", ""},
		{"rxe and mlx5, text", mixed, false, nil, "", 1, "", "QP 0x10 (pid 7): not advised: it runs on provider rxe: advise replays through the mlx5 model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o.JSON = tc.json
			var stdout, stderr strings.Builder
			err := Run(context.Background(), tc.path, o, &stdout, &stderr)
			if tc.errText == "" && err != nil || tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)) ||
				tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Fatalf("Run: %v, want an error saying %q", err, tc.errText)
			}
			if !tc.json {
				if tc.text != "" && !strings.Contains(stdout.String(), tc.text) || tc.text == "" && stdout.Len() > 0 {
					t.Errorf("stdout:\n%s\nwant it to say %q", stdout.String(), tc.text)
				}
				return
			}
			var rep struct {
				Error      *string
				QPs        []map[string]any
				NotAdvised []NotAdvised `json:"not_advised"`
				Limits     []string
			}
			dec := json.NewDecoder(strings.NewReader(stdout.String()))
			if err := dec.Decode(&rep); err != nil || dec.More() {
				t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout.String())
			}
			if tc.errText == "" && rep.Error != nil || tc.errText != "" && (rep.Error == nil || !strings.Contains(*rep.Error, tc.errText)) {
				t.Errorf("error %v, want %q", rep.Error, tc.errText)
			}
			if rep.QPs == nil || len(rep.QPs) != tc.qps || len(rep.Limits) == 0 {
				t.Errorf("qps %v, want a list of %d; limits %v", rep.QPs, tc.qps, rep.Limits)
			}
			if tc.notAdvised == "" && len(rep.NotAdvised) != 0 ||
				tc.notAdvised != "" && (len(rep.NotAdvised) != 1 || rep.NotAdvised[0].Provider != tc.notAdvised || rep.NotAdvised[0].QPNum != 0x10 ||
					!strings.Contains(rep.NotAdvised[0].Why, "mlx5 model")) {
				t.Errorf("not advised %+v, want QP 0x10 on %q", rep.NotAdvised, tc.notAdvised)
			}
		})
	}
}

// Advising stops when its context is done (Ctrl-C), with the context's
// error, and advises as before when it is not.
func TestAdviseInterrupted(t *testing.T) {
	create := &trace.QPCreate{Header: trace.Header{TimeNS: 1, PID: 7}, QP: 1, QPNum: 0x10, Type: trace.QPTypeRC,
		Caps: trace.Caps{MaxSendWR: 128, MaxInlineData: 60, MaxSendSGE: 1}, Via: "sqsim_create_qp"}
	var evs []trace.Event
	evs = append(evs, create)
	for i := range 200 {
		evs = append(evs, &trace.Post{Header: trace.Header{TimeNS: uint64(10 + i), PID: 7}, QP: 1, QPNum: 0x10,
			WRs: []trace.WR{{ID: uint64(i), Opcode: ibv.WRSend, Flags: ibv.SendSignaled, NumSGE: 1, Bytes: 64}}, Accepted: 1})
	}
	ss, _, _, err := Load(context.Background(), record(t, evs...), analyzer.DefaultBF)
	if err != nil || len(ss) != 1 {
		t.Fatalf("Load: %d streams, %v", len(ss), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ads, err := Advise(ctx, ss, Model{BF: analyzer.DefaultBF}); !errors.Is(err, context.Canceled) || ads != nil {
		t.Errorf("advising after Ctrl-C: %d advices, %v; want none and context.Canceled", len(ads), err)
	}
	if ads, err := Advise(context.Background(), ss, Model{BF: analyzer.DefaultBF}); err != nil || len(ads) != 1 {
		t.Errorf("advising: %d advices, %v; want one", len(ads), err)
	}
}
