package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"testing"
)

// lifeEvents holds the fields appended for object lifetimes (generations)
// and the kinds added with them.
func lifeEvents() []Event {
	h := func(ns uint64) Header { return Header{TimeNS: ns, PID: 4242, TID: 4243} }
	return []Event{
		&CQCreate{Header: h(1_000), CQ: 0x7f00_0000_1000, Gen: 1, CQE: 255},
		&QPCreate{Header: h(1_100), QP: 0x7f12_3456_7890, QPNum: 0x1234, Type: QPTypeRC,
			SendCQ: 0x7f00_0000_1000, RecvCQ: 0x7f00_0000_1000, Caps: Caps{MaxSendWR: 64}, Via: "sqsim_create_qp", Gen: 2},
		&EmptyPolls{Header: h(1_200), CQ: 0x7f00_0000_1000, Count: 7, Gen: 1},
		&QPCounters{Header: h(1_300), QP: 0x7f12_3456_7890, QPNum: 0x1234, PostCalls: 3, WRs: 6, Gen: 2},
		&QPCounters{Header: h(1_300), QP: 0x7f12_3456_7890, QPNum: 0x1235, PostCalls: 1, WRs: 2051,
			WalkCappedPosts: 1, SGECutWRs: 3, SGEsNotSummed: 12, Gen: math.MaxUint64},
		&CQCounters{Header: h(1_400), CQ: 0x7f00_0000_1000, Polls: 10, CQEs: 3, Empty: 7, Gen: 1},
		&QPDestroy{Header: h(1_500), QP: 0x7f12_3456_7890, QPNum: 0x1234, Gen: 2},
		&CQCreate{Header: h(1_600), CQ: 0x7f00_0000_1000, Gen: 3},
		&SRQCreate{Header: h(1_700), SRQ: 0x7f00_0000_3000, Gen: 4, MaxWR: 1024},
		&SRQDestroy{Header: h(1_800), SRQ: 0x7f00_0000_3000, Gen: 4, Ret: -16},
		&End{Header: h(1_900), Reason: "the target exited with status 0"},
		&End{Header: h(2_000), Reason: "reading the BPF ring buffer: ünïcode \x00", Err: true},
	}
}

// withoutGen is ev as a reader that predates generations reads it.
func withoutGen(ev Event) Event {
	switch e := ev.(type) {
	case *QPCreate:
		d := *e
		d.Gen = 0
		return &d
	case *QPDestroy:
		d := *e
		d.Gen = 0
		return &d
	case *EmptyPolls:
		d := *e
		d.Gen = 0
		return &d
	case *QPCounters:
		d := *e
		d.Gen = 0
		return &d
	case *CQCounters:
		d := *e
		d.Gen = 0
		return &d
	}
	return nil
}

// A record with a generation starts with the record without one, and the
// reader of that shorter record reads the rest as before: old readers
// read new files, new readers old files.
func TestGenerationsAppended(t *testing.T) {
	for i, ev := range lifeEvents() {
		old := withoutGen(ev)
		if old == nil {
			continue
		}
		t.Run(fmt.Sprintf("%d_%s", i, ev.Kind()), func(t *testing.T) {
			body, oldBody := recordBody(t, ev), recordBody(t, old)
			if !bytes.HasPrefix(body, oldBody) || len(body) == len(oldBody) {
				t.Fatalf("record body\n%x\ndoes not extend the body without a generation\n%x", body, oldBody)
			}
			rec := append([]byte{byte(ev.Kind())}, binary.AppendUvarint(nil, uint64(len(oldBody)))...)
			var d decoder
			got, _, err := d.nextRecord(append(rec, oldBody...))
			if err != nil {
				t.Fatal(err)
			}
			assertEvents(t, []Event{got}, []Event{old})
			if _, ok := ev.(*QPCounters); ok {
				return // its receives come after the generation (TestQPRecvsAppended)
			}
			// and what a later writer appends after the generation is
			// skipped (a QP create's library, state and window, a CQ's
			// extended polls' completions come first: empty, 0 and false here)
			later := bytes.Clone(body)
			switch ev.(type) {
			case *QPCreate:
				later = append(later, 0, 0, 0)
			case *CQCounters: // its extended polls' completions, 0
				later = append(later, 0)
			}
			later = append(later, "later fields"...)
			rec = append([]byte{byte(ev.Kind())}, binary.AppendUvarint(nil, uint64(len(later)))...)
			var d2 decoder
			got, _, err = d2.nextRecord(append(rec, later...))
			if err != nil {
				t.Fatal(err)
			}
			assertEvents(t, []Event{got}, []Event{ev})
		})
	}
}

func TestLifeEventsRoundTrip(t *testing.T) {
	info, got, err := readAll(writeRecording(t, lifeEvents(), 0))
	if err != io.EOF {
		t.Fatalf("reading: %v, want io.EOF", err)
	}
	assertInfo(t, info, testInfo)
	assertEvents(t, got, lifeEvents())
}

// A QP's provider library is appended after its generation, which is then
// written even when 0: a reader that knows generations but not libraries
// reads the generation, and one that knows neither reads the rest.
func TestLibAppended(t *testing.T) {
	const lib = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
	for _, gen := range []uint64{0, 9} {
		t.Run(fmt.Sprint("gen_", gen), func(t *testing.T) {
			ev := &QPCreate{Header: Header{TimeNS: 5, PID: 1, TID: 1}, QP: 0x7f00_0000_9000, QPNum: 0x1236,
				Type: QPTypeRC, Caps: Caps{MaxSendWR: 128}, Via: "ibv_create_qp", Gen: gen, Lib: lib}
			old := *ev
			old.Lib = ""
			body, oldBody := recordBody(t, ev), recordBody(t, &old)
			if gen == 0 { // the 0 generation is written before the library
				oldBody = binary.AppendUvarint(oldBody, 0)
			}
			if !bytes.HasPrefix(body, oldBody) {
				t.Fatalf("record body\n%x\ndoes not extend the body without a library\n%x", body, oldBody)
			}
			_, got, err := readAll(writeRecording(t, []Event{ev}, 0))
			if err != io.EOF {
				t.Fatalf("reading: %v, want io.EOF", err)
			}
			assertEvents(t, got, []Event{ev})
		})
	}
}
