package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/advise"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// report --html on a committed recording: the page is written (a new
// file 0600, or standard output when it is not a terminal), and the
// output rules hold.
func TestReportHTML(t *testing.T) {
	rec := filepath.Join("testdata", "faults", "lazy-poll.sqscope")
	dir := t.TempDir()
	out := filepath.Join(dir, "run.html")
	_, stderr, code, err := sqscope("report", "--html", "-o", out, rec)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(out)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("new page has mode %v, want 0600", st.Mode().Perm())
	}
	for _, want := range []string{"<!DOCTYPE html>", "sq_overflow_cq_not_polled", `id="sqscope-data"`, "no peak is lost"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if !strings.Contains(stderr, "wrote "+out) {
		t.Errorf("stderr %q does not say what was written", stderr)
	}

	stdout, _, code, _ := sqscope("report", "--html", rec)
	if code != 0 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") {
		t.Errorf("-o - to a pipe: exit %d, %q...", code, stdout[:min(len(stdout), 40)])
	}

	recCopy := filepath.Join(dir, "copy.sqscope")
	orig, _ := os.ReadFile(rec)
	if err := os.WriteFile(recCopy, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"over a recording", []string{"report", "--html", "-o", recCopy, rec}, 1, "existing recording"},
		{"over its input", []string{"report", "--html", "-o", rec, rec}, 1, "also an input"},
		{"html and json", []string{"report", "--html", "--json", rec}, 2, "without --json"},
		{"-o without --html", []string{"report", "-o", out, rec}, 2, "-o and --html go together"},
		{"no such recording", []string{"report", "--html", "-o", filepath.Join(dir, "x.html"), filepath.Join(dir, "none.sqscope")}, 1, "none.sqscope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, code, err := sqscope(tc.args...)
			if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("exit %d, error %v; want exit %d, one line with %q", code, err, tc.code, tc.msg)
			}
		})
	}
	if b, _ := os.ReadFile(recCopy); string(b) != string(orig) {
		t.Error("the recording -o named was changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "x.html")); err == nil {
		t.Error("a page was left for a recording that could not be read")
	}
}

// report --html holds what sqscope advise says of the QPs the page
// plots first, in its words: each QP's text as advise prints it, the
// model and what a replay cannot know; of a recording advise cannot
// replay, its reason; of one with more QPs than it advises on, which.
func TestReportHTMLAdvice(t *testing.T) {
	dir := t.TempDir()
	h := trace.Header{TimeNS: 10, PID: 7, TID: 7}
	create := &trace.QPCreate{Header: h, QP: 1, QPNum: 0x10, Type: trace.QPTypeRC, SendCQ: 2, RecvCQ: 2,
		Caps: trace.Caps{MaxSendWR: 128, MaxInlineData: 60, MaxSendSGE: 1}}
	post := &trace.Post{Header: h, QP: 1, QPNum: 0x10, Accepted: 1, WRs: []trace.WR{{Opcode: ibv.WRSend, NumSGE: 1, Bytes: 64}}}
	counters := filepath.Join(dir, "counters.sqscope")
	writeRecording(t, counters, []trace.Event{create, &trace.QPCounters{Header: h, QP: 1, QPNum: 0x10, PostCalls: 1, WRs: 1, Doorbells: 1}}, 1)
	rxeCreate := *create
	rxeCreate.Lib = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
	rxe := filepath.Join(dir, "rxe.sqscope")
	writeRecording(t, rxe, []trace.Event{&rxeCreate, post}, 1)
	e := newEvents() // six QPs, 0x13 the busiest: advised on, four of them
	for q := uint32(0x10); q < 0x16; q++ {
		e.create(q, 64)
	}
	for q := uint32(0x10); q < 0x16; q++ {
		for range 1 + int(q-0x10)%4 {
			e.post(q, 4, 0, 4, 0, 4)
			e.poll(q, 0, e.ids[q]-1)
		}
	}
	six := filepath.Join(dir, "six.sqscope")
	writeRecording(t, six, e.evs, 10)

	lazy := filepath.Join("testdata", "faults", "lazy-poll.sqscope")
	adv, _, code, err := sqscope("advise", lazy)
	if code != 0 {
		t.Fatalf("advise: exit %d: %v", code, err)
	}
	qpText, rest, _ := strings.Cut(adv, "\n\n")
	for _, tc := range []struct {
		name, rec string
		want      []string
		no        []string
	}{
		{"advised", lazy, []string{qpText, rest, "sqscope advise replays each QP's recorded WR stream"}, []string{"No advice", "plotted first"}},
		{"counters mode", counters, []string{"No advice: QP 0x10 (pid 7): " + advise.ErrNoDetail.Error()}, []string{"WRs recorded"}},
		{"a provider without the model", rxe, []string{"No advice: QP 0x10 (pid 7) runs on provider rxe: " + advise.ErrNotMlx5.Error()}, []string{"WRs recorded"}},
		{"more QPs than advised on", six, []string{"Here the 4 QP(s) plotted first of the 6", "QP 0x13 (pid 7, RC): 16 WRs recorded"}, []string{"No advice", "QP 0x10 (pid 7, RC)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, p := htmlReport(t, tc.rec)
			streamtest.CheckText(t, "the page", p.Text, tc.want, tc.no)
		})
	}
}
