package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// goldens are recordings committed when their encoding was made: files
// written by earlier builds must keep reading the same, and the writer must
// keep writing the same records (-update rewrites them, for a deliberate
// change). Of each event set there is a file of every version: version 1's
// are written by version 1's writer (writeRecordingV1), which must still
// write them byte for byte. v1-all-kinds is from the first release of
// version 1; v1-cuts holds the fields appended to posts later (a list walk
// capped, SGEs not summed), v1-qp-cuts those appended to the counters
// mode's totals after that (the same facts, counted), v1-lifecycle the
// objects' generations and the kinds added with them (CQ and SRQ lives,
// why a trace ended), and v1-entry-points the CQ calls, extended poll
// sessions and SRQ posts.
var goldens = []struct {
	name   string
	events func() []Event
}{
	{"all-kinds", allEvents},
	{"cuts", cutEvents},
	{"qp-cuts", qpCutEvents},
	{"lifecycle", lifeEvents},
	{"entry-points", entryPointEvents},
	{"procs", procEvents},
	{"workload", func() []Event { return StreamEvents(StreamConfig{QPs: 3, PostList: 4, Signal: 4, Posts: 60}) }},
}

func goldenPath(version uint16, name string) string {
	return filepath.Join("testdata", fmt.Sprintf("v%d-%s.sqscope", version, name))
}

func TestGolden(t *testing.T) {
	for _, v := range versions {
		for _, g := range goldens {
			path := goldenPath(v, g.name)
			t.Run(filepath.Base(path), func(t *testing.T) {
				if v == 1 && g.name == "workload" {
					t.Skip("version 1 has no golden of this set: it came with version 2")
				}
				data := writeRecordingIn(t, v, g.events(), 0)
				if *update {
					if err := os.WriteFile(path, data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				golden, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				info, got, err := readAll(golden)
				if err != io.EOF {
					t.Fatalf("reading %s: %v", path, err)
				}
				assertInfo(t, info, testInfo)
				assertEvents(t, got, g.events())
				if v == 1 {
					if !bytes.Equal(data, golden) {
						t.Errorf("the version 1 writer no longer writes %s byte for byte (%d bytes, golden %d)", path, len(data), len(golden))
					}
					return
				}
				// The records, not the compressor's choice of bytes,
				// which a newer zstd library may change.
				if a, b := blockRecords(t, data), blockRecords(t, golden); !reflect.DeepEqual(a, b) {
					t.Errorf("the writer no longer writes the records of %s as they are there", path)
				}
			})
		}
	}
}

// TestEveryVersionReads reads every committed recording of the format's
// goldens: each version the reader reads has some, and each reads whole
// as the version its name says.
func TestEveryVersionReads(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "v*-*.sqscope"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint16]int{}
	for _, path := range files {
		var v uint16
		if _, err := fmt.Sscanf(filepath.Base(path), "v%d-", &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; ; n++ {
			if _, err = r.Next(); err != nil {
				break
			}
		}
		r.Close()
		if err != io.EOF || n == 0 || r.Version() != v {
			t.Errorf("%s: %d events, then %v; version %d", path, n, err, r.Version())
		}
		seen[v]++
	}
	for v := uint16(1); v <= FormatVersion; v++ {
		if seen[v] == 0 {
			t.Errorf("no recording of version %d under testdata", v)
		}
	}
}

// seedCorpus is the committed seed corpus of FuzzReader: valid recordings,
// cut ones and damaged ones, of both versions. Those of version 1 are
// byte for byte what its writer writes; the rest need only read as the
// writer's would, as their compressed bytes are the zstd library's.
func seedCorpus(t testing.TB) (v1, v2 map[string][]byte) {
	small := writeRecordingV1(t, allEvents(), 0)
	multi := writeRecordingV1(t, manyEvents(30), 200)
	flipped := bytes.Clone(multi)
	flipped[len(flipped)/2] ^= 0x40
	future := bytes.Clone(small)
	binary.LittleEndian.PutUint16(future[8:], FormatVersion+1)
	v1 = map[string][]byte{
		"valid-all-kinds":     small,
		"valid-multi-chunk":   multi,
		"valid-empty":         writeRecordingV1(t, nil, 0),
		"cut-in-header":       small[:fileHeaderLen+5],
		"cut-mid-chunk":       multi[:len(multi)/2],
		"cut-before-end":      small[:len(small)-chunkHeaderLen-endChunkLen],
		"bad-checksum":        flipped,
		"bad-version":         future,
		"bad-magic":           []byte("#!/bin/sh\necho not a recording\n"),
		"all-kinds-cut-short": small[:len(small)-40],
		"valid-cuts":          writeRecordingV1(t, cutEvents(), 0),
		"valid-qp-cuts":       writeRecordingV1(t, qpCutEvents(), 0),
		"valid-lifecycle":     writeRecordingV1(t, lifeEvents(), 0),
		"valid-entry-points":  writeRecordingV1(t, entryPointEvents(), 0),
	}
	small = writeRecording(t, allEvents(), 0)
	multi = writeRecording(t, manyEvents(30), 200)
	flipped = bytes.Clone(multi)
	flipped[len(flipped)/2] ^= 0x40
	v2 = map[string][]byte{
		"v2-valid-all-kinds":    small,
		"v2-valid-multi-block":  multi,
		"v2-valid-empty":        writeRecording(t, nil, 0),
		"v2-valid-workload":     writeRecording(t, StreamEvents(StreamConfig{QPs: 3, PostList: 4, Signal: 4, Posts: 60}), 1024),
		"v2-valid-lifecycle":    writeRecording(t, lifeEvents(), 0),
		"v2-valid-entry-points": writeRecording(t, entryPointEvents(), 0),
		"v2-cut-mid-block":      multi[:len(multi)/2],
		"v2-cut-before-end":     small[:len(small)-blockHeaderLen-endChunkLen],
		"v2-bad-checksum":       flipped,
	}
	return v1, v2
}

func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	v1, v2 := seedCorpus(t)
	for _, set := range []map[string][]byte{v1, v2} {
		for name, data := range set {
			path := filepath.Join(dir, name)
			want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if *update {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./trace -run TestSeedCorpus -update writes it)", err)
			}
			if string(got) == want {
				continue
			}
			stale := true
			if _, isV2 := v2[name]; isV2 {
				stale = !sameReading(t, got, data)
			}
			if stale {
				t.Errorf("%s is stale: go test ./trace -run TestSeedCorpus -update rewrites it", path)
			}
		}
	}
}

// sameReading says whether a committed seed file reads as data does: the
// same events, ending the same way.
func sameReading(t *testing.T, seed, data []byte) bool {
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(string(seed), "go test fuzz v1\n[]byte("), ")\n"))
	if err != nil {
		return false
	}
	_, a, errA := readAll([]byte(s))
	_, b, errB := readAll(data)
	return reflect.DeepEqual(a, b) && fmt.Sprint(errA) == fmt.Sprint(errB)
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
