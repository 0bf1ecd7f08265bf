package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// FuzzReader feeds arbitrary bytes to the reader. For any input it must not
// panic, must end in one known one-line error, must keep returning that
// error, and every event it returns must survive the codec unchanged; a
// recording it reads to io.EOF must read the same once written again.
func FuzzReader(f *testing.F) {
	v1, v2 := seedCorpus(f)
	for _, set := range []map[string][]byte{v1, v2} {
		for _, data := range set {
			f.Add(data)
		}
	}
	f.Fuzz(checkReader)
}

// FuzzChunk wraps arbitrary bytes in a version 1 chunk with a valid
// checksum, so the fuzzer reaches the record decoder instead of stopping
// at the checksum.
func FuzzChunk(f *testing.F) {
	for _, evs := range [][]Event{allEvents(), manyEvents(30), postEvents(3), cutEvents(), qpCutEvents(), lifeEvents()} {
		var e encoder
		var recs []byte
		for _, ev := range evs {
			recs, _ = e.appendRecord(recs, ev)
		}
		f.Add(recs, uint32(len(evs)), uint64(len(evs)))
	}
	head := writeRecordingV1(f, nil, 0)
	head = head[:len(head)-chunkHeaderLen-endChunkLen]
	f.Fuzz(func(t *testing.T, payload []byte, count uint32, total uint64) {
		data := bytes.Clone(head)
		if len(payload) > 0 {
			data = append(data, rawChunk(payload, count)...)
		}
		end := make([]byte, chunkHeaderLen+endChunkLen)
		binary.LittleEndian.PutUint64(end[chunkHeaderLen:], total)
		putChunkHeader(end, 0)
		checkReader(t, append(data, end...))
	})
}

// FuzzBlock compresses arbitrary bytes into a version 2 block with a
// valid checksum: the fuzzer reaches the block's column of varying values,
// its tables and the record decoder.
func FuzzBlock(f *testing.F) {
	sets := [][]Event{allEvents(), manyEvents(30), postEvents(3), cutEvents(), qpCutEvents(), lifeEvents(),
		StreamEvents(StreamConfig{QPs: 3, PostList: 4, Signal: 4, Posts: 10, SharedCQ: true, Varied: true})}
	for _, evs := range sets {
		e := newEncoder(2)
		var recs []byte
		for _, ev := range evs {
			recs, _ = e.appendRecord(recs, ev)
		}
		f.Add(e.appendBlock(nil, recs), uint32(len(evs)), uint64(len(evs)))
	}
	f.Fuzz(func(t *testing.T, raw []byte, count uint32, total uint64) {
		if len(raw) == 0 || count == 0 {
			checkReader(t, withBlocks(t, total))
			return
		}
		checkReader(t, withBlocks(t, total, rawBlock(t, raw, count)))
	})
}

// checkReader reads data as a recording and checks the properties
// FuzzReader states.
func checkReader(t *testing.T, data []byte) {
	{
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			checkReadError(t, err)
			return
		}
		var evs []Event
		for {
			ev, err := r.Next()
			if err != nil {
				checkReadError(t, err)
				if ev2, err2 := r.Next(); ev2 != nil || err2 != err {
					t.Fatalf("Next after %v returned %v, %v", err, ev2, err2)
				}
				if err == io.EOF {
					checkRewrite(t, r.Info(), evs)
				}
				checkDecodings(t, data, evs, err)
				return
			}
			if len(evs) > len(data) {
				t.Fatalf("more events (%d) than input bytes (%d)", len(evs), len(data))
			}
			for _, v := range versions {
				checkRoundTrip(t, v, ev)
			}
			evs = append(evs, ev)
		}
	}
}

// checkDecodings reads data again, with every record decoded by the walk,
// then with the events reused (Reader.Reuse), one at a time and in
// batches: each must return the events evs, then the error end, as the
// reader's usual decoding did.
func checkDecodings(t *testing.T, data []byte, evs []Event, end error) {
	for _, mode := range []string{"walk only", "reuse", "reuse, batches"} {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if mode == "walk only" {
			r.dec.walkOnly = true
		} else {
			r.Reuse()
		}
		batch := make([]Event, 1)
		if mode == "reuse, batches" {
			batch = make([]Event, 7)
		}
		for i := 0; ; {
			n, err := r.NextBatch(batch)
			if err != nil {
				if n != 0 || i != len(evs) || err.Error() != end.Error() {
					t.Fatalf("%s: %d events and %v after %d events, want %v after %d", mode, n, err, i, end, len(evs))
				}
				break
			}
			if n == 0 || n > len(batch) {
				t.Fatalf("%s: a batch of %d events of at most %d and no error", mode, n, len(batch))
			}
			for _, ev := range batch[:n] {
				if i >= len(evs) || !reflect.DeepEqual(ev, evs[i]) {
					t.Fatalf("%s: event %d is %#v, want the one read before", mode, i, ev)
				}
				i++
			}
		}
	}
}

// checkRoundTrip encodes ev alone in the given version and decodes it:
// it must come back the same.
func checkRoundTrip(t *testing.T, version uint16, ev Event) {
	e := newEncoder(version)
	b, err := e.appendRecord(nil, ev)
	if err != nil {
		t.Fatalf("re-encoding %#v: %v", ev, err)
	}
	d := newDecoder(version)
	recs := b
	if version >= 2 {
		if recs, err = d.beginBlock(e.appendBlock(nil, b)); err != nil {
			t.Fatal(err)
		}
	}
	back, n, err := d.nextRecord(recs)
	if err == nil && version >= 2 {
		err = d.endBlock()
	}
	if err != nil || n != len(b) || !reflect.DeepEqual(back, ev) {
		t.Fatalf("version %d codec round trip of %#v: got %#v (%d of %d bytes), %v", version, ev, back, n, len(b), err)
	}
}

func checkReadError(t *testing.T, err error) {
	t.Helper()
	var (
		te *TruncatedError
		ce *CorruptError
		ve *VersionError
	)
	switch {
	case err == io.EOF, errors.As(err, &te), errors.As(err, &ce), errors.As(err, &ve), errors.Is(err, ErrBadMagic):
	default:
		t.Fatalf("unexpected error %T: %v", err, err)
	}
	if err == io.EOF {
		return
	}
	msg := err.Error()
	if msg == "" || strings.ContainsAny(msg, "\n\r") || unicode.IsUpper(rune(msg[0])) {
		t.Fatalf("error is not one lowercase line: %q", msg)
	}
}

func checkRewrite(t *testing.T, info FileInfo, evs []Event) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, info)
	if err != nil {
		t.Fatalf("rewriting: %v", err)
	}
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatalf("rewriting %#v: %v", ev, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("rewriting: %v", err)
	}
	info2, evs2, err := readAll(buf.Bytes())
	if err != io.EOF {
		t.Fatalf("reading the rewritten recording: %v", err)
	}
	if !info2.StartWall.Equal(info.StartWall) {
		t.Fatalf("rewritten StartWall %v, was %v", info2.StartWall, info.StartWall)
	}
	info2.StartWall, info.StartWall = info.StartWall, info2.StartWall
	if !reflect.DeepEqual(info2, info) {
		t.Fatalf("rewritten info %+v, was %+v", info2, info)
	}
	if len(evs2) != len(evs) {
		t.Fatalf("rewritten recording has %d events, was %d", len(evs2), len(evs))
	}
	for i := range evs {
		if !reflect.DeepEqual(evs2[i], evs[i]) {
			t.Fatalf("rewritten event %d: %#v, was %#v", i, evs2[i], evs[i])
		}
	}
}
