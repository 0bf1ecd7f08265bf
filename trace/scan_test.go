package trace

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// scanEvents are the events and fields added for tracing a running
// process: a QP found in memory with its state, a probe found through a
// debug file, and what the memory scan read.
func scanEvents() []Event {
	h := func(ns uint64) Header { return Header{TimeNS: ns, PID: 4242} }
	return []Event{
		&Scan{Header: h(7_000_000), Bytes: 1 << 30, Mappings: 41, DurationNS: 812_000_000,
			Contexts: 1, QPs: 2, StopNS: 1_250_000, Cut: "", Err: ""},
		&Scan{Header: h(7_000_001), Bytes: 64 << 20, Mappings: 3, DurationNS: 5,
			Cut: "byte bound 64 MiB (--scan-bytes)", Err: "ünïcode \x00"},
		&Scan{Header: h(7_000_001), Bytes: 2 << 20, Mappings: 9, DurationNS: 3_000_000, Contexts: 1, QPs: 1,
			KernelCheck: "the kernel's QP list (RDMA netlink) agrees on all 1 QP(s) (number, type, state, pid): 0x11 RC RTS on rxe0 port 1"},
		&QPCreate{Header: h(7_000_002), QP: 0x7f12_0000_4000, QPNum: 0x1c0, Type: QPTypeRC,
			SendCQ: 0x7f12_0000_2000, RecvCQ: 0x7f12_0000_2000, Via: ViaMemory, State: 3},
		&QPCreate{Header: h(7_000_003), QP: 0x7f12_0000_5000, QPNum: 0x1c1, Type: QPTypeUD,
			Via: ViaMemory, Gen: 7, State: 6},
		&Attach{Header: h(7_000_004), Func: "post_send", Path: "/usr/lib/libmlx5.so.1", Offset: 0x1a2b0,
			How: "debug-file", DebugFile: "/usr/lib/debug/.build-id/ab/cdef.debug"},
	}
}

func TestScanEventsRoundTrip(t *testing.T) {
	evs := append(append([]Event(nil), lifeEvents()...), scanEvents()...)
	_, got, err := readAll(writeRecording(t, evs, 0))
	if err != io.EOF {
		t.Fatalf("reading: %v, want io.EOF", err)
	}
	assertEvents(t, got, evs)
}

// The appended fields leave the record without them a prefix of the
// record with them, so that old readers read new files.
func TestScanFieldsAppended(t *testing.T) {
	cases := []struct {
		name      string
		full, old Event
	}{
		{"qp state", &QPCreate{QP: 1, QPNum: 2, Type: QPTypeRC, Via: ViaMemory, State: 3},
			&QPCreate{QP: 1, QPNum: 2, Type: QPTypeRC, Via: ViaMemory}},
		{"qp state and gen", &QPCreate{QP: 1, QPNum: 2, Via: ViaMemory, Gen: 4, State: 3},
			&QPCreate{QP: 1, QPNum: 2, Via: ViaMemory, Gen: 4}},
		{"qp window", &QPCreate{QP: 1, QPNum: 2, Type: QPTypeRC, Via: "ibv_create_qp", Caps: Caps{MaxSendWR: 64}, State: 3, Window: true},
			&QPCreate{QP: 1, QPNum: 2, Type: QPTypeRC, Via: "ibv_create_qp", Caps: Caps{MaxSendWR: 64}, State: 3}},
		{"kernel check", &Scan{Bytes: 1, QPs: 1, KernelCheck: "agrees"}, &Scan{Bytes: 1, QPs: 1}},
		{"debug file", &Attach{Func: "poll_cq", How: "debug-file", DebugFile: "/x.debug"},
			&Attach{Func: "poll_cq", How: "debug-file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, oldBody := recordBody(t, c.full), recordBody(t, c.old)
			if !bytes.HasPrefix(body, oldBody) || len(body) == len(oldBody) {
				t.Fatalf("record body\n%x\ndoes not extend\n%x", body, oldBody)
			}
			// what a later writer appends after the new field is skipped
			// (a QP create's window comes first: false here)
			later := bytes.Clone(body)
			if _, ok := c.full.(*QPCreate); ok {
				later = append(later, 0)
			}
			later = append(later, "later fields"...)
			rec := append([]byte{byte(c.full.Kind())}, binary.AppendUvarint(nil, uint64(len(later)))...)
			var d decoder
			got, _, err := d.nextRecord(append(rec, later...))
			if err != nil {
				t.Fatal(err)
			}
			assertEvents(t, []Event{got}, []Event{c.full})
		})
	}
}
