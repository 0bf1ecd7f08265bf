package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden recording and the fuzz seed corpus under testdata/")

// testInfo is a fixed FileInfo, so recordings written in tests are
// byte-for-byte reproducible.
var testInfo = FileInfo{
	Hostname:    "rdma-host-1",
	Kernel:      "6.8.0-45-generic",
	Version:     "0.1.0",
	StartWall:   time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC),
	StartMonoNS: 123456789012345,
	Target:      "ib_write_bw -d mlx5_0 -s 64 -I 64",
	TargetPID:   4242,
	ProbeMode:   "ops-table",
}

// allEvents holds every concrete event type, with values at the edges of
// their fields: negative ints, maximum values, empty and non-ASCII strings,
// wr_ids that jump, repeat and wrap, times that go backwards.
func allEvents() []Event {
	return []Event{
		&QPCreate{Header: Header{TimeNS: 1_000_000, PID: 4242, TID: 4243}, QP: 0x7f12_3456_7890, QPNum: 0x1234,
			Type: QPTypeRC, SigAll: true, SendCQ: 0x7f00_0000_1000, RecvCQ: 0x7f00_0000_2000,
			Caps: Caps{MaxSendWR: 204, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 124}, Via: "ibv_create_qp"},
		&QPModify{Header: Header{TimeNS: 1_000_500, PID: 4242, TID: 4243}, QP: 0x7f12_3456_7890, QPNum: 0x1234, State: -1, Ret: -22},
		&Post{Header: Header{TimeNS: 1_001_000, PID: 4242, TID: 4243}, QP: 0x7f12_3456_7890, QPNum: 0x1234, API: APIPostSend,
			WRs: []WR{
				{ID: 100, Opcode: 0, Flags: 8, NumSGE: 1, Bytes: 64},
				{ID: 101, Opcode: 0, Flags: 8, NumSGE: 1, Bytes: 64},
				{ID: 99, Opcode: 2, Flags: 2 | 8, NumSGE: 1, Bytes: 64},
				{ID: math.MaxUint64, Opcode: 4, Flags: math.MaxUint32, NumSGE: math.MaxUint32, Bytes: math.MaxUint32},
				{ID: 0},
				{ID: 0},
			},
			Truncated: 3, Ret: 12, Accepted: 2, EntryNS: 1_000_940},
		&Post{Header: Header{TimeNS: 1_001_100, PID: 4242, TID: 4244}, API: APIWR, Aborted: true, Ret: -1,
			EntryNS: math.MaxUint64},
		&Poll{Header: Header{TimeNS: 999_999, PID: 4242, TID: 4243}, CQ: 0x7f00_0000_1000, Max: 16, Ret: 3,
			WCs: []WC{
				{ID: 101, Status: 0, Opcode: 0, ByteLen: 64, QPNum: 0x1234},
				{ID: 102, Status: 5, Opcode: 0, ByteLen: 0, QPNum: 0x1234},
				{ID: 7, Status: 0, Opcode: 128, ByteLen: math.MaxUint32, QPNum: math.MaxUint32},
			},
			Truncated: 1, EmptyBefore: 1 << 40, EntryNS: 999_000},
		&Poll{Header: Header{TimeNS: 0, PID: 1, TID: 1}, Max: math.MinInt32, Ret: math.MinInt32},
		&EmptyPolls{Header: Header{TimeNS: 2_000_000, PID: 4242, TID: 4243}, CQ: 0x7f00_0000_1000, Count: 123456},
		&PostRecv{Header: Header{TimeNS: 2_000_100, PID: 4242, TID: 4243}, QP: 0x7f12_3456_7890, QPNum: 0x1234,
			NumWRs: 32, Ret: -12, Accepted: 31},
		&Lost{Header: Header{TimeNS: math.MaxUint64, PID: math.MaxUint32, TID: 0}, Count: math.MaxUint64},
		&Exit{Header: Header{TimeNS: 3_000_000, PID: 4242, TID: 4242}, Code: -1, Signal: 9},
		&Attach{Header: Header{TimeNS: 5, PID: 0, TID: 0}, Func: "post_send", Path: "/usr/lib/x86_64-linux-gnu/libmlx5.so.1",
			Offset: 0x1a2b0, How: "ops-table", Err: ""},
		&Attach{Header: Header{TimeNS: 6}, Func: "poll_cq", Path: "", How: "explicit",
			Err: "attaching uprobe: permission denied \x00 ünïcode"},
		&QPDestroy{Header: Header{TimeNS: 4_000_000, PID: 4242, TID: 4243}, QP: 0x7f12_3456_7890, QPNum: 0x1234, Ret: 0},
		&QPCounters{Header: Header{TimeNS: 4_000_001, PID: 4242, TID: 4243}, QP: 0x7f12_3456_7890, QPNum: 0x1234,
			PostCalls: 1, WRs: 2, Inline: 3, Signaled: 4, Doorbells: 5, Errors: 6, ENOMEM: 7, EINVAL: 8,
			InlineBytes: 9, PayloadBytes: 10, PayloadSGEs: 11, WRsPerCallMax: math.MaxUint64},
		&CQCounters{Header: Header{TimeNS: 4_000_002, PID: 4242, TID: 4243}, CQ: 0x7f12_0000_1000, Polls: 100, CQEs: 7, Empty: 93},
	}
}

// writeRecording writes events to an in-memory recording whose chunks are
// written once they reach target bytes (0: the default).
func writeRecording(t testing.TB, events []Event, target int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testInfo)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	if target > 0 {
		w.target = target
	}
	for _, ev := range events {
		if err := w.Write(ev); err != nil {
			t.Fatalf("Write(%s): %v", ev.Kind(), err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := w.Bytes(); got != int64(buf.Len()) {
		t.Fatalf("Bytes() = %d, wrote %d", got, buf.Len())
	}
	if got := w.Events(); got != int64(len(events)) {
		t.Fatalf("Events() = %d, want %d", got, len(events))
	}
	return buf.Bytes()
}

// readAll reads a recording to its first error, which it returns.
func readAll(data []byte) (FileInfo, []Event, error) {
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return FileInfo{}, nil, err
	}
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return r.Info(), evs, err
		}
		evs = append(evs, ev)
	}
}

func assertInfo(t *testing.T, got, want FileInfo) {
	t.Helper()
	if !got.StartWall.Equal(want.StartWall) || got.StartWall.IsZero() != want.StartWall.IsZero() {
		t.Errorf("StartWall = %v, want %v", got.StartWall, want.StartWall)
	}
	got.StartWall, want.StartWall = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("info = %+v, want %+v", got, want)
	}
}

func assertEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("event %d:\n got %#v\nwant %#v", i, got[i], want[i])
		}
	}
}

func TestRoundTripEveryKind(t *testing.T) {
	seen := map[Kind]bool{}
	every := append(append(append(append(append(allEvents(), lifeEvents()...), entryPointEvents()...), procEvents()...), scanEvents()...), failEvents()...)
	for _, ev := range every {
		seen[ev.Kind()] = true
	}
	for k := range kindNames {
		if !seen[k] {
			t.Errorf("allEvents, lifeEvents, entryPointEvents, procEvents, scanEvents and failEvents have no %s event: add one", k)
		}
	}
	for _, v := range versions {
		for i, ev := range every {
			t.Run(fmt.Sprintf("v%d/%d_%s", v, i, ev.Kind()), func(t *testing.T) {
				// Alone, and after another record, so it is also encoded
				// against a previous time, PID and TID.
				prev := &Lost{Header: Header{TimeNS: 1_000_700, PID: 4242, TID: 4243}, Count: 1}
				for _, evs := range [][]Event{{ev}, {prev, ev}} {
					info, got, err := readAll(writeRecordingIn(t, v, evs, 0))
					if err != io.EOF {
						t.Fatalf("reading: %v, want io.EOF", err)
					}
					assertInfo(t, info, testInfo)
					assertEvents(t, got, evs)
				}
			})
		}
		// All of them in one block or chunk: each encoded against the
		// ones before.
		t.Run(fmt.Sprintf("v%d/together", v), func(t *testing.T) {
			_, got, err := readAll(writeRecordingIn(t, v, every, 0))
			if err != io.EOF {
				t.Fatalf("reading: %v, want io.EOF", err)
			}
			assertEvents(t, got, every)
		})
	}
}

func TestFileInfoRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		info FileInfo
	}{
		{"full", testInfo},
		{"zero", FileInfo{}},
		{"before 1970", FileInfo{StartWall: time.Date(1969, 7, 20, 20, 17, 40, 1, time.UTC), Target: "pid 1"}},
		{"unicode and long", FileInfo{Hostname: "höst", Target: strings.Repeat("arg ", 5000), ProbeMode: "symbol"}},
		{"provider env", FileInfo{Target: "x", Env: []string{"MLX5_SHUT_UP_BF=1", "MLX5_POST_SEND_PREFER_BF=0"}}},
		{"flight", FileInfo{Target: "x", Flight: &FlightInfo{Trigger: "enomem", Detail: "QP 0x11", TriggerNS: 9e9, WindowNS: 7e9, AfterNS: 5e9, Dropped: 3}}},
		{"flight and env", FileInfo{Env: []string{"A=1"}, Flight: &FlightInfo{Trigger: "signal"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, tc.info)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			info, evs, err := readAll(buf.Bytes())
			if err != io.EOF || len(evs) != 0 {
				t.Fatalf("read %d events, err %v; want 0, io.EOF", len(evs), err)
			}
			assertInfo(t, info, tc.info)
		})
	}
}

func TestHostInfo(t *testing.T) {
	fi := HostInfo()
	if fi.Hostname == "" || fi.StartWall.IsZero() {
		t.Errorf("HostInfo() = %+v, want a hostname and a start time", fi)
	}
	if _, err := os.Stat("/proc/sys/kernel/osrelease"); err == nil && fi.Kernel == "" {
		t.Errorf("HostInfo().Kernel is empty")
	}
}

// manyEvents is a few hundred events of every kind with advancing times.
func manyEvents(n int) []Event {
	base := allEvents()
	var evs []Event
	for i := range n {
		ev := cloneEvent(base[i%len(base)])
		ev.Hdr().TimeNS = uint64(10_000 + 1000*i)
		evs = append(evs, ev)
	}
	return evs
}

// cloneEvent copies ev through the codec, which TestRoundTripEveryKind
// shows to be exact.
func cloneEvent(ev Event) Event {
	var e encoder
	b, err := e.appendRecord(nil, ev)
	if err != nil {
		panic(err)
	}
	var d decoder
	out, _, err := d.nextRecord(b)
	if err != nil {
		panic(err)
	}
	return out
}

// layout walks a version 1 recording's framing on its own (independently
// of Reader): where the file header ends, where each record ends and where
// the chunk holding it ends.
func layout(t *testing.T, data []byte) (headerEnd int, recEnds, chunkEnds []int) {
	t.Helper()
	pos := fileHeaderLen + int(binary.LittleEndian.Uint32(data[10:]))
	headerEnd = pos
	for {
		length := int(binary.LittleEndian.Uint32(data[pos:]))
		count := int(binary.LittleEndian.Uint32(data[pos+4:]))
		if count == 0 {
			if pos+chunkHeaderLen+length != len(data) {
				t.Fatalf("end chunk at %d does not end the file (%d bytes)", pos, len(data))
			}
			return
		}
		end := pos + chunkHeaderLen + length
		p := pos + chunkHeaderLen
		for range count {
			l, w := binary.Uvarint(data[p+1:])
			p += 1 + w + int(l)
			recEnds = append(recEnds, p)
			chunkEnds = append(chunkEnds, end)
		}
		if p != end {
			t.Fatalf("records of the chunk at %d end at %d, chunk ends at %d", pos, p, end)
		}
		pos = end
	}
}

// readCut reads data cut at cut bytes and checks what every cut gives:
// the whole file reads to io.EOF with every event, a cut one ends in a
// one-line *TruncatedError, and one inside the file header (before
// headerEnd) has no event. For a cut past the header it returns the events
// read and the error, for the others nil.
func readCut(t *testing.T, data []byte, cut, headerEnd int, events []Event) ([]Event, *TruncatedError) {
	t.Helper()
	info, got, err := readAll(data[:cut])
	if cut == len(data) {
		if err != io.EOF {
			t.Fatalf("whole file: err %v, want io.EOF", err)
		}
		assertInfo(t, info, testInfo)
		assertEvents(t, got, events)
		return nil, nil
	}
	var te *TruncatedError
	if !errors.As(err, &te) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut at %d: err %v, want a *TruncatedError", cut, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("cut at %d: error has several lines: %q", cut, err)
	}
	if cut < headerEnd {
		want := TruncatedError{Leftover: int64(cut), InHeader: true}
		if *te != want || len(got) != 0 {
			t.Fatalf("cut at %d: %+v and %d events, want %+v", cut, *te, len(got), want)
		}
		return nil, nil
	}
	return got, te
}

func TestCutAtEveryOffsetV1(t *testing.T) {
	events := manyEvents(60)
	data := writeRecordingV1(t, events, 256)
	headerEnd, recEnds, chunkEnds := layout(t, data)
	chunks := map[int]bool{}
	for _, e := range chunkEnds {
		chunks[e] = true
	}
	if len(chunks) < 4 || len(recEnds) != len(events) {
		t.Fatalf("want a file of several chunks: got %d chunks, %d records for %d events", len(chunks), len(recEnds), len(events))
	}
	t.Logf("%d bytes, %d chunks, %d records", len(data), len(chunks), len(recEnds))
	for cut := 0; cut <= len(data); cut++ {
		got, te := readCut(t, data, cut, headerEnd, events)
		if te == nil {
			continue
		}
		k, unverified := 0, 0
		for k < len(recEnds) && recEnds[k] <= cut {
			if chunkEnds[k] > cut {
				unverified++
			}
			k++
		}
		want := TruncatedError{Offset: int64(headerEnd), Unverified: unverified}
		if k > 0 {
			want.Offset = int64(recEnds[k-1])
		}
		want.Leftover = int64(cut) - want.Offset
		if *te != want {
			t.Fatalf("cut at %d: %+v, want %+v", cut, *te, want)
		}
		assertEvents(t, got, events[:k])
	}
}

func TestTruncatedErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  TruncatedError
		want string
	}{
		{"in header", TruncatedError{Leftover: 7, InHeader: true},
			"recording truncated inside its file header, after 7 bytes"},
		{"between chunks", TruncatedError{Offset: 1234, Leftover: 0},
			"recording truncated: last whole record ends at byte 1234, 0 bytes left over"},
		{"mid chunk", TruncatedError{Offset: 1234, Leftover: 5, Unverified: 3},
			"recording truncated: last whole record ends at byte 1234, 5 bytes left over; the last 3 events were not verified by a checksum"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// chunkStarts lists the offsets of the chunks of a version 1 recording,
// end chunk last.
func chunkStarts(t *testing.T, data []byte) []int {
	_, recEnds, chunkEnds := layout(t, data)
	starts := []int{fileHeaderLen + int(binary.LittleEndian.Uint32(data[10:]))}
	for i := range recEnds {
		if i+1 == len(recEnds) || chunkEnds[i+1] != chunkEnds[i] {
			starts = append(starts, chunkEnds[i])
		}
	}
	return starts
}

// flipCase is a recording with one byte changed, and how reading it
// stops.
type flipCase struct {
	name       string
	flip       int // byte to change
	wantOffset int64
	wantEvents int // events read before (-1: none to check)
	wantReason string
}

// checkFlips reads data with each case's byte changed: a *CorruptError
// at its offset, with its reason, after its events.
func checkFlips(t *testing.T, data []byte, events []Event, tests []flipCase) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Clone(data)
			bad[tc.flip] ^= 0x01
			_, got, err := readAll(bad)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a *CorruptError", err)
			}
			if ce.Offset != tc.wantOffset || ce.Reason != tc.wantReason {
				t.Errorf("got %q, want offset %d and %q", err, tc.wantOffset, tc.wantReason)
			}
			if tc.wantEvents >= 0 {
				assertEvents(t, got, events[:tc.wantEvents])
			}
		})
	}
}

func TestCorruptionV1(t *testing.T) {
	events := manyEvents(40)
	data := writeRecordingV1(t, events, 256)
	starts := chunkStarts(t, data)
	_, recEnds, _ := layout(t, data)
	eventsBefore := func(off int) int {
		n := 0
		for n < len(recEnds) && recEnds[n] <= off {
			n++
		}
		return n
	}
	last := len(starts) - 1 // the end chunk
	tests := []flipCase{
		{"first chunk payload", starts[0] + chunkHeaderLen + 3, int64(starts[0]), 0, "chunk checksum mismatch"},
		{"second chunk checksum", starts[1] + 8, int64(starts[1]), eventsBefore(starts[1]), "chunk checksum mismatch"},
		{"last byte of a chunk", starts[2] - 1, int64(starts[1]), eventsBefore(starts[1]), "chunk checksum mismatch"},
		{"end chunk total", starts[last] + chunkHeaderLen, int64(starts[last]), len(events), "end chunk checksum mismatch"},
		{"file header info", fileHeaderLen + 2, int64(fileHeaderLen), -1, "file header checksum mismatch"},
	}
	checkFlips(t, data, events, tests)

	// The record count is outside the checksum: a wrong one shows as a
	// chunk whose records do not match it.
	second := eventsBefore(starts[1])
	inSecond := eventsBefore(starts[2]) - second
	counts := []struct {
		name       string
		count      uint32
		wantOffset int64
		wantReason string
		wantEvents int
	}{
		{"count too small", uint32(inSecond - 1), int64(recEnds[second+inSecond-2]),
			"stray bytes after the last record of the chunk", second + inSecond - 1},
		{"count too large", uint32(inSecond + 1), int64(starts[1]),
			fmt.Sprintf("chunk holds fewer records than its header says (%d)", inSecond+1), second + inSecond},
	}
	for _, tc := range counts {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Clone(data)
			binary.LittleEndian.PutUint32(bad[starts[1]+4:], tc.count)
			_, got, err := readAll(bad)
			want := fmt.Sprintf("corrupt recording at byte %d: %s", tc.wantOffset, tc.wantReason)
			if err == nil || err.Error() != want {
				t.Errorf("got %v, want %q", err, want)
			}
			// Records of the damaged chunk are returned: their checksum
			// held, only the count in its header is wrong.
			assertEvents(t, got, events[:tc.wantEvents])
		})
	}
}

func TestTrailingData(t *testing.T) {
	for _, v := range versions {
		data := append(writeRecordingIn(t, v, manyEvents(3), 0), 0)
		_, got, err := readAll(data)
		want := fmt.Sprintf("corrupt recording at byte %d: data after the end of the recording", len(data)-1)
		if err == nil || err.Error() != want || len(got) != 3 {
			t.Errorf("version %d: got %d events, err %v; want 3 events, %q", v, len(got), err, want)
		}
	}
}

func TestNotARecording(t *testing.T) {
	valid := writeRecording(t, nil, 0)
	withVersion := func(v uint16) []byte {
		b := bytes.Clone(valid)
		binary.LittleEndian.PutUint16(b[8:], v)
		return b
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"text", []byte("hello, world\n"), "not an sqscope recording (bad magic)"},
		{"elf", []byte("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"), "not an sqscope recording (bad magic)"},
		{"short not magic", []byte("SQL"), "not an sqscope recording (bad magic)"},
		{"lowercase magic", append([]byte("sqscope\x00"), valid[8:]...), "not an sqscope recording (bad magic)"},
		{"empty", nil, "recording truncated inside its file header, after 0 bytes"},
		{"magic only", []byte("SQSCOPE\x00"), "recording truncated inside its file header, after 8 bytes"},
		{"version 3", withVersion(3), "unsupported recording version 3 (this sqscope reads versions 1 to 2)"},
		{"version 0", withVersion(0), "unsupported recording version 0 (this sqscope reads versions 1 to 2)"},
		{"version 65535", withVersion(65535), "unsupported recording version 65535 (this sqscope reads versions 1 to 2)"},
		{"version 3 cut short", withVersion(3)[:11], "unsupported recording version 3 (this sqscope reads versions 1 to 2)"},
		{"huge info", append(bytes.Clone(valid[:10]), 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0),
			"corrupt recording at byte 10: file header too large (4294967295 bytes)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(tc.data))
			if err == nil {
				t.Fatalf("NewReader succeeded (info %+v), want %q", r.Info(), tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("got %q, want %q", err, tc.want)
			}
		})
	}
	var ve *VersionError
	if _, err := NewReader(bytes.NewReader(withVersion(7))); !errors.As(err, &ve) || ve.Version != 7 {
		t.Errorf("version 7: err %v, want a *VersionError for 7", err)
	}
	if _, err := NewReader(strings.NewReader("nope nope nope nope")); !errors.Is(err, ErrBadMagic) {
		t.Errorf("err %v, want ErrBadMagic", err)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sqscope")
	if err := os.WriteFile(good, writeRecording(t, manyEvents(5), 0), 0o600); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("just some notes, not a recording"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		wantErr string // empty: opens
	}{
		{"recording", good, ""},
		{"text file", text, text + ": not an sqscope recording (bad magic)"},
		{"missing", filepath.Join(dir, "missing"), "opening recording: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{"directory", dir, dir + ": reading recording at byte 0: read " + dir + ": is a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Open(tc.path)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for ; ; n++ {
				if _, err := r.Next(); err != nil {
					if err != io.EOF {
						t.Fatalf("Next: %v", err)
					}
					break
				}
			}
			if n != 5 {
				t.Errorf("read %d events, want 5", n)
			}
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// rawChunk frames records as a version 1 chunk.
func rawChunk(records []byte, count uint32) []byte {
	c := make([]byte, chunkHeaderLen, chunkHeaderLen+len(records))
	c = append(c, records...)
	putChunkHeader(c, count)
	return c
}

// readWhole reads a recording that must read to its end: its reader (what
// it counted) and its events.
func readWhole(t *testing.T, data []byte) (*Reader, []Event) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var got []Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return r, got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
}

func TestUnknownKindSkippedV1(t *testing.T) {
	head := writeRecordingV1(t, nil, 0)
	head = head[:len(head)-chunkHeaderLen-endChunkLen]
	first := &Lost{Header: Header{TimeNS: 1000, PID: 7, TID: 8}, Count: 1}
	second := &Lost{Header: Header{TimeNS: 1500, PID: 9, TID: 8}, Count: 2}
	var e encoder
	recs, _ := e.appendRecord(nil, first)
	// A record of a future kind: common header (same TID, time +200,
	// PID 9), then fields this version cannot read.
	body := []byte{hdrSameTID}
	body = binary.AppendVarint(body, 200)
	body = binary.AppendUvarint(body, 9)
	body = append(body, "future fields"...)
	recs = append(recs, 200, byte(len(body)))
	recs = append(recs, body...)
	e.state = codecState{timeNS: 1200, pid: 9, tid: 8}
	recs, _ = e.appendRecord(recs, second)
	data := append(head, rawChunk(recs, 3)...)
	end := make([]byte, chunkHeaderLen+endChunkLen)
	binary.LittleEndian.PutUint64(end[chunkHeaderLen:], 3)
	putChunkHeader(end, 0)
	data = append(data, end...)

	r, got := readWhole(t, data)
	assertEvents(t, got, []Event{first, second})
	if r.Skipped() != 1 {
		t.Errorf("Skipped() = %d, want 1", r.Skipped())
	}
}
