package session

import (
	"fmt"
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The prefix of a window re-creates what was created before its first
// block and had not ended before it: with the last state and depth, the
// QP marked as a window's, in the order processes, probes, CQs, QPs.
func TestFlightPrefix(t *testing.T) {
	h := func(ns uint64, pid uint32) trace.Header { return trace.Header{TimeNS: ns, PID: pid, TID: pid} }
	o := newFlightObjects()
	steps := []struct {
		seq uint64
		ev  trace.Event
	}{
		{0, &trace.Proc{Header: h(1, 7), How: trace.ProcTarget, Comm: "app"}},
		{0, &trace.Attach{Header: h(2, 7), Func: "post_send", Path: "/lib/libmlx5.so.1", How: "symbol"}},
		{0, &trace.CQCreate{Header: h(3, 7), CQ: 0xc0, Gen: 1, CQE: 64}},
		{0, &trace.QPCreate{Header: h(4, 7), QP: 0xa0, QPNum: 0x11, Type: trace.QPTypeRC, SendCQ: 0xc0,
			Caps: trace.Caps{MaxSendWR: 64}, Via: "ibv_create_qp", Lib: "libmlx5.so.1", Gen: 2}},
		{1, &trace.QPModify{Header: h(5, 7), QP: 0xa0, QPNum: 0x11, State: ibv.QPSInit}},
		{1, &trace.QPModify{Header: h(6, 7), QP: 0xa0, QPNum: 0x11, State: ibv.QPSRTS}},
		{1, &trace.QPModify{Header: h(7, 7), QP: 0xa0, QPNum: 0x11, State: ibv.QPSErr, Ret: ibv.EINVAL}}, // failed: no change
		{1, &trace.CQChange{Header: h(8, 7), Op: trace.CQOpResize, CQ: 0xc0, CQE: 256}},
		// a QP ended before the window: not in it
		{1, &trace.QPCreate{Header: h(9, 7), QP: 0xb0, QPNum: 0x12, Via: "ibv_create_qp"}},
		{2, &trace.QPDestroy{Header: h(10, 7), QP: 0xb0, QPNum: 0x12}},
		// a QP ended inside the window: in it, its destroy follows there
		{2, &trace.QPCreate{Header: h(11, 7), QP: 0xd0, QPNum: 0x13, Via: "ibv_create_qp"}},
		{3, &trace.QPDestroy{Header: h(12, 7), QP: 0xd0, QPNum: 0x13}},
		// created in the window: the window holds its create
		{3, &trace.QPCreate{Header: h(13, 7), QP: 0xe0, QPNum: 0x14, Via: "ibv_create_qp"}},
		{3, &trace.Attach{Header: h(14, 7), Func: "poll_cq", How: "symbol"}},
	}
	for _, s := range steps {
		o.note(s.ev, s.seq)
	}
	got := o.prefix(3, 1000)
	want := []string{"proc", "attach post_send", "cq_create", "cq_change resize 256", "qp_create 0x11 RTS window", "qp_modify 0x11 RTS", "qp_create 0x13 RESET window"}
	var names []string
	for _, ev := range got {
		if ev.Hdr().TimeNS != 1000 {
			t.Errorf("%s at %d, want the window's start", ev.Kind(), ev.Hdr().TimeNS)
		}
		n := ev.Kind().String()
		switch e := ev.(type) {
		case *trace.Attach:
			n += " " + e.Func
		case *trace.CQChange:
			n += " " + e.Op.String() + " " + fmt.Sprint(e.CQE)
		case *trace.QPCreate:
			n += " " + fmt.Sprintf("%#x", e.QPNum) + " " + ibv.QPStateName(e.State)
			if e.Window {
				n += " window"
			}
			if e.QPNum == 0x11 && (e.Via != "ibv_create_qp" || e.Lib != "libmlx5.so.1" || e.Caps.MaxSendWR != 64) {
				t.Errorf("QP 0x11 re-created as %+v, want its create's Via, Lib and caps", e)
			}
		case *trace.QPModify:
			n += " " + fmt.Sprintf("%#x", e.QPNum) + " " + ibv.QPStateName(e.State)
		}
		names = append(names, n)
	}
	if len(names) != len(want) {
		t.Fatalf("prefix %q\nwant   %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("prefix %q\nwant   %q", names, want)
			break
		}
	}
	// the ring let go of blocks 0 to 2: the QP destroyed in block 2 is
	// forgotten, the one destroyed in block 3 kept
	o.forget(3)
	if _, ok := o.objs[objKey{trace.KindQPCreate, 7, 0xb0}]; ok {
		t.Errorf("a QP whose end left the ring is still kept")
	}
	if _, ok := o.objs[objKey{trace.KindQPCreate, 7, 0xd0}]; !ok {
		t.Errorf("a QP whose end is in the ring was forgotten")
	}
	// the process exits: all its objects end; the probes stay
	o.note(&trace.Exit{Header: h(20, 7)}, 4)
	if p := o.prefix(5, 2000); len(p) != 2 || p[0].Kind() != trace.KindAttach || p[1].Kind() != trace.KindAttach {
		t.Errorf("after the exit, a window from block 5 starts with %d events, want the 2 probes", len(p))
	}
}
