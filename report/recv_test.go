package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/analyzer/streamtest"
)

// The receive side of senders sharing CQs, a receiver, an SRQ and QPs
// whose receives are not all known: each CQ once with its polls, each
// receive queue with its QP.
func TestReceiveSideText(t *testing.T) {
	snap := analyzertest.Run(t, analyzer.Options{}, streamtest.RecvRecording())
	var js bytes.Buffer
	if err := WriteJSON(&js, snap); err != nil {
		t.Fatal(err)
	}
	out := text(t, snap)
	// a CQ's polls are written once, on its own line, however many QPs share it
	if n := strings.Count(out, "polls 20 (empty 19)"); n != 1 {
		t.Errorf("the shared send CQ's polls are written %d times, want once:\n%s", n, out)
	}
	golden(t, "report_recv.txt.golden", []byte(out))
	golden(t, "report_recv.json.golden", js.Bytes())
}

// In counters mode the receives posted are written, what completions tell
// is not, and why once.
func TestReceiveSideCountersModeText(t *testing.T) {
	for _, counted := range []bool{true, false} {
		snap := snapshotOf(t, analyzer.Options{}, func(s *streamtest.Stream) { streamtest.CountedReceives(s, counted) })
		why := snap.ReceivesNotTraced
		if why == "" {
			t.Fatalf("counted %v: the snapshot says nothing of the receives not traced", counted)
		}
		out := text(t, snap)
		want := []string{"receive side: " + why, "QP 0x1d0 (qpn 464, pid 7, RC, found by its create)", "  sends: none traced",
			"send and recv CQ of 1 QP (0x1d0); polls 38110 (empty 31710), CQEs 6400\n",
			"note: 40 post calls were on QPs created before the tracer attached"}
		if counted {
			var r *analyzer.RecvQueue
			for _, q := range snap.QPs {
				if q.QPNum == 0x1d0 {
					r = q.Recv
				}
			}
			if r == nil || r.OutstandingUnknown == "" {
				t.Fatalf("the receiver's receives %+v: want them, without what is outstanding", r)
			}
			want = append(want, "  receives: 6400 posted in 1601 post_recv calls (1 failed); outstanding n/a: "+r.OutstandingUnknown)
		}
		checkText(t, out, want, []string{"consumed", "PCIe bytes are estimates"})
		if n := strings.Count(out, why); n != 1 {
			t.Errorf("counted %v: the reason is given %d times, want once:\n%s", counted, n, out)
		}
	}
}

// Why receives are not all in the snapshot is said once, after the CQs;
// nothing when they are.
func TestReceivesNotTracedText(t *testing.T) {
	for _, why := range []string{"", "ibv_post_recv was not traced (permission denied)"} {
		var b bytes.Buffer
		writeRecvSide(&b, &analyzer.Snapshot{ReceivesNotTraced: why})
		want := ""
		if why != "" {
			want = "receive side: " + why + "\n"
		}
		if b.String() != want {
			t.Errorf("got %q, want %q", b.String(), want)
		}
	}
}

// An extended CQ says so, its depth after a resize, and its completions
// that matched no WR.
func TestExtendedCQText(t *testing.T) {
	var b bytes.Buffer
	writeCQs(&b, []analyzer.CQ{{CQ: 0x5000, PID: 7, CQE: 127, Extended: true, Resizes: 1, UnmatchedExCQEs: 1, Polls: 2, CQEs: 4,
		SendQPs: []uint32{1, 2}, RecvQPs: []uint32{1, 2}}})
	want := "CQ 0x5000 (pid 7): depth 127, extended (ibv_start_poll..ibv_end_poll: completions matched to their QP by wr_id), resized 1 times; send and recv CQ of 2 QPs (0x1 0x2); polls 2 (empty 0), CQEs 4\n" +
		"  1 extended-poll completions matched no WR outstanding on this CQ's QPs (receive completions, or WRs not traced)\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
}

// A CQ lists at most 8 of its QPs, and how many more.
func TestQPList(t *testing.T) {
	for _, tc := range []struct {
		qps  []uint32
		want string
	}{
		{[]uint32{0x1c0}, "1 QP (0x1c0)"},
		{[]uint32{1, 2, 3}, "3 QPs (0x1 0x2 0x3)"},
		{[]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "10 QPs (0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 and 2 more)"},
	} {
		if got := qpList(tc.qps); got != tc.want {
			t.Errorf("qpList(%x) = %q, want %q", tc.qps, got, tc.want)
		}
	}
}
