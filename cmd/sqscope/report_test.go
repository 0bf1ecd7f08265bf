package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// exitCode is the status main exits with for err.
func exitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *cli.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// sqscope runs the command line in process.
func sqscope(args ...string) (stdout, stderr string, code int, err error) {
	var out, errb bytes.Buffer
	err = run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), exitCode(err), err
}

// events builds a stream for process 7: QP 0x10 (depth 64) posts batches
// of 4 inline WRs and signals every 8th; QP 0x11 (depth 4) never signals
// and overflows.
type events struct {
	t   uint64
	evs []trace.Event
	ids map[uint32]uint64
}

func newEvents() *events { return &events{t: 1_000_000, ids: map[uint32]uint64{}} }

func (e *events) hdr() trace.Header {
	e.t += 1000
	return trace.Header{TimeNS: e.t, PID: 7, TID: 8}
}

func (e *events) create(qpn, depth uint32) {
	e.evs = append(e.evs, &trace.QPCreate{Header: e.hdr(), QP: 0x1000 + uint64(qpn), QPNum: qpn, Type: trace.QPTypeRC,
		SendCQ: 0x2000 + uint64(qpn), Caps: trace.Caps{MaxSendWR: depth, MaxSendSGE: 1, MaxInlineData: 124}, Via: "sqsim_create_qp"})
}

func (e *events) post(qpn uint32, n int, flags uint32, sigEvery uint64, ret int32, accepted int) {
	h := e.hdr()
	p := &trace.Post{Header: h, QP: 0x1000 + uint64(qpn), QPNum: qpn, Ret: ret, Accepted: uint32(accepted), EntryNS: h.TimeNS - 250}
	for range n {
		id := e.ids[qpn]
		e.ids[qpn]++
		f := flags
		if sigEvery > 0 && (id+1)%sigEvery == 0 {
			f |= ibv.SendSignaled
		}
		p.WRs = append(p.WRs, trace.WR{ID: id, Opcode: ibv.WRSend, Flags: f, NumSGE: 1, Bytes: 64})
	}
	e.evs = append(e.evs, p)
}

func (e *events) poll(qpn uint32, status uint8, ids ...uint64) {
	h := e.hdr()
	p := &trace.Poll{Header: h, CQ: 0x2000 + uint64(qpn), Max: 16, Ret: int32(len(ids)), EntryNS: h.TimeNS - 100}
	for _, id := range ids {
		p.WCs = append(p.WCs, trace.WC{ID: id, Status: status, QPNum: qpn})
	}
	e.evs = append(e.evs, p)
}

// sample is the recording most tests use: 8 posts of 4 WRs on QP 0x10 with
// a poll after every other one, then 4 single posts on QP 0x11 and an
// ENOMEM.
func sample() []trace.Event {
	e := newEvents()
	e.create(0x10, 64)
	e.create(0x11, 4)
	for i := range 8 {
		e.post(0x10, 4, ibv.SendInline, 8, 0, 4)
		if i%2 == 1 {
			e.poll(0x10, 0, e.ids[0x10]-1)
		}
	}
	for range 4 {
		e.post(0x11, 1, 0, 0, 0, 1)
	}
	e.post(0x11, 1, 0, 0, ibv.ENOMEM, 0)
	e.ids[0x11]--
	return e.evs
}

// writeRecording writes evs to a new recording, flushing a block every
// flushEvery events, and returns the file size after each flush (the first
// is the size of the file header).
func writeRecording(t *testing.T, path string, evs []trace.Event, flushEvery int) []int64 {
	t.Helper()
	w := createRecording(t, path)
	size := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	sizes := []int64{size()}
	for i, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
		if (i+1)%flushEvery == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, size())
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return sizes
}

// createRecording creates a recording at path, of a target "app" (pid 7).
func createRecording(t *testing.T, path string) *trace.Writer {
	t.Helper()
	w, err := trace.Create(path, trace.FileInfo{Hostname: "host", Kernel: "6.8.0", Version: "test",
		StartWall: time.Unix(1700000000, 0), Target: "app", TargetPID: 7, ProbeMode: "symbol"})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// reportJSON runs report --json and decodes the parts the tests look at.
type reportOut struct {
	Recording struct {
		Complete    bool   `json:"complete"`
		TruncatedAt *int64 `json:"truncated_at"`
		Target      string `json:"target"`
	} `json:"recording"`
	Events uint64 `json:"events"`
	QPs    []struct {
		QPNum     uint32 `json:"qp_num"`
		WRs       uint64 `json:"wrs"`
		Doorbells uint64 `json:"doorbells"`
		SQFull    uint64 `json:"enomem_sq_full"`
		Peak      uint64 `json:"peak_outstanding"`
		CQEs      uint64 `json:"cqes_polled"`
	} `json:"qps"`
	Total struct {
		WRs uint64 `json:"wrs"`
	} `json:"total"`
	Diagnoses []struct {
		Kind string `json:"kind"`
	} `json:"diagnoses"`
}

func reportJSON(t *testing.T, path string) (reportOut, string, int) {
	t.Helper()
	out, errs, code, err := sqscope("report", path, "--json")
	var r reportOut
	if code == 0 {
		if jerr := decodeReport(t, []byte(out), &r); jerr != nil {
			t.Fatalf("report --json: %v\n%s", jerr, out)
		}
	}
	if err != nil {
		errs += "sqscope: " + err.Error() + "\n"
	}
	return r, errs, code
}

func TestReportComplete(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.sqscope")
	evs := sample()
	writeRecording(t, path, evs, 1000)
	r, errs, code := reportJSON(t, path)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !r.Recording.Complete || r.Recording.TruncatedAt != nil || r.Recording.Target != "app" || r.Events != uint64(len(evs)) {
		t.Fatalf("recording %+v, %d events; want complete, target app, %d events", r.Recording, r.Events, len(evs))
	}
	if len(r.QPs) != 2 || r.QPs[0].WRs != 32 || r.QPs[0].Doorbells != 8 || r.QPs[0].CQEs != 4 ||
		r.QPs[1].WRs != 4 || r.QPs[1].SQFull != 1 || r.QPs[1].Peak != 4 {
		t.Fatalf("QPs %+v", r.QPs)
	}
	kinds := fmt.Sprint(r.Diagnoses)
	// a queue of 4 is too small for a prediction before it fails
	if kinds != "[{sq_overflow_never_signaled}]" {
		t.Fatalf("diagnoses %s", kinds)
	}

	out, errs, code, _ := sqscope("report", path)
	for _, want := range []string{
		"recording " + path + ": app (pid 7) on host kernel 6.8.0 started 2023-11-14T22:13:20Z probes symbol sqscope test\n",
		"sqscope: 19 events over 0.000 s, 2 QP(s), 0 lost events\n",
		"QP 0x11 (qpn 17, pid 7, RC, found by its create): max_send_wr 4",
		"  ERROR sq_overflow_never_signaled: QP 0x11 (pid 7) at +0.000018000 s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if code != 0 || errs != "" {
		t.Errorf("text: exit %d, stderr %q", code, errs)
	}
}

// A recording cut anywhere reports every event before the cut, warns once
// on stderr where the file stops, and exits 0; cut inside the file header
// there is nothing to report and the exit status is 1.
func TestReportTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.sqscope")
	evs := sample()
	sizes := writeRecording(t, path, evs, 1) // one event per block
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// WRs the first k events posted successfully
	wrsBefore := func(k int) uint64 {
		var n uint64
		for _, ev := range evs[:k] {
			if p, ok := ev.(*trace.Post); ok {
				n += uint64(p.Accepted)
			}
		}
		return n
	}
	type cut struct {
		name   string
		offset int64
		events int   // events reported
		stop   int64 // where the warning says the last whole record ends
	}
	var cuts []cut
	for _, k := range []int{0, 1, 2, 7, 13, len(evs) - 1, len(evs)} {
		cuts = append(cuts, cut{fmt.Sprintf("between blocks after %d events", k), sizes[k], k, sizes[k]})
		if k < len(evs) {
			cuts = append(cuts,
				cut{fmt.Sprintf("inside block header after %d events", k), sizes[k] + 5, k, sizes[k]},
				cut{fmt.Sprintf("last byte of event %d missing", k+1), sizes[k+1] - 1, k, sizes[k]})
		}
	}
	cuts = append(cuts, cut{"inside the end block", int64(len(full)) - 3, len(evs), sizes[len(evs)]})
	for _, c := range cuts {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, "cut.sqscope")
			if err := os.WriteFile(p, full[:c.offset], 0o600); err != nil {
				t.Fatal(err)
			}
			r, errs, code := reportJSON(t, p)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if r.Events != uint64(c.events) || r.Total.WRs != wrsBefore(c.events) || r.Recording.Complete {
				t.Errorf("events %d, WRs %d, complete %v; want %d, %d, false", r.Events, r.Total.WRs, r.Recording.Complete, c.events, wrsBefore(c.events))
			}
			if r.Recording.TruncatedAt == nil || *r.Recording.TruncatedAt != c.stop {
				t.Errorf("truncated_at %v, want %d", r.Recording.TruncatedAt, c.stop)
			}
			want := fmt.Sprintf("sqscope: warning: %s stops early: recording truncated: last whole record ends at byte %d, %d bytes left over", p, c.stop, c.offset-c.stop)
			if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, want) || !strings.HasSuffix(errs, fmt.Sprintf("; used the %d events before the cut\n", c.events)) {
				t.Errorf("stderr %q, want one line starting %q", errs, want)
			}
		})
	}
	for _, off := range []int64{0, 5, 9, sizes[0] - 1} {
		t.Run(fmt.Sprintf("inside the file header at byte %d", off), func(t *testing.T) {
			p := filepath.Join(dir, "cut.sqscope")
			if err := os.WriteFile(p, full[:off], 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, code, err := sqscope("report", p)
			if code != 1 || err == nil || !strings.Contains(err.Error(), "recording truncated inside its file header") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("exit %d, error %v; want 1 and a one-line header error", code, err)
			}
		})
	}
}

// Every cut offset of a file with several records per block: the report
// holds exactly the events the reader returns, never fewer as the cut moves
// on, and never fails past the file header.
func TestReportEveryCut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.sqscope")
	sizes := writeRecording(t, path, sample(), 4)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "cut.sqscope")
	prev := uint64(0)
	for off := sizes[0]; off <= int64(len(full)); off++ {
		if err := os.WriteFile(p, full[:off], 0o600); err != nil {
			t.Fatal(err)
		}
		r, errs, code := reportJSON(t, p)
		if code != 0 {
			t.Fatalf("cut at %d: exit %d: %s", off, code, errs)
		}
		if want := readerEvents(t, p); r.Events != want || r.Events < prev {
			t.Fatalf("cut at %d: %d events, reader returns %d, previous cut %d", off, r.Events, want, prev)
		}
		if complete := off == int64(len(full)); r.Recording.Complete != complete || (errs == "") != complete {
			t.Fatalf("cut at %d: complete %v, stderr %q", off, r.Recording.Complete, errs)
		}
		prev = r.Events
	}
	if prev != uint64(len(sample())) {
		t.Fatalf("whole file: %d events, want %d", prev, len(sample()))
	}
}

func readerEvents(t *testing.T, path string) uint64 {
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n uint64
	for {
		if _, err := r.Next(); err != nil {
			return n
		}
		n++
	}
}

func TestReportBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sqscope")
	writeRecording(t, good, sample(), 5)
	full, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	foreign := write("foreign.txt", []byte("hello, this is not a recording\n"))
	v2 := append([]byte(nil), full...)
	binary.LittleEndian.PutUint16(v2[8:], 99)
	version := write("v99.sqscope", v2)
	corrupt := append([]byte(nil), full...)
	corrupt[len(corrupt)-40] ^= 0xff // in the last block of records
	damaged := write("damaged.sqscope", corrupt)
	early := append([]byte(nil), full...)
	early[130] ^= 0xff // in the first block
	damagedEarly := write("damaged-early.sqscope", early)
	cut := write("cut.sqscope", full[:140])

	tests := []struct {
		name string
		args []string
		code int
		err  string // in the error
		out  string // in stdout
	}{
		{"foreign file", []string{"report", foreign}, 1, "not an sqscope recording (bad magic)", ""},
		{"unknown version", []string{"report", version}, 1, "unsupported recording version 99 (this sqscope reads versions 1 to 2)", ""},
		{"missing file", []string{"report", filepath.Join(dir, "nope")}, 1, "no such file or directory", ""},
		{"directory", []string{"report", dir}, 1, "is a directory", ""},
		{"damaged block reports what came before", []string{"report", damaged}, 1, "block checksum mismatch (used the 15 events before it)", "sqscope: 15 events"},
		{"no file", []string{"report"}, 2, "report: no recording given", ""},
		{"two files", []string{"report", good, good}, 2, "report: one recording at a time, got 2", ""},
		{"unknown flag", []string{"report", good, "--bogus"}, 2, "report: unknown flag: --bogus", ""},
		{"flag after --", []string{"report", "--", "--json"}, 1, "--json: no such file", ""},
		{"advise says a damaged recording is damaged", []string{"advise", damagedEarly}, 1, "advise: " + damagedEarly + ": corrupt recording at byte", ""},
		{"advise says where a cut recording stops", []string{"advise", cut}, 1, "advise: " + cut + " stops early: recording truncated", ""},
		{"advise, damaged after its WRs", []string{"advise", damaged}, 1, "block checksum mismatch (used the 15 events before it)", ""},
		{"export foreign file", []string{"export", foreign, "-o", filepath.Join(dir, "x.json")}, 1, "not an sqscope recording", ""},
		{"export unknown format", []string{"export", "--format", "svg", good}, 2, `export: unknown format "svg" (want perfetto or chrome)`, ""},
		{"export filter selects nothing", []string{"export", "--qp", "0x99", good, "-o", filepath.Join(dir, "x.json")}, 1,
			"export: the filters select nothing: --qp 0x99 selects none of the 19 events (QPs 0x10 (pid 7), 0x11 (pid 7); 1 process(es)", ""},
		{"export process filter selects nothing", []string{"export", "--format", "perfetto", "--pid", "8", good, "-o", filepath.Join(dir, "x.json")}, 1,
			"export: the filters select nothing: --pid 8 selects none", ""},
		{"export bad --from", []string{"export", "--from", "yesterday", good}, 2, `invalid value "yesterday" for --from`, ""},
		{"export bad --qp", []string{"export", "--qp", "1c0", good}, 2, `invalid value "1c0" for --qp`, ""},
		{"export --to before --from", []string{"export", "--from", "2", "--to", "1", good, "-o", filepath.Join(dir, "x.json")}, 2, "--to 1 is before --from 2", ""},
		{"export --to before --from, times of day", []string{"export", "--from", "10:00:05", "--to", "10:00:01", good, "-o", filepath.Join(dir, "x.json")}, 2, "--to 10:00:01 is before --from 10:00:05", ""},
		{"export wall clock without a start time", []string{"export", "--from", "10:00:00", good, "-o", filepath.Join(dir, "x.json")}, 1,
			"the recording does not say when it started on the wall clock", ""},
		{"export no file", []string{"export", "-o", "x.json"}, 2, "export: no recording given", ""},
		{"export empty output name", []string{"export", good, "-o", ""}, 2, "export: -o needs a file name", ""},
		{"export into a missing directory", []string{"export", good, "-o", filepath.Join(dir, "no", "x.json")}, 1, "export: creating output", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, code, err := sqscope(tc.args...)
			if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("exit %d, error %v; want exit %d and one line with %q", code, err, tc.code, tc.err)
			}
			if !strings.Contains(out, tc.out) {
				t.Fatalf("stdout lacks %q:\n%s", tc.out, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "x.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed export left its output behind: %v", err)
	}
}

// Help goes to stdout, as users page it, for every command, by --help and
// by help COMMAND; the version by version, --version and -V.
func TestReportHelp(t *testing.T) {
	for _, cmd := range commands() {
		c := struct{ name string }{cmd.Name()}
		if c.name == "version" {
			continue
		}
		for _, args := range [][]string{{c.name, "--help"}, {"help", c.name}} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var out, errb bytes.Buffer
				err := run(context.Background(), args, &out, &errb)
				if exitCode(err) != 0 || !strings.HasPrefix(out.String(), "usage: sqscope "+c.name) || errb.Len() != 0 {
					t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", exitCode(err), out.String(), errb.String())
				}
				if c.name == "report" || c.name == "export" {
					if !strings.Contains(out.String(), "\nEXAMPLES\n  sqscope "+c.name+" ") {
						t.Fatalf("no examples:\n%s", out.String())
					}
				}
			})
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-V"}} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err != nil || out.String() != "sqscope "+version+"\n" {
			t.Errorf("%q: %q, %v", args, out.String(), err)
		}
	}
}

// report --fail-on exits with status 3 on a diagnosis of its severity or
// worse, as trace --fail-on does, the report still printed; a severity it
// does not know is a usage error.
func TestReportFailOn(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.sqscope")
	writeRecording(t, good, sample(), 5) // QP 0x11 never signals and overflows
	out, _, code, err := sqscope("report", "--fail-on", "error", good)
	if code != 3 || err == nil || !strings.Contains(err.Error(), "--fail-on error: error sq_overflow") || !strings.Contains(out, "QP 0x11") {
		t.Errorf("--fail-on error: exit %d, %v; want 3 naming the overflow, after the report:\n%s", code, err, out)
	}
	if _, _, code, err := sqscope("report", "--fail-on", "error", "--json", good); code != 3 {
		t.Errorf("--fail-on error --json: exit %d, %v; want 3", code, err)
	}
	if _, _, code, err := sqscope("report", "--fail-on", "sometimes", good); code != 2 || err == nil || !strings.Contains(err.Error(), `--fail-on "sometimes"`) {
		t.Errorf("--fail-on sometimes: exit %d, %v; want 2", code, err)
	}
}

// replay without a terminal prints the recording's report, with replay's
// own flags and replay's name on its errors.
func TestReplayWithoutTerminal(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.sqscope")
	writeRecording(t, good, sample(), 5)
	out, _, code, err := sqscope("replay", "--speed", "2", "-i", "500ms", good)
	if code != 0 || !strings.Contains(out, "QP 0x11") {
		t.Errorf("replay --speed 2 -i 500ms: exit %d, %v; want the report:\n%s", code, err, out)
	}
	if _, _, code, err := sqscope("replay", filepath.Join(t.TempDir(), "none.sqscope")); code != 1 || err == nil || !strings.HasPrefix(err.Error(), "replay: ") {
		t.Errorf("replay of no file: exit %d, %v; want 1 and an error of replay's", code, err)
	}
}
