package probe

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/trace"
)

// postRecord is r as the ring buffer hands it over: cut after wrs[n].
func postRecord(r *bpf.VerbsSqPostRec) []byte {
	b := unsafe.Slice((*byte)(unsafe.Pointer(r)), unsafe.Sizeof(*r))
	return append([]byte(nil), b[:postWRsOff+int(r.N)*wrSize]...)
}

// The post record's cuts (a list walk capped, SGEs past the SGE bound)
// reach the trace event, with and without reused events (where a post
// without cuts follows posts with them).
func TestDecodePostCuts(t *testing.T) {
	wr := func(id uint64, nsge uint32, over uint8) bpf.VerbsSqWr {
		return bpf.VerbsSqWr{WrId: id, SendFlags: 2, Bytes: 64 * min(nsge, 16), NumSge: nsge, Opcode: 2, SgeOver: over}
	}
	tests := []struct {
		name string
		rec  bpf.VerbsSqPostRec
		want trace.Post
	}{
		{"SGEs past the bound",
			bpf.VerbsSqPostRec{N: 2, Accepted: 2, Wrs: [64]bpf.VerbsSqWr{wr(1, 20, 4), wr(2, 300, 255)}},
			trace.Post{Accepted: 2, WRs: []trace.WR{
				{ID: 1, Opcode: 2, Flags: 2, NumSGE: 20, Bytes: 1024, SGEsNotSummed: 4},
				{ID: 2, Opcode: 2, Flags: 2, NumSGE: 300, Bytes: 1024, SGEsNotSummed: 255}}}},
		{"list walk capped",
			bpf.VerbsSqPostRec{N: 1, Truncated: 1023, Accepted: 1024, WalkCapped: 1, Wrs: [64]bpf.VerbsSqWr{wr(1, 1, 0)}},
			trace.Post{Truncated: 1023, Accepted: 1024, WalkCapped: true,
				WRs: []trace.WR{{ID: 1, Opcode: 2, Flags: 2, NumSGE: 1, Bytes: 64}}}},
		{"nothing cut",
			bpf.VerbsSqPostRec{N: 1, Accepted: 1, Wrs: [64]bpf.VerbsSqWr{wr(1, 1, 0)}},
			trace.Post{Accepted: 1, WRs: []trace.WR{{ID: 1, Opcode: 2, Flags: 2, NumSGE: 1, Bytes: 64}}}},
	}
	for _, reuse := range []bool{false, true} {
		tr := &Tracer{opts: Options{ReuseEvents: reuse}}
		for _, tc := range tests {
			t.Run(fmt.Sprintf("reuse=%v/%s", reuse, tc.name), func(t *testing.T) {
				tc.rec.Hdr = bpf.VerbsSqHdr{Ts: 2000, Pid: 7, Tid: 8, Kind: uint8(bpf.VerbsSqRecKindSQ_REC_POST)}
				tc.rec.Qp, tc.rec.QpNum = 0x1000, 0x21
				tc.want.Header = trace.Header{TimeNS: 2000, PID: 7, TID: 8}
				tc.want.QP, tc.want.QPNum = 0x1000, 0x21
				var got []trace.Event
				if err := tr.handle(postRecord(&tc.rec), func(ev trace.Event) { got = append(got, ev) }); err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || !reflect.DeepEqual(got[0], &tc.want) {
					t.Fatalf("got %+v\nwant %+v", got, &tc.want)
				}
			})
		}
	}
}

// A return value ibv_post_send never gives is said once: the probe may be
// on the wrong function.
func TestOddReturnValuesWarn(t *testing.T) {
	var tr Tracer
	for _, ret := range []int32{0, 12, 22} {
		tr.postEvent(&bpf.VerbsSqPostRec{Ret: ret})
	}
	if w := tr.Warnings(); len(w) != 0 {
		t.Fatalf("warnings for return values post_send gives: %q", w)
	}
	tr.postEvent(&bpf.VerbsSqPostRec{Ret: -14})
	tr.postEvent(&bpf.VerbsSqPostRec{Ret: 1 << 20})
	if w := tr.Warnings(); len(w) != 1 || !strings.Contains(w[0], "return value of -14, which ibv_post_send never returns") {
		t.Fatalf("warnings %q", w)
	}
}
