package export

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

func TestUsec(t *testing.T) {
	tests := []struct {
		ns   uint64
		want string
	}{
		{0, "0.000"}, {1, "0.001"}, {999, "0.999"}, {1000, "1.000"}, {1234567, "1234.567"},
		{18446744073709551615, "18446744073709551.615"},
	}
	for _, tc := range tests {
		if got := string(appendUsec(nil, tc.ns)); got != tc.want {
			t.Errorf("usec(%d) = %s, want %s", tc.ns, got, tc.want)
		}
	}
}

// A post whose list or SGE lists the tracer cut says so in its arguments;
// a whole one carries no such argument.
func TestChromePostSaysWhatWasCut(t *testing.T) {
	var out bytes.Buffer
	x, err := New(&out, FormatChrome, Options{Recording: "r.sqscope", Info: trace.FileInfo{Target: "t"}, Instants: true})
	if err != nil {
		t.Fatal(err)
	}
	h := trace.Header{TimeNS: 1000, PID: 7, TID: 7}
	x.Event(&trace.QPCreate{Header: h, QP: 1, QPNum: 0x10, Type: trace.QPType(ibv.QPTRC),
		Caps: trace.Caps{MaxSendWR: 4096, MaxSendSGE: 30}, Via: "sqsim_create_qp"})
	whole := []trace.WR{{ID: 1, Opcode: ibv.WRSend, NumSGE: 1, Bytes: 64}}
	cut := []trace.WR{{ID: 2, Opcode: ibv.WRSend, NumSGE: 20, Bytes: 1024, SGEsNotSummed: 4},
		{ID: 3, Opcode: ibv.WRSend, NumSGE: 20, Bytes: 1024, SGEsNotSummed: 4}}
	h.TimeNS = 2000
	x.Event(&trace.Post{Header: h, QP: 1, QPNum: 0x10, WRs: whole, Accepted: 1})
	h.TimeNS = 3000
	x.Event(&trace.Post{Header: h, QP: 1, QPNum: 0x10, WRs: cut, Truncated: 1022, Accepted: 1024, WalkCapped: true})
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OtherData   map[string]string `json:"otherData"`
		TraceEvents []struct {
			Name string         `json:"name"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if doc.OtherData["recording"] != "r.sqscope" || doc.OtherData["target"] != "t" || doc.OtherData["clock"] != "CLOCK_MONOTONIC" {
		t.Errorf("otherData %v", doc.OtherData)
	}
	var posts []map[string]any
	for _, ev := range doc.TraceEvents {
		if ev.Name == "ibv_post_send" {
			posts = append(posts, ev.Args)
		}
	}
	if len(posts) != 2 {
		t.Fatalf("%d post slices, want 2:\n%s", len(posts), out.String())
	}
	if _, ok := posts[0]["walk_capped"]; ok {
		t.Errorf("whole post says walk_capped: %v", posts[0])
	}
	if _, ok := posts[0]["sges_not_summed"]; ok {
		t.Errorf("whole post says sges_not_summed: %v", posts[0])
	}
	if posts[1]["walk_capped"] != true || posts[1]["sges_not_summed"] != float64(8) || posts[1]["n"] != float64(1024) {
		t.Errorf("cut post args %v, want walk_capped true, sges_not_summed 8, n 1024", posts[1])
	}
}
