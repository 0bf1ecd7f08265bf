package trace

import (
	"bytes"
	"testing"
)

// ringEvents are n posts of one QP, one every stepNS from 1 s.
func ringEvents(n int, stepNS uint64) []Event {
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = &Post{Header: Header{TimeNS: 1e9 + uint64(i)*stepNS, PID: 7, TID: 7}, QP: 0x1000, QPNum: 0x11,
			WRs: []WR{{ID: uint64(i)*7919 + 1, Bytes: uint32(i % 4096), Flags: uint32(i % 3)}}, Accepted: 1}
	}
	return evs
}

// fillRing writes evs to r, ending a block every flushEvery events as the
// flight recorder's ticker does.
func fillRing(t *testing.T, r *Ring, evs []Event, flushEvery int) {
	t.Helper()
	for i, ev := range evs {
		if _, err := r.Write(ev); err != nil {
			t.Fatal(err)
		}
		if (i+1)%flushEvery == 0 {
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestRingSpan(t *testing.T) {
	// 100 000 events 10 µs apart: 1 s; blocks of 1000 events (10 ms)
	evs := ringEvents(100_000, 10_000)
	r, err := NewRing(200e6, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	fillRing(t, r, evs, 1000)
	blocks, err := r.Take()
	if err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.Dropped != 0 {
		t.Errorf("dropped %d events under a bound never reached", st.Dropped)
	}
	var kept uint64
	for _, b := range blocks {
		kept += uint64(b.Records)
	}
	if kept+st.Aged != uint64(len(evs)) {
		t.Errorf("kept %d + aged %d != %d written", kept, st.Aged, len(evs))
	}
	last := evs[len(evs)-1].Hdr().TimeNS
	span := last - blocks[0].FirstNS
	// the span is kept whole, and at most one block more
	if span < 200e6 || span > 200e6+2*10e6 {
		t.Errorf("blocks span %d ns, want 200 ms to 220 ms", span)
	}

	// the blocks make a recording that reads back as the events they hold
	var buf bytes.Buffer
	w, err := NewWriter(&buf, FileInfo{Flight: &FlightInfo{Trigger: "signal", TriggerNS: last, WindowNS: blocks[0].FirstNS}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if err := w.WriteBlock(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, got := readWhole(t, buf.Bytes())
	if rd.Info().Flight == nil || rd.Info().Flight.Trigger != "signal" {
		t.Errorf("flight info = %+v", rd.Info().Flight)
	}
	want := evs[len(evs)-int(kept):]
	assertEvents(t, got, want)
}

func TestRingBound(t *testing.T) {
	evs := ringEvents(200_000, 1000)
	const bound = 64 << 10
	r, err := NewRing(10e9, bound) // a span never reached: only the bound drops
	if err != nil {
		t.Fatal(err)
	}
	fillRing(t, r, evs, 2000)
	st := r.Stats()
	if st.Bytes > bound {
		t.Errorf("ring holds %d bytes, bound %d", st.Bytes, bound)
	}
	if st.Dropped == 0 || st.Aged != 0 {
		t.Errorf("dropped %d, aged %d; want some dropped by the bound, none aged", st.Dropped, st.Aged)
	}
	blocks, err := r.Take()
	if err != nil {
		t.Fatal(err)
	}
	var kept uint64
	for _, b := range blocks {
		kept += uint64(b.Records)
	}
	if kept+st.Dropped != uint64(len(evs)) {
		t.Errorf("kept %d + dropped %d != %d written", kept, st.Dropped, len(evs))
	}
}

func TestWriteBlockRefusesPieces(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{}, FileInfo{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{nil, make([]byte, 8), append(make([]byte, blockHeaderLen), 1)} {
		if err := w.WriteBlock(RingBlock{Data: b, Records: 1}); err == nil {
			t.Errorf("WriteBlock(%d bytes) accepted a piece of a block", len(b))
		}
	}
}
