package probe

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/sqscope/sqscope/trace"
)

// A thread posting to more QPs in turn than its cache of QP numbers holds
// gets each post's number right, and so does the QP made at a destroyed
// one's address, in both modes (testdata/target.c, turns).
func TestQPNumbersInTurn(t *testing.T) {
	requireBPF(t)
	const rounds = 3
	for _, q := range []int{1, 4, 200} { // 200: more than the 128 the cache holds
		for _, mode := range []Mode{ModeEvents, ModeCounters} {
			t.Run(fmt.Sprintf("qps=%d/%s", q, map[Mode]string{ModeEvents: "events", ModeCounters: "counters"}[mode]), func(t *testing.T) {
				out, evs, _ := traceRun(t, Options{Mode: mode}, "turns", strconv.Itoa(q), strconv.Itoa(rounds))
				var did struct{ Halves [2][][2]uint64 }
				if err := json.Unmarshal(out, &did); err != nil || len(did.Halves[0]) != q || len(did.Halves[1]) != q {
					t.Fatalf("target said %q (%v): want %d QPs in each half", out, err, q)
				}
				old, new := did.Halves[0][0], did.Halves[1][0]
				if old[0] != new[0] || old[1] == new[1] {
					t.Fatalf("first QP %v, its replacement %v: want a new number at the same address", old, new)
				}
				if mode == ModeEvents {
					checkPostQPNums(t, evs, did.Halves, rounds)
				} else {
					checkCounterQPNums(t, evs, did.Halves, rounds)
				}
			})
		}
	}
}

// checkPostQPNums requires the posts, in order, to name each half's QPs
// by their numbers.
func checkPostQPNums(t *testing.T, evs []trace.Event, halves [2][][2]uint64, rounds int) {
	t.Helper()
	var posts []*trace.Post
	for _, e := range evs {
		if p, ok := e.(*trace.Post); ok {
			posts = append(posts, p)
		}
	}
	q := len(halves[0])
	if len(posts) != 2*rounds*q {
		t.Fatalf("%d posts traced, want %d", len(posts), 2*rounds*q)
	}
	bad := 0
	for i, p := range posts {
		want := halves[i/(rounds*q)][i%q]
		if p.QP != want[0] || uint64(p.QPNum) != want[1] {
			if bad++; bad <= 5 {
				t.Errorf("post %d: QP %#x number %d, want %#x number %d", i, p.QP, p.QPNum, want[0], want[1])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d posts with the wrong QP or number", bad, len(posts))
	}
}

// checkCounterQPNums requires each QP generation's totals to carry its
// number and its posts.
func checkCounterQPNums(t *testing.T, evs []trace.Event, halves [2][][2]uint64, rounds int) {
	t.Helper()
	type qpGen struct{ qp, gen uint64 }
	num := map[qpGen]uint32{}
	counters := map[qpGen]*trace.QPCounters{}
	for _, e := range evs {
		switch e := e.(type) {
		case *trace.QPCreate:
			num[qpGen{e.QP, e.Gen}] = e.QPNum
		case *trace.QPCounters: // totals: the last one counts
			counters[qpGen{e.QP, e.Gen}] = e
		}
	}
	// posts per QP number: the first QP's two numbers have one half each
	want := map[uint32]uint64{}
	for _, h := range halves {
		for _, qp := range h {
			want[uint32(qp[1])] += uint64(rounds)
		}
	}
	got := map[uint32]uint64{}
	for k, c := range counters {
		n, ok := num[k]
		if !ok {
			t.Errorf("totals of QP %#x generation %d, which no create named", k.qp, k.gen)
			continue
		}
		if c.QPNum != n {
			t.Errorf("totals of QP %#x generation %d: number %d, want %d", k.qp, k.gen, c.QPNum, n)
		}
		got[n] += c.PostCalls
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("QP number %d: %d posts counted, want %d", n, got[n], w)
		}
	}
}
