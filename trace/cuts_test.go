package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
)

// cutEvents are posts the tracer could not see whole: lists longer than
// its walk, WRs with SGEs past its SGE bound, and both.
func cutEvents() []Event {
	h := func(ns uint64) Header { return Header{TimeNS: ns, PID: 4242, TID: 4243} }
	wrs := func(n int, cut map[int]uint8) []WR {
		out := make([]WR, n)
		for i := range out {
			out[i] = WR{ID: 1000 + uint64(i), Opcode: 2, Flags: 0, NumSGE: 1, Bytes: 64}
			if v := cut[i]; v > 0 {
				out[i].NumSGE, out[i].Bytes, out[i].SGEsNotSummed = 16+uint32(v), 16*64, v
			}
		}
		return out
	}
	return []Event{
		&Post{Header: h(1_000), QP: 0x7f00_1000, QPNum: 0x21, WRs: wrs(64, nil), Truncated: 960,
			Accepted: 1024, WalkCapped: true},
		&Post{Header: h(2_000), QP: 0x7f00_1000, QPNum: 0x21, WRs: wrs(3, map[int]uint8{0: 4, 1: 4, 2: 4}), Accepted: 3},
		&Post{Header: h(3_000), QP: 0x7f00_1000, QPNum: 0x21, WRs: wrs(64, map[int]uint8{5: 1, 63: math.MaxUint8}),
			Truncated: 960, Ret: 12, Accepted: 0, WalkCapped: true, EntryNS: 2_900},
		&Post{Header: h(4_000), QP: 0x7f00_2000, QPNum: 0x22, API: APIWR, WRs: wrs(2, map[int]uint8{1: 7}), Accepted: 2},
		&Post{Header: h(5_000), QP: 0x7f00_2000, QPNum: 0x22, WRs: wrs(1, nil), Accepted: 1},
	}
}

// withoutCuts is p as a reader that predates the cuts reads it.
func withoutCuts(p *Post) *Post {
	q := *p
	q.WalkCapped = false
	q.WRs = append([]WR(nil), p.WRs...)
	for i := range q.WRs {
		q.WRs[i].SGEsNotSummed = 0
	}
	return &q
}

// recordBody is the body of ev's record, encoded on its own.
func recordBody(t *testing.T, ev Event) []byte {
	t.Helper()
	var e encoder
	rec, err := e.appendRecord(nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	n, w := binary.Uvarint(rec[1:])
	if w <= 0 || 1+w+int(n) != len(rec) {
		t.Fatalf("bad framing of %x", rec)
	}
	return rec[1+w:]
}

func TestCutsRoundTrip(t *testing.T) {
	for _, ev := range cutEvents() {
		p := ev.(*Post)
		t.Run(cutName(p), func(t *testing.T) {
			prev := &Lost{Header: Header{TimeNS: 500, PID: 4242, TID: 4243}, Count: 1}
			for _, evs := range [][]Event{{p}, {prev, p}} {
				_, got, err := readAll(writeRecording(t, evs, 0))
				if err != io.EOF {
					t.Fatalf("reading: %v, want io.EOF", err)
				}
				assertEvents(t, got, evs)
			}
		})
	}
}

func cutName(p *Post) string {
	var parts []string
	if p.WalkCapped {
		parts = append(parts, "walk_capped")
	}
	for i, w := range p.WRs {
		if w.SGEsNotSummed > 0 {
			parts = append(parts, fmt.Sprint("sge_cut_", i))
		}
	}
	if len(parts) == 0 {
		return "no_cuts"
	}
	return strings.Join(parts, "+")
}

// The cuts come after every field an earlier reader knows, and it ignores
// the bytes past those: it reads the post as it was before. A post without
// cuts is stored as before, not one byte longer.
func TestCutsAppended(t *testing.T) {
	for _, ev := range append(cutEvents(), allEvents()[2:4]...) {
		p := ev.(*Post)
		t.Run(cutName(p), func(t *testing.T) {
			body, old := recordBody(t, p), recordBody(t, withoutCuts(p))
			if !bytes.HasPrefix(body, old) {
				t.Fatalf("record body\n%x\ndoes not start with the body without cuts\n%x", body, old)
			}
			if cut := cutName(p) != "no_cuts"; cut == (len(body) == len(old)) {
				t.Errorf("%d bytes with cuts, %d without (cuts: %v)", len(body), len(old), cut)
			}
			rec := append([]byte{byte(KindPost)}, binary.AppendUvarint(nil, uint64(len(old)))...)
			var d decoder
			got, _, err := d.nextRecord(append(rec, old...))
			if err != nil {
				t.Fatal(err)
			}
			assertEvents(t, []Event{got}, []Event{withoutCuts(p)})
		})
	}
}

// Bytes a later writer appends after the cuts are ignored, as the format
// promises for every record.
func TestCutsThenLaterFields(t *testing.T) {
	p := cutEvents()[2].(*Post)
	body := append(bytes.Clone(recordBody(t, p)), "later fields"...)
	rec := append([]byte{byte(KindPost)}, binary.AppendUvarint(nil, uint64(len(body)))...)
	var d decoder
	got, n, err := d.nextRecord(append(rec, body...))
	if err != nil || n != len(rec)+len(body) {
		t.Fatalf("read %d of %d bytes: %v", n, len(rec)+len(body), err)
	}
	assertEvents(t, []Event{got}, []Event{p})
}

func TestCutsMalformed(t *testing.T) {
	p := &Post{Header: Header{TimeNS: 1, PID: 1, TID: 1}, WRs: []WR{{ID: 1}, {ID: 2}, {ID: 3}}, Accepted: 3}
	base := recordBody(t, p)
	tests := []struct {
		name string
		cuts []byte
		want string
	}{
		{"bad bool", []byte{2, 0}, "bad bool value 2"},
		{"count past the record", []byte{0, 9, 0}, "runs past the end of its record"},
		{"gap past the list", []byte{0, 1, 3, 1}, "SGE cut past the end of a list of 3 WRs"},
		{"second gap past the list", []byte{0, 2, 1, 1, 1, 1}, "SGE cut past the end of a list of 3 WRs"},
		{"value over 8 bits", append([]byte{0, 1, 0}, binary.AppendUvarint(nil, 256)...), "out of range for 8 bits"},
		{"cut short", []byte{1, 1, 0}, "bad or short varint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := append(bytes.Clone(base), tc.cuts...)
			rec := append([]byte{byte(KindPost)}, binary.AppendUvarint(nil, uint64(len(body)))...)
			var d decoder
			_, _, err := d.nextRecord(append(rec, body...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// qpCutEvents are counters-mode totals of QPs with cuts and of one
// without, as the kernel flushes them.
func qpCutEvents() []Event {
	h := func(ns uint64) Header { return Header{TimeNS: ns, PID: 4242} }
	return []Event{
		&QPCounters{Header: h(10_000), QP: 0x7f00_1000, QPNum: 0x21, PostCalls: 3, WRs: 2051, Signaled: 3,
			Doorbells: 3, PayloadBytes: 2048*64 + 3*(16*64), PayloadSGEs: 2048 + 60, WRsPerCallMax: 1024,
			WalkCappedPosts: 1, SGECutWRs: 3, SGEsNotSummed: 12},
		&QPCounters{Header: h(10_000), QP: 0x7f00_2000, QPNum: 0x22, PostCalls: 1, WRs: 2, Inline: 1, Signaled: 1,
			Doorbells: 1, InlineBytes: 280, PayloadBytes: 100*16 + 120, PayloadSGEs: 20, WRsPerCallMax: 2,
			SGECutWRs: 2, SGEsNotSummed: 6},
		&QPCounters{Header: h(10_000), QP: 0x7f00_3000, QPNum: 0x23, PostCalls: 7, WRs: 7000, Doorbells: 6,
			Errors: 1, ENOMEM: 1, WRsPerCallMax: 1024, WalkCappedPosts: 7},
		&QPCounters{Header: h(10_000), QP: 0x7f00_4000, QPNum: 0x24, PostCalls: 1, WRs: 1, Doorbells: 1,
			SGECutWRs: math.MaxUint64, SGEsNotSummed: math.MaxUint64, WalkCappedPosts: math.MaxUint64},
		&QPCounters{Header: h(20_000), QP: 0x7f00_5000, QPNum: 0x25, PostCalls: 1, WRs: 1, Doorbells: 1,
			PayloadBytes: 64, PayloadSGEs: 1, WRsPerCallMax: 1},
	}
}

// withoutQPCuts is c as a reader that predates the counters' cuts reads it.
func withoutQPCuts(c *QPCounters) *QPCounters {
	d := *c
	d.WalkCappedPosts, d.SGECutWRs, d.SGEsNotSummed = 0, 0, 0
	return &d
}

func qpCutName(c *QPCounters) string {
	if *c == *withoutQPCuts(c) {
		return "no_cuts"
	}
	return fmt.Sprintf("qp%#x", c.QPNum)
}

func TestQPCutsRoundTrip(t *testing.T) {
	for _, ev := range qpCutEvents() {
		c := ev.(*QPCounters)
		t.Run(qpCutName(c), func(t *testing.T) {
			prev := &Lost{Header: Header{TimeNS: 500, PID: 4242}, Count: 1}
			for _, evs := range [][]Event{{c}, {prev, c}} {
				_, got, err := readAll(writeRecording(t, evs, 0))
				if err != io.EOF {
					t.Fatalf("reading: %v, want io.EOF", err)
				}
				assertEvents(t, got, evs)
			}
		})
	}
	_, got, err := readAll(writeRecording(t, qpCutEvents(), 0))
	if err != io.EOF {
		t.Fatalf("reading: %v, want io.EOF", err)
	}
	assertEvents(t, got, qpCutEvents())
}

// The counters' cuts come after every field an earlier reader knows: it
// reads the totals as they were before. Totals without cuts are stored as
// before, not one byte longer.
func TestQPCutsAppended(t *testing.T) {
	for _, ev := range append(qpCutEvents(), allEvents()...) {
		c, ok := ev.(*QPCounters)
		if !ok {
			continue
		}
		t.Run(qpCutName(c), func(t *testing.T) {
			body, old := recordBody(t, c), recordBody(t, withoutQPCuts(c))
			if !bytes.HasPrefix(body, old) {
				t.Fatalf("record body\n%x\ndoes not start with the body without cuts\n%x", body, old)
			}
			if cut := qpCutName(c) != "no_cuts"; cut == (len(body) == len(old)) {
				t.Errorf("%d bytes with cuts, %d without (cuts: %v)", len(body), len(old), cut)
			}
			rec := append([]byte{byte(KindQPCounters)}, binary.AppendUvarint(nil, uint64(len(old)))...)
			var d decoder
			got, _, err := d.nextRecord(append(rec, old...))
			if err != nil {
				t.Fatal(err)
			}
			assertEvents(t, []Event{got}, []Event{withoutQPCuts(c)})
		})
	}
}

// Bytes a later writer appends after the counters' cuts (and the
// generation, receives and send-queue model appended after them) are
// ignored.
func TestQPCutsThenLaterFields(t *testing.T) {
	c := qpCutEvents()[0].(*QPCounters)
	c.Gen = 9
	c.RecvsCounted, c.RecvCalls, c.Recvs, c.RecvFailed = true, 40, 6400, 1
	c.SQ = SQModel{Kept: true, Posted: 900, Retired: 880, Peak: 64, LongestRun: 15, Signaled: 56,
		SigOutstanding: 1, OldestSigNS: 12345, SendCQEs: 55, SendCQ: 0x7f00, Synced: true}
	body := append(bytes.Clone(recordBody(t, c)), "later fields"...)
	rec := append([]byte{byte(KindQPCounters)}, binary.AppendUvarint(nil, uint64(len(body)))...)
	var d decoder
	got, n, err := d.nextRecord(append(rec, body...))
	if err != nil || n != len(rec)+len(body) {
		t.Fatalf("read %d of %d bytes: %v", n, len(rec)+len(body), err)
	}
	assertEvents(t, []Event{got}, []Event{c})
}

func TestQPCutsMalformed(t *testing.T) {
	base := recordBody(t, qpCutEvents()[4])
	tests := []struct {
		name string
		cuts []byte
	}{
		{"one count of three", []byte{1}},
		{"two counts of three", []byte{1, 2}},
		{"varint cut short", []byte{1, 2, 0x80}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := append(bytes.Clone(base), tc.cuts...)
			rec := append([]byte{byte(KindQPCounters)}, binary.AppendUvarint(nil, uint64(len(body)))...)
			var d decoder
			_, _, err := d.nextRecord(append(rec, body...))
			if err == nil || !strings.Contains(err.Error(), "bad or short varint") {
				t.Fatalf("got %v, want a short varint error", err)
			}
		})
	}
}

// The receives of a QP's totals come after its generation: totals that do
// not count them are stored as before, and a reader of those reads the
// rest as before; totals that count them are read back with them, zeros
// included (counted, none posted).
func TestQPRecvsAppended(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    QPCounters
	}{
		{"receives", QPCounters{QP: 0x7f00_1000, QPNum: 0x21, PostCalls: 3, WRs: 3, RecvsCounted: true,
			RecvCalls: 1600, Recvs: 6400, RecvFailed: 2}},
		{"counted, none posted", QPCounters{QP: 0x7f00_1000, QPNum: 0x21, PostCalls: 3, WRs: 3, RecvsCounted: true}},
		{"with cuts and a generation", QPCounters{QP: 0x7f00_1000, QPNum: 0x21, PostCalls: 3, WRs: 3, SGECutWRs: 1,
			SGEsNotSummed: 4, Gen: 7, RecvsCounted: true, RecvCalls: 1, Recvs: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.Header = Header{TimeNS: 10_000, PID: 4242, TID: 4243}
			old := c
			old.RecvsCounted, old.RecvCalls, old.Recvs, old.RecvFailed = false, 0, 0, 0
			// every version writes the fields before the cuts
			bare := old
			bare.WalkCappedPosts, bare.SGECutWRs, bare.SGEsNotSummed, bare.Gen = 0, 0, 0, 0
			body, oldBody, bareBody := recordBody(t, &c), recordBody(t, &old), recordBody(t, &bare)
			if !bytes.HasPrefix(body, bareBody) || !bytes.HasPrefix(oldBody, bareBody) || len(body) <= len(oldBody) {
				t.Fatalf("record body\n%x\ndoes not extend the body without receives\n%x", body, oldBody)
			}
			for _, want := range []*QPCounters{&c, &old} {
				b := recordBody(t, want)
				rec := append([]byte{byte(KindQPCounters)}, binary.AppendUvarint(nil, uint64(len(b)))...)
				var d decoder
				got, _, err := d.nextRecord(append(rec, b...))
				if err != nil {
					t.Fatal(err)
				}
				assertEvents(t, []Event{got}, []Event{want})
			}
		})
	}
}
