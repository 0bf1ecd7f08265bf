package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// block is one block of a version 2 recording, as blockLayout finds it.
type block struct {
	start, end int // its bytes in the file
	count      int // its records (0: the end block)
	records    []byte
}

// blockLayout walks a version 2 recording's framing on its own
// (independently of Reader): where the file header ends, and its blocks,
// the end block last.
func blockLayout(t testing.TB, data []byte) (headerEnd int, blocks []block) {
	t.Helper()
	if v := binary.LittleEndian.Uint16(data[8:]); v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
	pos := fileHeaderLen + int(binary.LittleEndian.Uint32(data[10:]))
	headerEnd = pos
	zdec, err := zstdDecoder()
	if err != nil {
		t.Fatal(err)
	}
	for {
		length := int(binary.LittleEndian.Uint32(data[pos:]))
		b := block{start: pos, end: pos + blockHeaderLen + length, count: int(binary.LittleEndian.Uint32(data[pos+4:]))}
		if b.count == 0 {
			if b.end != len(data) {
				t.Fatalf("end block at %d does not end the file (%d bytes)", pos, len(data))
			}
			return headerEnd, append(blocks, b)
		}
		if b.records, err = zdec.DecodeAll(data[pos+blockHeaderLen:b.end], nil); err != nil {
			t.Fatalf("block at %d: %v", pos, err)
		}
		if n := int(binary.LittleEndian.Uint32(data[pos+8:])); n != len(b.records) {
			t.Fatalf("block at %d: %d bytes of records, header says %d", pos, len(b.records), n)
		}
		blocks = append(blocks, b)
		pos = b.end
	}
}

// blockRecords is what the blocks of a version 2 recording hold: each
// one's count and records.
func blockRecords(t testing.TB, data []byte) []string {
	t.Helper()
	_, blocks := blockLayout(t, data)
	var out []string
	for _, b := range blocks {
		out = append(out, fmt.Sprintf("%d %x", b.count, b.records))
	}
	return out
}

func TestCutAtEveryOffsetV2(t *testing.T) {
	events := append(manyEvents(60), StreamEvents(StreamConfig{QPs: 2, PostList: 3, Signal: 4, Posts: 20})...)
	data := writeRecording(t, events, 256)
	headerEnd, blocks := blockLayout(t, data)
	if len(blocks) < 5 {
		t.Fatalf("want a file of several blocks: got %d", len(blocks))
	}
	t.Logf("%d bytes, %d blocks", len(data), len(blocks))
	for cut := 0; cut <= len(data); cut++ {
		got, te := readCut(t, data, cut, headerEnd, events)
		if te == nil {
			continue
		}
		want := TruncatedError{Offset: int64(headerEnd)}
		n := 0
		for _, b := range blocks {
			if b.end <= cut {
				want.Offset = int64(b.end)
				n += b.count
				continue
			}
			if cut-b.start >= blockHeaderLen {
				want.CutRecords = int64(b.count)
			}
			break
		}
		want.Leftover = int64(cut) - want.Offset
		if *te != want {
			t.Fatalf("cut at %d: %+v, want %+v", cut, *te, want)
		}
		assertEvents(t, got, events[:n])
	}
}

// rawBlock frames records as a version 2 block of count records.
func rawBlock(t testing.TB, records []byte, count uint32) []byte {
	t.Helper()
	zenc, err := zstdEncoder()
	if err != nil {
		t.Fatal(err)
	}
	b := zenc.EncodeAll(records, make([]byte, blockHeaderLen))
	putBlockHeader(b, count, len(records))
	return b
}

// withBlocks is a version 2 recording of the given blocks, whose end block
// says it holds total records.
func withBlocks(t testing.TB, total uint64, blocks ...[]byte) []byte {
	head := writeRecording(t, nil, 0)
	data := head[:len(head)-blockHeaderLen-endChunkLen]
	for _, b := range blocks {
		data = append(data, b...)
	}
	end := binary.LittleEndian.AppendUint64(make([]byte, blockHeaderLen), total)
	putBlockHeader(end, 0, 0)
	return append(data, end...)
}

func TestCorruptionV2(t *testing.T) {
	events := manyEvents(40)
	data := writeRecording(t, events, 256)
	_, blocks := blockLayout(t, data)
	before := func(i int) int {
		n := 0
		for _, b := range blocks[:i] {
			n += b.count
		}
		return n
	}
	last := len(blocks) - 1
	tests := []flipCase{
		{"first block payload", blocks[0].start + blockHeaderLen + 3, int64(blocks[0].start), 0, "block checksum mismatch"},
		{"second block count", blocks[1].start + 4, int64(blocks[1].start), before(1), "block checksum mismatch"},
		{"second block records length", blocks[1].start + 8, int64(blocks[1].start), before(1), "block checksum mismatch"},
		{"second block checksum", blocks[1].start + 12, int64(blocks[1].start), before(1), "block checksum mismatch"},
		{"last byte of a block", blocks[2].start - 1, int64(blocks[1].start), before(1), "block checksum mismatch"},
		{"end block total", blocks[last].start + blockHeaderLen, int64(blocks[last].start), len(events), "end block checksum mismatch"},
		{"end block records length", blocks[last].start + 8, int64(blocks[last].start), len(events), "bad block header (1 bytes of records, no records)"},
		{"file header info", fileHeaderLen + 2, int64(fileHeaderLen), -1, "file header checksum mismatch"},
	}
	checkFlips(t, data, events, tests)

	// Blocks whose checksum holds but whose records do not match their
	// header: the records before the damage are returned.
	e := newEncoder(2)
	var recs []byte
	for _, ev := range events[:5] {
		var err error
		if recs, err = e.appendRecord(recs, ev); err != nil {
			t.Fatal(err)
		}
	}
	recs = e.appendBlock(nil, recs)
	start := int64(len(withBlocks(t, 0)) - blockHeaderLen - endChunkLen)
	headerOf := func(b []byte) []byte { return b[:blockHeaderLen] }
	wrongLength := rawBlock(t, recs, 5)
	binary.LittleEndian.PutUint32(wrongLength[8:], uint32(len(recs)+1))
	putSum := func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[12:], blockSum(b[:12], b[blockHeaderLen:]))
		return b
	}
	notZstd := append(make([]byte, blockHeaderLen), recs...)
	putBlockHeader(notZstd, 5, len(recs))
	damaged := bytes.Clone(recs)
	damaged[len(damaged)-1] = 0xff // the last record's last varint runs on
	crafted := []struct {
		name       string
		block      []byte
		wantEvents int
		wantReason string
	}{
		{"count too small", rawBlock(t, recs, 4), 4, "stray bytes after the last record of the block"},
		{"count too large", rawBlock(t, recs, 6), 5, "block holds fewer records than its header says (6)"},
		{"records length wrong", putSum(wrongLength), 0, fmt.Sprintf("block decompresses to %d bytes of records, its header says %d", len(recs), len(recs)+1)},
		{"not zstd", notZstd, 0, "block does not decompress: "},
		{"record damaged", rawBlock(t, damaged, 5), 4, "record 4 of the block: "},
		{"more records than bytes", putSum(append(headerOf(rawBlock(t, recs, uint32(len(recs)+1))), rawBlock(t, recs, 5)[blockHeaderLen:]...)), 0,
			fmt.Sprintf("%d bytes of records cannot hold %d records", len(recs), len(recs)+1)},
	}
	for _, tc := range crafted {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := readAll(withBlocks(t, 5, tc.block))
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Offset != start || !strings.HasPrefix(ce.Reason, tc.wantReason) {
				t.Fatalf("err %v, want a corrupt block at %d: %q", err, start, tc.wantReason)
			}
			checkReadError(t, err)
			assertEvents(t, got, events[:tc.wantEvents])
		})
	}
}

func TestUnknownKindSkippedV2(t *testing.T) {
	first := &Lost{Header: Header{TimeNS: 1000, PID: 7, TID: 8}, Count: 1}
	second := &Lost{Header: Header{TimeNS: 1500, PID: 9, TID: 8}, Count: 2}
	e := newEncoder(2)
	recs, _ := e.appendRecord(nil, first)
	// A record of a future kind on a thread not seen before: its header
	// adds the thread to the block's, as a known kind's would.
	future, err := e.appendRecord(nil, &Lost{Header: Header{TimeNS: 1200, PID: 9, TID: 8}})
	if err != nil {
		t.Fatal(err)
	}
	n, w := binary.Uvarint(future[1:])
	body := append(bytes.Clone(future[1+w:1+w+int(n)]), "future fields"...)
	recs = append(recs, 200, byte(len(body)))
	recs = append(recs, body...)
	recs, _ = e.appendRecord(recs, second) // the same thread: referred to as the last
	r, got := readWhole(t, withBlocks(t, 3, rawBlock(t, e.appendBlock(nil, recs), 3)))
	assertEvents(t, got, []Event{first, second})
	if r.Skipped() != 1 || r.Version() != 2 {
		t.Errorf("Skipped() = %d, Version() = %d; want 1, 2", r.Skipped(), r.Version())
	}
}

// TestTablesAndShapes fills a block's tables: more threads, QPs and CQs
// than a byte refers to, more list shapes than the table keeps, each met
// again later, lists whose wr_ids jump, wrap and repeat, and QPs whose
// address or number alone is another's.
func TestTablesAndShapes(t *testing.T) {
	var evs []Event
	at := uint64(1_000)
	h := func(i int) Header {
		at += 150
		return Header{TimeNS: at, PID: uint32(100 + i%3), TID: uint32(1000 + i%300)}
	}
	list := func(id uint64, n int, bytes uint32) []WR {
		wrs := make([]WR, n)
		for j := range wrs {
			wrs[j] = WR{ID: id + uint64(j), Opcode: 2, Flags: 8, NumSGE: 1, Bytes: bytes}
		}
		return wrs
	}
	for round := range 2 {
		for i := range maxShapes + 300 {
			qp := uint64(0x7000 + 0x40*(i%400))
			num := uint32(i % 400)
			if i%7 == 0 {
				num++ // the same address with another number
			}
			wrs := list(uint64(i)<<20, 1+i%5, uint32(i)) // a shape per i
			switch i % 11 {
			case 3:
				wrs[0].ID = math.MaxUint64 // wraps to 0 next
			case 5:
				wrs[len(wrs)-1].ID = wrs[0].ID // repeats
			case 7:
				wrs = nil
			}
			evs = append(evs, &Post{Header: h(i), QP: qp, QPNum: num, WRs: wrs, Accepted: uint32(len(wrs)), Ret: int32(round)})
			if i%4 == 0 {
				wcs := []WC{{ID: uint64(i), Status: uint8(i % 3), ByteLen: uint32(i), QPNum: num}, {ID: uint64(i) - 5, QPNum: num + 1}}
				evs = append(evs, &Poll{Header: h(i), CQ: uint64(0x9000 + 0x40*(i%333)), Max: 16, Ret: 2, WCs: wcs})
			}
			if i%50 == 0 {
				evs = append(evs, &PostRecv{Header: h(i), QP: qp, QPNum: num, NumWRs: 4, Accepted: 4},
					&EmptyPolls{Header: h(i), CQ: uint64(0x9000 + 0x40*(i%333)), Count: uint64(i)})
			}
		}
	}
	data := writeRecording(t, evs, 1<<30) // one block
	if _, blocks := blockLayout(t, data); len(blocks) != 2 {
		t.Fatalf("%d blocks, want one and the end", len(blocks))
	}
	_, got, err := readAll(data)
	if err != io.EOF {
		t.Fatal(err)
	}
	assertEvents(t, got, evs)
}

func TestBadReference(t *testing.T) {
	e := newEncoder(2)
	first, _ := e.appendRecord(nil, &Lost{Header: Header{TimeNS: 1000, PID: 7, TID: 8}, Count: 1})
	tests := []struct {
		name string
		recs []byte
	}{
		// a Lost record: kind, length, thread reference, count; its time
		// in the column
		{"thread past the table", append(bytes.Clone(first), byte(KindLost), 2, 3, 1)},
		{"last thread before any", []byte{byte(KindLost), 2, 0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(2)
			recs, err := d.beginBlock(append([]byte{2, 0x10, 0x10}, tc.recs...))
			if err != nil {
				t.Fatal(err)
			}
			for p := recs; len(p) > 0 && err == nil; {
				var n int
				_, n, err = d.nextRecord(p)
				p = p[n:]
			}
			if want := "lost record: reference past the entries of its block"; err == nil || err.Error() != want {
				t.Errorf("err %v, want %q", err, want)
			}
		})
	}
}

// TestFlatMemory writes a long recording and reads it back, one new event
// at a time and as report does (Reader.Reuse, in batches), each with the
// live heap measured as it goes: none grows with the recording.
func TestFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads 6.4M WRs")
	}
	path := filepath.Join(t.TempDir(), "long.sqscope")
	w, err := Create(path, testInfo)
	if err != nil {
		t.Fatal(err)
	}
	const posts = 400_000
	var ms runtime.MemStats
	heap := func() float64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapAlloc) / (1 << 20)
	}
	base := heap()
	var writing []float64
	p := &Post{WRs: make([]WR, 16)}
	for i := range posts {
		setPost(p, i)
		p.TimeNS += uint64(i*2654435761) >> 20 % 256 // jitter
		if err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if i%(posts/4) == posts/4-1 {
			writing = append(writing, heap()-base)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// read one event at a time, then as a report does: events reused, in
	// batches
	read := func(reuse bool) []float64 {
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		batch := make([]Event, 1)
		if reuse {
			r.Reuse()
			batch = make([]Event, 256)
		}
		var at []float64
		for i := 0; ; {
			n, err := r.NextBatch(batch)
			if err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				return at
			}
			for range n {
				if i%(posts/4) == posts/4-1 {
					at = append(at, heap()-base)
				}
				i++
			}
		}
	}
	reading, reused := read(false), read(true)
	st, _ := os.Stat(path)
	t.Logf("%d bytes; live heap beyond the start, MiB, writing %.2f, reading %.2f, reading reused %.2f", st.Size(), writing, reading, reused)
	for _, m := range [][]float64{writing, reading, reused} {
		if len(m) != 4 || m[3] > m[0]+1 || m[3] > 4 {
			t.Errorf("live heap grows with the recording: %.2f MiB at each quarter", m)
		}
	}
}

// compactCases are the streams BenchmarkCompact measures: the built-in
// workload's shape (a CQE every 16th WR), inline and not, over several
// QPs and threads, one WR and 16 per call; then with CQs shared by many
// QPs, and with what applications vary (StreamConfig.Varied).
var compactCases = []struct {
	name string
	cfg  StreamConfig
}{
	{"post_list=1", StreamConfig{QPs: 4, Threads: 2, PostList: 1, Signal: 16, Posts: 100_000}},
	{"post_list=16", StreamConfig{QPs: 4, Threads: 2, PostList: 16, Signal: 16, Posts: 6_250}},
	{"post_list=1,shared_cq", StreamConfig{QPs: 64, Threads: 4, PostList: 1, Signal: 16, Posts: 6_250, SharedCQ: true}},
	{"post_list=16,shared_cq", StreamConfig{QPs: 64, Threads: 4, PostList: 16, Signal: 16, Posts: 400, SharedCQ: true}},
	{"post_list=1,varied", StreamConfig{QPs: 4, Threads: 2, PostList: 1, Signal: 16, Posts: 100_000, Varied: true}},
	{"post_list=16,varied", StreamConfig{QPs: 4, Threads: 2, PostList: 16, Signal: 16, Posts: 6_250, Varied: true}},
}

// BenchmarkCompact measures recordings of synthetic streams: bytes per WR
// of this version and of version 1 side by side, the writer's CPU time
// per WR, and the reader's rate on one core in WRs per CPU-second, of this
// version and of version 1, measured alternately (each op reads both
// recordings whole; ns/op is for the two).
func BenchmarkCompact(b *testing.B) {
	for _, tc := range compactCases {
		b.Run(tc.name, func(b *testing.B) {
			evs := StreamEvents(tc.cfg)
			wrs := 0
			for _, ev := range evs {
				if p, ok := ev.(*Post); ok {
					wrs += len(p.WRs)
				}
			}
			v1 := writeRecordingV1(b, evs, 0)
			start := CPUNow()
			data := writeRecording(b, evs, 0)
			writeNS := float64(CPUNow()-start) / float64(wrs)

			prev := runtime.GOMAXPROCS(1)
			defer runtime.GOMAXPROCS(prev)
			readAll := func(data []byte) {
				r, err := NewReader(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					if _, err := r.Next(); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
					n++
				}
				if n != len(evs) {
					b.Fatalf("read %d events of %d", n, len(evs))
				}
			}
			// Each op reads this version's recording, then version 1's,
			// so that both rates are measured under the same load.
			var cpu, cpuV1 int64
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start = CPUNow()
				readAll(data)
				mid := CPUNow()
				readAll(v1)
				cpu, cpuV1 = cpu+mid-start, cpuV1+CPUNow()-mid
			}
			b.StopTimer()
			rate := float64(wrs) * float64(b.N) / (float64(cpu) / 1e9)
			rateV1 := float64(wrs) * float64(b.N) / (float64(cpuV1) / 1e9)
			b.ReportMetric(float64(len(data))/float64(wrs), "B/WR")
			b.ReportMetric(float64(len(v1))/float64(wrs), "v1-B/WR")
			b.ReportMetric(float64(len(v1))/float64(len(data)), "v1/v2")
			b.ReportMetric(rate, "WR/cpu-s")
			b.ReportMetric(rateV1, "v1-WR/cpu-s")
			b.ReportMetric(rate/rateV1, "v2/v1-rate")
			b.ReportMetric(writeNS, "write-ns/WR")
		})
	}
}
