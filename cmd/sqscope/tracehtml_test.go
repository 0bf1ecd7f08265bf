package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/report/pagetest"
)

// trace --html and record --html refuse a page they could not write
// before anything starts: a usage error (exit status 2) of one line,
// nothing created, nothing changed.
func TestTraceHTMLRefused(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	orig, err := os.ReadFile(filepath.Join("testdata", "faults", "lazy-poll.sqscope"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("old.sqscope"), orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(path("old.sqscope"), path("link.html")); err != nil {
		t.Fatal(err)
	}
	workload := []string{"--workload", "--", "-n", "10"}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"trace: the summary on standard output", []string{"trace", "--html", "-"}, "standard output carries the summary"},
		{"trace: the summary's file", []string{"trace", "-o", path("sum.txt"), "--html", path("sum.txt")}, "also an output"},
		{"trace: through a link", []string{"trace", "--html", path("link.html")}, "symbolic link"},
		{"trace: no file name", []string{"trace", "--html="}, "give a file name"},
		{"record: over a recording", []string{"record", "-o", path("new.sqscope"), "--html", path("old.sqscope")}, "existing recording"},
		{"record: the recording being written", []string{"record", "-o", path("new.sqscope"), "--html", path("new.sqscope")}, "also an output"},
		{"record: the recording on standard output", []string{"record", "-o", "-", "--html", "-"}, "standard output carries the recording"},
		{"record: a flight recorder", []string{"record", "--flight", "5s", "--trigger", "enomem", "-o", path("flight"), "--html", path("f.html")}, "flight recorder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, code, err := sqscope(append(tc.args, workload...)...)
			if code != 2 || err == nil || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("exit %d, error %v; want exit 2, one line with %q", code, err, tc.msg)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 2 {
				t.Errorf("%d files in the directory, want the 2 there before", len(entries))
			}
			if b, _ := os.ReadFile(path("old.sqscope")); !bytes.Equal(b, orig) {
				t.Fatal("the recording was changed")
			}
		})
	}
}

// maxOfRuns is the largest value of a page's series ("v" or "v*n",
// comma-separated).
func maxOfRuns(t *testing.T, s string) uint64 {
	t.Helper()
	var top uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.SplitN(f, "*", 2)[0], 10, 32)
		if err != nil {
			t.Fatalf("series %q: %v", s, err)
		}
		top = max(top, v)
	}
	return top
}

// trace --html and record --html on the workload's never-signal fault:
// the page (a new file, 0600) holds the workload's QP with its WRs and
// ENOMEMs, its occupancy up to its depth with every failed post marked,
// and the diagnoses with their fixes; record's is the page report --html
// makes of the recording, byte for byte, its advice included; trace's,
// and record's of a recording sent to standard output, say why they
// have none.
func TestTraceRecordHTML(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := t.TempDir()
	workload := []string{"--workload", "--", "-t", "128", "--fault", "never-signal", "-n", "1000", "--sim-deterministic"}
	rec := filepath.Join(dir, "run.sqscope")
	for _, tc := range []struct {
		name, noAdvice string
		args           []string
	}{
		{"trace", "No advice: advise replays a recording's WR streams, and a trace keeps none", []string{"trace", "--json"}},
		{"record", "", []string{"record", "-o", rec}},
		{"record to stdout", "this one went to standard output", []string{"record", "-o", "-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".html")
			args := append(append(tc.args, "--html", page), workload...)
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("sqscope %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "sqscope: wrote "+page+": 1 QPs") {
				t.Errorf("stderr does not say the page was written:\n%s", stderr.String())
			}
			summary := stdout.Bytes()
			if tc.name != "trace" { // the recording's report
				from := rec
				if tc.name == "record to stdout" {
					from = filepath.Join(dir, "stdout.sqscope")
					if err := os.WriteFile(from, summary, 0o600); err != nil {
						t.Fatal(err)
					}
				}
				out, err := exec.Command(bin, "report", "--json", from).Output()
				if err != nil {
					t.Fatalf("report --json: %v", err)
				}
				summary = out
			}
			var r struct {
				QPs []struct {
					QPNum     uint32 `json:"qp_num"`
					WRs       uint64 `json:"wrs"`
					MaxSendWR uint64 `json:"max_send_wr"`
					ENOMEM    uint64 `json:"enomem"`
				} `json:"qps"`
				Diagnoses []struct{ Kind, Message, Fix string } `json:"diagnoses"`
			}
			if err := decodeReport(t, summary, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.QPs) != 1 || r.QPs[0].WRs == 0 || r.QPs[0].ENOMEM == 0 || len(r.Diagnoses) == 0 {
				t.Fatalf("the run overflowed no QP: %+v", r)
			}
			q := r.QPs[0]

			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			if st, _ := os.Stat(page); st.Mode().Perm() != 0o600 {
				t.Errorf("the new page has mode %v, want 0600", st.Mode().Perm())
			}
			p := pagetest.Parse(t, b)
			var data struct {
				QPs []struct {
					Label  string `json:"label"`
					WRs    uint64 `json:"wrs"`
					ENOMEM uint64 `json:"enomem"`
					Occ    *struct {
						Max string `json:"max"`
					} `json:"occ"`
					Fails [][2]uint64 `json:"fails"`
				} `json:"qps"`
			}
			if err := json.Unmarshal(p.Data, &data); err != nil {
				t.Fatal(err)
			}
			if len(data.QPs) != 1 || len(p.Rows) != 1 {
				t.Fatalf("%d QPs in the page's data, %d rows, want 1", len(data.QPs), len(p.Rows))
			}
			pq := data.QPs[0]
			if !strings.Contains(pq.Label, "QP "+"0x"+strconv.FormatUint(uint64(q.QPNum), 16)) || pq.WRs != q.WRs || pq.ENOMEM != q.ENOMEM {
				t.Errorf("the page's QP %q: %d WRs, %d ENOMEM; the summary's %#x: %d, %d", pq.Label, pq.WRs, pq.ENOMEM, q.QPNum, q.WRs, q.ENOMEM)
			}
			if pq.Occ == nil || maxOfRuns(t, pq.Occ.Max) != q.MaxSendWR {
				t.Errorf("the occupancy series %+v does not reach max_send_wr %d", pq.Occ, q.MaxSendWR)
			}
			var fails uint64
			for _, f := range pq.Fails {
				fails += f[1]
			}
			if fails != q.ENOMEM {
				t.Errorf("%d failed posts marked, the QP has %d ENOMEMs", fails, q.ENOMEM)
			}
			for _, g := range r.Diagnoses {
				for _, want := range []string{g.Kind, g.Message, g.Fix} {
					if !strings.Contains(p.Text, want) {
						t.Errorf("the page lacks %q", want)
					}
				}
			}
			if tc.noAdvice != "" {
				if !strings.Contains(p.Text, tc.noAdvice) {
					t.Errorf("the page does not say why it has no advice")
				}
				return
			}
			if !strings.Contains(p.Text, "WRs recorded") || !strings.Contains(p.Text, "best of ") {
				t.Error("the page holds no advice")
			}
			again := filepath.Join(dir, "report.html")
			if out, err := exec.Command(bin, "report", "--html", "-o", again, rec).CombinedOutput(); err != nil {
				t.Fatalf("report --html: %v\n%s", err, out)
			}
			if b2, _ := os.ReadFile(again); !bytes.Equal(b, b2) {
				t.Error("record --html's page differs from report --html's of the recording")
			}
		})
	}
}
