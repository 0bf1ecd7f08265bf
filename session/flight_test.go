package session

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// flightPost is a post of one WR on QP 0x11 of pid 7 at ns, failed with
// ret (0: accepted).
func flightPost(ns uint64, id int, ret int32) *trace.Post {
	p := &trace.Post{Header: trace.Header{TimeNS: ns, PID: 7, TID: 7}, QP: 0xa0, QPNum: 0x11, Ret: ret,
		WRs: []trace.WR{{ID: uint64(id)*7919 + 1, Opcode: ibv.WRSend, Bytes: uint32(id % 4096), NumSGE: 1}}}
	if ret == 0 {
		p.Accepted = 1
	}
	return p
}

// flightFiles are the flight recordings in dir, oldest first.
func flightFilesIn(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, flightFilePattern))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// A flight recorder fed synthetic events: its stats say the bytes its
// window holds against the bound and the events the bound dropped,
// oldest first; each trigger makes a file of mode 0600 saying its
// trigger, the directory never holds more than MaxFiles (a file of an
// earlier run counted, a file of another name left alone), and the
// newest file complete is named with its trigger and time.
func TestFlightStatsAndFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "flight")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	earlier := filepath.Join(dir, "sqscope-flight-20000101T000000.000Z-signal.sqscope")
	other := filepath.Join(dir, "notes.txt")
	for _, p := range []string{earlier, other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const bound = 64 << 10
	var warn bytes.Buffer // written under the recorder's lock; read after Close
	f, err := newFlight(FlightConfig{Dir: dir, Window: 10 * time.Second, After: 20 * time.Millisecond, MaxBytes: bound,
		MaxFiles: 2, Triggers: []FlightTrigger{{On: TriggerENOMEM}}}, &warn, &warn)
	if err != nil {
		t.Fatal(err)
	}
	if st := f.Stats(); st.Latest.Path != "" || st.RingBytes != 0 || st.MaxBytes != bound || !slices.Equal(st.Files, []string{earlier}) {
		t.Errorf("before the start: %+v; want no file written, nothing held, the bound, the earlier file kept", st)
	}
	if err := f.begin(trace.FileInfo{Version: "test"}, analyzer.New(analyzer.Options{})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })

	// 200,000 posts 1 µs apart, well within the window: only the bound
	// drops, the oldest blocks first
	const n = 200_000
	t0 := trace.MonotonicNS() - uint64(time.Second)
	f.write(&trace.QPCreate{Header: trace.Header{TimeNS: t0, PID: 7, TID: 7}, QP: 0xa0, QPNum: 0x11, Type: trace.QPTypeRC,
		Via: "ibv_create_qp", Caps: trace.Caps{MaxSendWR: 64, MaxSendSGE: 1}, Gen: 1})
	for i := range n {
		f.write(flightPost(t0+uint64(i+1)*1000, i, 0))
		if (i+1)%2000 == 0 {
			if err := f.ring.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := f.Stats()
	rs := f.ring.Stats()
	if st.RingBytes <= 0 || st.RingBytes > bound || st.RingBytes != rs.Bytes {
		t.Errorf("window holds %d bytes (the ring %d), want some and at most the bound %d", st.RingBytes, rs.Bytes, bound)
	}
	if st.Dropped == 0 || st.Dropped != rs.Dropped || rs.Aged != 0 {
		t.Errorf("dropped %d (the ring %d), aged %d: want some dropped by the bound, none aged", st.Dropped, rs.Dropped, rs.Aged)
	}
	blocks, err := f.ring.Take()
	if err != nil {
		t.Fatal(err)
	}
	var kept uint64
	for _, b := range blocks {
		kept += uint64(b.Records)
	}
	if kept+st.Dropped != n+1 {
		t.Errorf("kept %d + dropped %d != %d written", kept, st.Dropped, n+1)
	}
	if blocks[len(blocks)-1].LastNS != t0+n*1000 {
		t.Errorf("the newest block ends at %d, want the last post's %d: the oldest must go first", blocks[len(blocks)-1].LastNS, t0+n*1000)
	}

	// three ENOMEMs, each once the file before is complete
	var written []string
	for i := range 3 {
		before := time.Now()
		f.write(flightPost(trace.MonotonicNS(), n+i, int32(ibv.ENOMEM)))
		// the file of this trigger is made: the directory holds no more
		// than MaxFiles even while it is written
		if files := flightFilesIn(t, dir); len(files) > 2 {
			t.Errorf("trigger %d: %d files while writing, want at most 2: %v", i+1, len(files), files)
		}
		deadline := time.Now().Add(5 * time.Second)
		for f.Stats().Written[TriggerENOMEM] <= i {
			if time.Now().After(deadline) {
				t.Fatalf("trigger %d: no file complete after 5 s", i+1)
			}
			time.Sleep(5 * time.Millisecond)
		}
		st := f.Stats()
		l := st.Latest
		if l.Trigger != TriggerENOMEM || l.Done.Before(before) || l.Done.After(time.Now()) || filepath.Dir(l.Path) != dir {
			t.Errorf("trigger %d: latest %+v, want an enomem file in %s complete since %v", i+1, l, dir, before)
		}
		if slices.Contains(written, l.Path) || !slices.Contains(st.Files, l.Path) {
			t.Errorf("trigger %d: latest %s, written before %v, kept %v: want a new file, kept", i+1, l.Path, written, st.Files)
		}
		written = append(written, l.Path)
		fi, err := os.Lstat(l.Path)
		if err != nil || fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v (err %v), want a regular file of mode 0600", l.Path, fi.Mode(), err)
		}
		rd, err := OpenRecording(l.Path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ReadAll(context.Background(), rd, func(trace.Event) {})
		if info := rd.Info().Flight; err != nil || info == nil || info.Trigger != TriggerENOMEM || res.Events == 0 {
			t.Errorf("%s: flight info %+v, %d events, err %v", l.Path, info, res.Events, err)
		}
		rd.Close()
		if files := flightFilesIn(t, dir); !slices.Equal(files, st.Files) {
			t.Errorf("trigger %d: directory holds %v, stats say %v", i+1, files, st.Files)
		}
		time.Sleep(2 * time.Millisecond) // file names are by the millisecond
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v\n%s", err, warn.String())
	}
	if files := flightFilesIn(t, dir); !slices.Equal(files, written[1:]) {
		t.Errorf("kept %v, want the last two of %v", files, written)
	}
	if b, err := os.ReadFile(other); err != nil || string(b) != "x" {
		t.Errorf("a file of another name changed: %q, %v", b, err)
	}
	if st := f.Stats(); st.Written[TriggerENOMEM] != 3 || st.Latest.Path != written[2] {
		t.Errorf("after close: %+v, want 3 written, the latest %s", st, written[2])
	}
}
