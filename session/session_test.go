package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		err      string
	}{
		{"words", "ib_write_bw -s 64  127.0.0.1", []string{"ib_write_bw", "-s", "64", "127.0.0.1"}, ""},
		{"single quotes", `sh -c 'a & b'`, []string{"sh", "-c", "a & b"}, ""},
		{"double quotes and escape", `echo "x \"y\"" z\ w`, []string{"echo", `x "y"`, "z w"}, ""},
		{"empty quoted word", `a ''`, []string{"a", ""}, ""},
		{"unterminated", `echo 'x`, nil, "unterminated ' quote"},
		{"empty", "  \t", nil, "empty command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SplitCommand(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("SplitCommand(%q) error %v, want %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("SplitCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	tl := &Tail{Max: 8}
	for _, s := range []string{"hello ", "world", "!"} {
		if n, err := tl.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := string(tl.Bytes()); got != "o world!" {
		t.Errorf("kept %q, want %q", got, "o world!")
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// sqscopeBin is a sqscope binary: its workload runs on the simulated HCA,
// whose functions the probes find by symbol.
func sqscopeBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("SQSCOPE_BIN"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "sqscope-session-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "sqscope")
		if out, err := exec.Command("go", "build", "-o", binPath, "../cmd/sqscope").CombinedOutput(); err != nil {
			binErr = err
			t.Log(string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("building sqscope: %v", binErr)
	}
	return binPath
}

// A session started on the workload feeds its analyzer and its recording
// the same events: the live counts equal the workload's own, and the
// recording read back rebuilds the same snapshot.
func TestSessionRecordsWhatItAnalyzes(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := t.TempDir()
	truthFile, recFile := filepath.Join(dir, "truth.json"), filepath.Join(dir, "run.sqscope")
	var childOut, warnings bytes.Buffer
	s, err := Start(Config{
		Argv:     []string{bin, "workload", "--qps", "2", "-s", "64", "-I", "64", "-Q", "16", "-t", "128", "-n", "5000", "--json-out", truthFile},
		Target:   "workload under test",
		ChildOut: &childOut, Warnings: &warnings, RingBytes: 8 << 20,
		RecordTo: recFile, Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Started() || s.PID() <= 0 || s.Target() != "workload under test" || s.Mode() != ModeEvents {
		t.Fatalf("session: started %v pid %d target %q mode %q", s.Started(), s.PID(), s.Target(), s.Mode())
	}
	rec := s.Recorder()
	ctx, cancel := context.WithTimeout(context.Background(), bpftest.Timeout(t, time.Minute))
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("run: %v (target said %q)", err, childOut.String())
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	live := analyzertest.Snapshot(t, s.Analyzer())
	if live.Lost != 0 {
		t.Fatalf("%d events lost", live.Lost)
	}

	b, err := os.ReadFile(truthFile)
	if err != nil {
		t.Fatal(err)
	}
	var truth []struct {
		QPNum uint32 `json:"qp_num"`
		WRs   uint64 `json:"wrs"`
	}
	if err := json.Unmarshal(b, &truth); err != nil {
		t.Fatal(err)
	}
	if len(truth) != 2 || len(live.QPs) != 2 {
		t.Fatalf("%d QPs in the truth, %d traced", len(truth), len(live.QPs))
	}
	for _, want := range truth {
		found := false
		for _, q := range live.QPs {
			if q.QPNum == want.QPNum {
				found = true
				if q.Counters.WRs != want.WRs || want.WRs != 5000 {
					t.Errorf("QP %#x: traced %d WRs, the workload posted %d", want.QPNum, q.Counters.WRs, want.WRs)
				}
			}
		}
		if !found {
			t.Errorf("QP %#x not traced", want.QPNum)
		}
	}

	r, err := OpenRecording(recFile)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if fi := r.Info(); fi.Target != "workload under test" || fi.TargetPID != uint32(s.PID()) || fi.ProbeMode != ModeEvents || fi.Version != "test" {
		t.Errorf("recording header: %+v", fi)
	}
	an := analyzer.New(analyzer.Options{})
	res, err := ReadAll(ctx, r, an.Ingest)
	if err != nil || res.Truncated != nil || res.Corrupt != nil || res.Events != rec.Events() {
		t.Fatalf("read back %d of %d events: %v %+v", res.Events, rec.Events(), err, res)
	}
	back := analyzertest.Snapshot(t, an)
	for i := range live.QPs {
		if live.QPs[i].Counters != back.QPs[i].Counters {
			t.Errorf("QP %#x: live %+v, from the recording %+v", live.QPs[i].QPNum, live.QPs[i].Counters, back.QPs[i].Counters)
		}
	}
}

// The text header says what a report could not read: a cut, and records
// of kinds a newer sqscope wrote.
func TestTextHeaderSaysWhatWasNotRead(t *testing.T) {
	rec := RecordingInfo{File: "r.sqscope", Target: "app", TargetPID: 7, Complete: true}
	if h := rec.TextHeader(); strings.Contains(h, "INCOMPLETE") || strings.Contains(h, "skipped") {
		t.Errorf("whole recording: %q", h)
	}
	rec.Complete, rec.SkippedRecords = false, 3
	h := rec.TextHeader()
	if !strings.Contains(h, "INCOMPLETE") || !strings.Contains(h, "3 records of kinds this sqscope does not know were skipped") {
		t.Errorf("header %q", h)
	}
	live := RecordingInfo{Target: "app", TargetPID: 7, ProbeMode: ModeEvents, Complete: true}
	if h := live.TextHeader(); h != "live trace: app (pid 7) probes events" {
		t.Errorf("a live session's header %q", h)
	}
}

// A report says the format version of the file it read, an older one's
// too, and of a cut one what the cut lost.
func TestDescribeSaysTheFileVersion(t *testing.T) {
	newer := filepath.Join(t.TempDir(), "new.sqscope")
	w, err := trace.Create(newer, trace.FileInfo{Target: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"../trace/testdata/v1-all-kinds.sqscope": 1, newer: trace.FormatVersion} {
		r, err := OpenRecording(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ReadAll(context.Background(), r, func(trace.Event) {})
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if rec := Describe(path, r, &res); rec.FormatVersion != want || !rec.Complete {
			t.Errorf("%s: format version %d, complete %v; want %d, complete", path, rec.FormatVersion, rec.Complete, want)
		}
	}
	// A block cut short: its header says how many records went with it.
	w, err = trace.Create(newer, trace.FileInfo{Target: "app"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := w.Write(&trace.Lost{Header: trace.Header{TimeNS: uint64(100 + i)}, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(newer)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newer, data[:len(data)-30], 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRecording(newer)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := ReadAll(context.Background(), r, func(trace.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	if rec := Describe(newer, r, &res); rec.Complete || rec.CutRecords != 3 || res.Events != 0 ||
		!strings.Contains(res.Warning(newer), "the block cut short held 3 records, lost") {
		t.Errorf("cut in its block: %+v, %d events, warning %q", rec, res.Events, res.Warning(newer))
	}
}

// A recording goes to its file every so often while it is written, not
// only as blocks fill: a sqscope killed before its end leaves a file that
// reads up to the last flush.
func TestRecorderFlushesWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.sqscope")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := trace.NewWriter(f, trace.FileInfo{Target: "app"})
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{path: path, w: w, dst: f}
	r.startFlushing(10 * time.Millisecond)
	const n = 100
	for i := range n {
		r.write(&trace.Lost{Header: trace.Header{TimeNS: uint64(1000 + i), PID: 7}, Count: 1})
	}
	read := func() (int, error) {
		rd, err := trace.Open(path)
		if err != nil {
			return 0, err
		}
		defer rd.Close()
		for k := 0; ; k++ {
			if _, err := rd.Next(); err != nil {
				return k, err
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		k, err := read()
		var te *trace.TruncatedError
		if k == n && errors.As(err, &te) && te.Leftover == 0 {
			break // all there, the end not yet
		}
		if time.Now().After(deadline) {
			t.Fatalf("before Close, %d events of %d read, then %v", k, n, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if k, err := read(); k != n || err != io.EOF {
		t.Fatalf("after Close: %d events, then %v; want %d, io.EOF", k, err, n)
	}
}
