package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// goldens are recordings committed when their encoding was made: files
// written by earlier builds must keep reading the same, and the writer must
// keep writing the same bytes (-update rewrites them, for a deliberate
// change). v1-all-kinds is from the first release of version 1; v1-cuts
// holds the fields appended to posts later (a list walk capped, SGEs not
// summed), v1-qp-cuts those appended to the counters mode's totals after
// that (the same facts, counted), v1-lifecycle the objects' generations and
// the kinds added with them (CQ and SRQ lives, why a trace ended), and
// v1-entry-points the CQ calls, extended poll sessions and SRQ posts.
var goldens = []struct {
	path   string
	events func() []Event
}{
	{"testdata/v1-all-kinds.sqscope", allEvents},
	{"testdata/v1-cuts.sqscope", cutEvents},
	{"testdata/v1-qp-cuts.sqscope", qpCutEvents},
	{"testdata/v1-lifecycle.sqscope", lifeEvents},
	{"testdata/v1-entry-points.sqscope", entryPointEvents},
	{"testdata/v1-procs.sqscope", procEvents},
}

func TestGoldenV1(t *testing.T) {
	for _, g := range goldens {
		t.Run(filepath.Base(g.path), func(t *testing.T) {
			data := writeRecording(t, g.events(), 0)
			if *update {
				if err := os.MkdirAll(filepath.Dir(g.path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(g.path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			golden, err := os.ReadFile(g.path)
			if err != nil {
				t.Fatal(err)
			}
			info, got, err := readAll(golden)
			if err != io.EOF {
				t.Fatalf("reading %s: %v", g.path, err)
			}
			assertInfo(t, info, testInfo)
			assertEvents(t, got, g.events())
			if !bytes.Equal(data, golden) {
				t.Errorf("the writer no longer writes %s byte for byte (%d bytes, golden %d)", g.path, len(data), len(golden))
			}
		})
	}
}

// seedCorpus is the committed seed corpus of FuzzReader: valid recordings,
// cut ones and damaged ones.
func seedCorpus(t testing.TB) map[string][]byte {
	small := writeRecording(t, allEvents(), 0)
	multi := writeRecording(t, manyEvents(30), 200)
	flipped := bytes.Clone(multi)
	flipped[len(flipped)/2] ^= 0x40
	future := bytes.Clone(small)
	binary.LittleEndian.PutUint16(future[8:], 2)
	return map[string][]byte{
		"valid-all-kinds":     small,
		"valid-multi-chunk":   multi,
		"valid-empty":         writeRecording(t, nil, 0),
		"cut-in-header":       small[:fileHeaderLen+5],
		"cut-mid-chunk":       multi[:len(multi)/2],
		"cut-before-end":      small[:len(small)-chunkHeaderLen-endChunkLen],
		"bad-checksum":        flipped,
		"bad-version":         future,
		"bad-magic":           []byte("#!/bin/sh\necho not a recording\n"),
		"all-kinds-cut-short": small[:len(small)-40],
		"valid-cuts":          writeRecording(t, cutEvents(), 0),
		"valid-qp-cuts":       writeRecording(t, qpCutEvents(), 0),
		"valid-lifecycle":     writeRecording(t, lifeEvents(), 0),
		"valid-entry-points":  writeRecording(t, entryPointEvents(), 0),
	}
}

func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	for name, data := range seedCorpus(t) {
		path := filepath.Join(dir, name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./trace -run TestSeedCorpus -update writes it)", err)
		}
		if string(got) != want {
			t.Errorf("%s is stale: go test ./trace -run TestSeedCorpus -update rewrites it", path)
		}
	}
}

// postEvents are Post calls as a batching workload makes them: 16 WRs of
// consecutive wr_ids, inline, the last one signaled, every 850 ns.
func postEvents(n int) []Event {
	evs := make([]Event, n)
	for i := range evs {
		p := &Post{WRs: make([]WR, 16)}
		setPost(p, i)
		evs[i] = p
	}
	return evs
}

// setPost makes p the i-th call of postEvents.
func setPost(p *Post, i int) {
	t := 1_000_000_000 + uint64(i)*850
	*p = Post{Header: Header{TimeNS: t, PID: 31337, TID: 31338}, QP: 0x5581_2a3b_4c00, QPNum: 0x11a,
		EntryNS: t - 120, Accepted: 16, WRs: p.WRs[:16]}
	id := uint64(1<<20 + 16*i)
	for j := range p.WRs {
		p.WRs[j] = WR{ID: id + uint64(j), Opcode: 0, Flags: 8, NumSGE: 1, Bytes: 64}
	}
	p.WRs[15].Flags |= 2
}

func BenchmarkWritePost(b *testing.B) {
	events := postEvents(1024)
	w, err := NewWriter(io.Discard, testInfo)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := w.Write(events[i%len(events)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(w.Bytes())/float64(16*b.N), "B/WR")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(16*b.N), "ns/WR")
}

func BenchmarkReadPost(b *testing.B) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testInfo)
	if err != nil {
		b.Fatal(err)
	}
	p := &Post{WRs: make([]WR, 16)}
	for i := range b.N {
		setPost(p, i)
		if err := w.Write(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if _, err := r.Next(); err != io.EOF {
		b.Fatalf("after %d events: %v, want io.EOF", b.N, err)
	}
	b.ReportMetric(float64(buf.Len())/float64(16*b.N), "B/WR")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(16*b.N), "ns/WR")
}

// A call recorded without its entry time reads back without one, and
// storing that costs less than a duration (before, a missing entry time
// was stored as a duration of the whole clock value).
func TestNoEntryTime(t *testing.T) {
	h := Header{TimeNS: 5_000_000_000_000, PID: 7, TID: 8}
	for _, ev := range []Event{
		&Post{Header: h, QP: 0x1000, QPNum: 9, Accepted: 1, WRs: []WR{{ID: 1, Opcode: 2, Flags: 2, NumSGE: 1, Bytes: 64}}},
		&Poll{Header: h, CQ: 0x2000, Max: 16, Ret: 1, WCs: []WC{{ID: 1, QPNum: 9}}},
	} {
		t.Run(ev.Kind().String(), func(t *testing.T) {
			var e encoder
			without, err := e.appendRecord(nil, ev)
			if err != nil {
				t.Fatal(err)
			}
			var d decoder
			got, _, err := d.nextRecord(without)
			if err != nil {
				t.Fatal(err)
			}
			var entry uint64
			switch g := got.(type) {
			case *Post:
				entry = g.EntryNS
				ev.(*Post).EntryNS = h.TimeNS - 700
			case *Poll:
				entry = g.EntryNS
				ev.(*Poll).EntryNS = h.TimeNS - 700
			}
			if entry != 0 {
				t.Errorf("entry time %d read back, want 0 (not recorded)", entry)
			}
			var e2 encoder
			with, err := e2.appendRecord(nil, ev)
			if err != nil {
				t.Fatal(err)
			}
			if len(without) >= len(with) {
				t.Errorf("%d bytes without an entry time, %d with one", len(without), len(with))
			}
		})
	}
}
