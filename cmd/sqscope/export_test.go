package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sqscope/sqscope/cmd/internal/cli/ptytest"
	"github.com/sqscope/sqscope/export/perfetto"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

type traceFile struct {
	DisplayTimeUnit string            `json:"displayTimeUnit"`
	OtherData       map[string]string `json:"otherData"`
	TraceEvents     []struct {
		Name string         `json:"name"`
		Cat  string         `json:"cat"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  *float64       `json:"dur"`
		Pid  uint32         `json:"pid"`
		Tid  uint32         `json:"tid"`
		S    string         `json:"s"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

func exportFile(t *testing.T, rec, out string) (traceFile, string) {
	t.Helper()
	_, errs, code, err := sqscope("export", "--format", "chrome", rec, "-o", out)
	if code != 0 {
		t.Fatalf("export: exit %d: %v", code, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var tf traceFile
	if err := json.Unmarshal(b, &tf); err != nil {
		t.Fatalf("export output is not JSON: %v\n%s", err, b)
	}
	return tf, errs
}

// exportSample adds to sample() what only the export draws: an empty poll
// (no slice), a poll with an error CQE, and lost events.
func exportSample() []trace.Event {
	evs := sample()
	e := &events{t: 2_000_000, ids: map[uint32]uint64{}}
	e.evs = append(e.evs, &trace.Poll{Header: e.hdr(), CQ: 0x2010, Max: 16, Ret: 0, EntryNS: e.t - 50})
	e.poll(0x11, 5, 0) // error CQE: flushes WR 0 of QP 0x11
	e.evs = append(e.evs, &trace.Lost{Header: e.hdr(), Count: 3})
	return append(evs, e.evs...)
}

func TestExportChrome(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.sqscope")
	writeRecording(t, rec, exportSample(), 3)
	out := filepath.Join(dir, "run.json")
	tf, errs := exportFile(t, rec, out)

	count := map[string]int{}
	var occ11 []float64
	var diags []string
	for _, ev := range tf.TraceEvents {
		count[ev.Ph]++
		switch {
		case ev.Ph == "C" && ev.Name == "SQ occupancy QP 0x11":
			occ11 = append(occ11, ev.Args["outstanding"].(float64))
		case ev.Ph == "i" && ev.Cat == "diagnosis":
			diags = append(diags, ev.Name)
		}
		if ev.Ph != "M" && (ev.Pid != 7 || ev.Tid != 8 && ev.Cat != "diagnosis" && ev.Ph != "C") {
			t.Errorf("%s %q: pid %d tid %d, want 7 and 8", ev.Ph, ev.Name, ev.Pid, ev.Tid)
		}
	}
	// counters: 2 creates, 8+4 posts that took WRs, 4 polls of 0x10 and the
	// error poll of 0x11, and the failures/s of 0x11; slices: 12 posts, 5
	// non-empty polls; the ENOMEM (a failure with a duration: one folded
	// slice of its own, b and e); instants: the error CQE, the lost
	// events, the diagnosis (a queue of 4 is too small for a prediction
	// before it fails); one process name
	want := map[string]int{"C": 20, "X": 17, "b": 1, "e": 1, "i": 3, "M": 1}
	for ph, n := range want {
		if count[ph] != n {
			t.Errorf("%d %q events, want %d (all: %v)", count[ph], ph, n, count)
		}
	}
	if len(count) != len(want) {
		t.Errorf("phases %v, want %v", count, want)
	}
	if !slices.Equal(occ11, []float64{0, 1, 2, 3, 4, 3}) {
		t.Errorf("QP 0x11 occupancy %v, want 0 1 2 3 4 3 (the error CQE retires WR 0 only)", occ11)
	}
	if !slices.Equal(diags, []string{"diagnosis: sq_overflow_never_signaled"}) {
		t.Errorf("diagnosis instants %q", diags)
	}
	if tf.DisplayTimeUnit != "ns" || tf.OtherData["target"] != "app" || tf.OtherData["clock"] != "CLOCK_MONOTONIC" {
		t.Errorf("header: %q %v", tf.DisplayTimeUnit, tf.OtherData)
	}
	if !strings.HasSuffix(errs, "20 counter samples, 18 slices, 3 instants; 1 failed posts folded into 1) from 22 recorded events\n") {
		t.Errorf("stderr %q", errs)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("output mode %v (%v), want 0600", st.Mode(), err)
	}
}

func TestExportSlices(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.sqscope")
	writeRecording(t, rec, sample(), 100)
	tf, _ := exportFile(t, rec, filepath.Join(dir, "run.json"))
	tests := []struct {
		name string
		idx  int // among the X events
		ts   float64
		dur  float64
		args map[string]any
	}{
		// the first post returns at 1003000 ns after 250 ns
		{"first post", 0, 1002.750, 0.250, map[string]any{"qp_num": "0x10", "n": 4.0}},
		{"first poll", 2, 1004.900, 0.100, map[string]any{"cq": "0x2010", "ret": 1.0, "max": 16.0}},
		{"refused post", 16, 1018.750, 0.250, map[string]any{"qp_num": "0x11", "count": 1.0, "wrs_refused": 1.0, "ret": 12.0, "cause": "SQ full"}},
	}
	var xs []int
	for i, ev := range tf.TraceEvents {
		if ev.Ph == "X" || ev.Ph == "b" {
			xs = append(xs, i)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := tf.TraceEvents[xs[tc.idx]]
			if ev.Ph == "b" { // a folded failure: its end is the matching e
				end := tf.TraceEvents[xs[tc.idx]+1]
				d := end.Ts - ev.Ts
				ev.Dur = &d
			}
			if ev.Ts != tc.ts || ev.Dur == nil || math.Abs(*ev.Dur-tc.dur) > 1e-9 {
				t.Errorf("ts %v dur %v, want %v %v", ev.Ts, ev.Dur, tc.ts, tc.dur)
			}
			for k, v := range tc.args {
				if ev.Args[k] != v {
					t.Errorf("args %v, want %s = %v", ev.Args, k, v)
				}
			}
		})
	}
}

// A truncated recording still exports valid JSON of the events before the
// cut, with the same warning as report.
func TestExportTruncated(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.sqscope")
	sizes := writeRecording(t, rec, sample(), 1)
	full, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.sqscope")
	if err := os.WriteFile(cut, full[:sizes[6]+7], 0o600); err != nil {
		t.Fatal(err)
	}
	tf, errs := exportFile(t, cut, filepath.Join(dir, "cut.json"))
	// 6 events: 2 creates, 3 posts, 1 poll
	count := map[string]int{}
	for _, ev := range tf.TraceEvents {
		count[ev.Ph]++
	}
	if count["C"] != 6 || count["X"] != 4 || count["i"] != 0 {
		t.Errorf("events by phase %v, want 6 C, 4 X", count)
	}
	if !strings.Contains(errs, "warning: "+cut+" stops early") || !strings.Contains(errs, "used the 6 events before the cut") {
		t.Errorf("stderr %q", errs)
	}
}

// Recorded with --call-times, posts and polls are drawn as the interval
// from entry to return; without it, they have no duration and are drawn by
// the occupancy samples they leave, not as zero-length slices.
func TestCallTimesInExport(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	for _, withTimes := range []bool{false, true} {
		t.Run(fmt.Sprint("call-times=", withTimes), func(t *testing.T) {
			dir := t.TempDir()
			rec := filepath.Join(dir, "run.sqscope")
			args := []string{"record", "-o", rec}
			if withTimes {
				args = append(args, "--call-times")
			}
			args = append(args, "--workload", "--", "-s", "64", "-I", "64", "-Q", "4", "-n", "2000", "--sim-deterministic")
			if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("sqscope %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			tf, _ := exportFile(t, rec, filepath.Join(dir, "run.json"))
			var total, timed, samples int
			for _, ev := range tf.TraceEvents {
				if ev.Ph == "C" {
					samples++
				}
				if ev.Ph != "X" {
					continue
				}
				total++
				if ev.Dur != nil && *ev.Dur > 0 {
					timed++
				}
			}
			if samples < 2000 || timed != total || withTimes && total < 2000 || !withTimes && total != 0 {
				t.Errorf("%d occupancy samples, %d of %d slices with a duration; want 2000 samples or more, and every post and poll a timed slice with --call-times, none without", samples, timed, total)
			}
		})
	}
}

// The filters select by QP, process and time, as seconds from the start
// or wall-clock times; what they leave out is not in the file.
func TestExportFilters(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.sqscope")
	w, err := trace.Create(rec, trace.FileInfo{Target: "app", TargetPID: 7, StartWall: time.Unix(1700000000, 0), StartMonoNS: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range exportSample() {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	names := func(tf traceFile) []string {
		var out []string
		for _, ev := range tf.TraceEvents {
			if ev.Ph != "M" {
				out = append(out, fmt.Sprintf("%s %s %.3f", ev.Ph, ev.Name, ev.Ts))
			}
		}
		return out
	}
	export := func(args ...string) traceFile {
		out := filepath.Join(dir, "out.json")
		_, errs, code, err := sqscope(append(append([]string{"export"}, args...), rec, "-o", out)...)
		if code != 0 {
			t.Fatalf("export %v: exit %d: %v %s", args, code, err, errs)
		}
		var tf traceFile
		b, _ := os.ReadFile(out)
		if err := json.Unmarshal(b, &tf); err != nil {
			t.Fatal(err)
		}
		return tf
	}
	qp := export("--qp", "0x11")
	for _, ev := range qp.TraceEvents {
		if q, ok := ev.Args["qp_num"]; ok && q != "0x11" || strings.Contains(ev.Name, "QP 0x10") || ev.Ph == "C" && !strings.Contains(ev.Name, "QP 0x11") || ev.Name == "ibv_poll_cq" && ev.Args["cq"] != "0x2011" {
			t.Errorf("--qp 0x11: %s %q %v", ev.Ph, ev.Name, ev.Args)
		}
	}
	if n := len(names(qp)); n != 16 {
		t.Errorf("--qp 0x11: %d events, want 16: %q", n, names(qp))
	}
	// 8 µs after the start: the events from 1,008,000 ns on
	rel := names(export("--from", "0.000008", "--to", "0.000012"))
	wall := names(export("--from", "2023-11-14T22:13:20.000008Z", "--to", "2023-11-14T22:13:20.000012Z"))
	if strings.Join(rel, "\n") != strings.Join(wall, "\n") || len(rel) == 0 {
		t.Errorf("seconds from the start and wall-clock times differ:\n%q\n%q", rel, wall)
	}
	for _, e := range rel {
		var ph, name string
		var ts float64
		fmt.Sscanf(e[strings.LastIndexByte(e, ' ')+1:], "%f", &ts)
		fmt.Sscan(e, &ph, &name)
		if ts < 1008 || ts > 1012 {
			t.Errorf("--from 0.000008 --to 0.000012: %q outside [1008, 1012] µs", e)
		}
	}
}

// A cut or damaged recording exports a Perfetto file that decodes, with
// what came before the cut.
func TestExportPerfettoCut(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.sqscope")
	sizes := writeRecording(t, rec, sample(), 1)
	full, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte(nil), full...)
	damaged[sizes[10]+14] ^= 0xff // inside the 11th event's block
	for _, tc := range []struct {
		name string
		b    []byte
		code int
		msg  string
	}{
		{"truncated", full[:sizes[6]+7], 0, "stops early"},
		{"damaged", damaged, 1, "block checksum mismatch (used the 10 events before it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join(dir, tc.name+".sqscope")
			out := filepath.Join(dir, tc.name+".pftrace")
			if err := os.WriteFile(in, tc.b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, errs, code, err := sqscope("export", "--format", "perfetto", in, "-o", out)
			if code != tc.code || !strings.Contains(errs+fmt.Sprint(err), tc.msg) {
				t.Fatalf("exit %d, %v, stderr %q; want exit %d and %q", code, err, errs, tc.code, tc.msg)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var tr perfetto.Trace
			if err := proto.Unmarshal(b, &tr); err != nil {
				t.Fatal(err)
			}
			samples := 0
			for _, p := range tr.Packet {
				if p.GetTrackEvent().GetType() == perfetto.TrackEvent_TYPE_COUNTER {
					samples++
				}
			}
			if samples == 0 {
				t.Errorf("no occupancy sample in the export of the events before the cut (%d packets)", len(tr.Packet))
			}
		})
	}
}

// Perfetto's trace and a recording are binary: to a terminal they are
// refused, one line and exit 2, and nothing is written; Chrome's JSON is
// text and goes there.
func TestExportToTerminal(t *testing.T) {
	tty := ptytest.Open(t)
	good := filepath.Join(t.TempDir(), "good.sqscope")
	writeRecording(t, good, sample(), 5)
	for _, c := range []struct {
		format string
		code   int
	}{{"perfetto", 2}, {"chrome", 0}} {
		var errb bytes.Buffer
		err := run(context.Background(), []string{"export", "--format", c.format, good}, tty, &errb)
		if code := exitCode(err); code != c.code {
			t.Errorf("export --format %s to a terminal: exit %d (%v), want %d", c.format, code, err, c.code)
		}
		if c.code == 2 && (err == nil || !strings.Contains(err.Error(), "standard output is a terminal: give -o FILE")) {
			t.Errorf("export --format %s to a terminal: %v, want it to say to give -o FILE", c.format, err)
		}
	}
	// a recording to a terminal (record -o -) is refused the same way,
	// before anything starts
	var errb bytes.Buffer
	err := run(context.Background(), []string{"record", "-o", "-", "--workload", "--", "-n", "10"}, tty, &errb)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "record: standard output is a terminal: give -o FILE") {
		t.Errorf("record -o - to a terminal: %v, want exit 2 saying to give -o FILE", err)
	}
}
