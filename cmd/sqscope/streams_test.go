package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// trace --json is one JSON document on stdout (the target's own output
// goes to stderr), one per line with -i, and -o writes the summary to a
// file instead.
func TestTraceStreams(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	run := func(args ...string) (string, string) {
		t.Helper()
		code, out, errb := runBin(t, 0, "", args...)
		if code != 0 {
			t.Fatalf("%q: exit status %d\n%s", args, code, errb)
		}
		return out, errb
	}
	type doc struct {
		Events uint64 `json:"events"`
		QPs    []struct {
			WRs uint64 `json:"wrs"`
		} `json:"qps"`
		Interval *struct {
			Seconds float64 `json:"seconds"`
			Events  uint64  `json:"events"`
			Total   struct {
				WRs uint64 `json:"wrs"`
			} `json:"total"`
			QPs []struct {
				WRs  uint64  `json:"wrs"`
				Peak *uint64 `json:"peak_outstanding"`
			} `json:"qps"`
		} `json:"interval"`
	}

	out, errs := run("trace", "--json", "--workload", "--", "-n", "20000")
	var d doc
	if err := decodeReport(t, []byte(out), &d); err != nil || len(d.QPs) != 1 || d.QPs[0].WRs != 20000 {
		t.Fatalf("stdout is not the one JSON summary (%v, %+v):\n%.300s", err, d, out)
	}
	if !strings.Contains(errs, "sqscope workload: device sim") {
		t.Errorf("the target's output is not on stderr:\n%.300s", errs)
	}

	out, _ = run("trace", "--json", "-i", "0.2", "--workload", "--", "-n", "300000", "--rate", "300000")
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	lines := 0
	var last doc
	var wrs, events uint64 // the intervals' deltas, summed
	for sc.Scan() {
		last = doc{}
		if err := decodeReport(t, sc.Bytes(), &last); err != nil {
			t.Fatalf("line %d is not a JSON object: %v: %.200q", lines+1, err, sc.Text())
		}
		lines++
		iv := last.Interval
		if iv == nil || iv.Seconds <= 0 || len(iv.QPs) != len(last.QPs) {
			t.Fatalf("line %d: interval %+v", lines, iv)
		}
		wrs, events = wrs+iv.Total.WRs, events+iv.Events
		if len(iv.QPs) == 1 && (iv.QPs[0].WRs != iv.Total.WRs || iv.QPs[0].Peak != nil) {
			t.Errorf("line %d: the QP's delta %+v, the total's %d WRs; a level (peak) is no delta", lines, iv.QPs[0], iv.Total.WRs)
		}
		var total uint64
		for _, q := range last.QPs {
			total += q.WRs
		}
		if wrs != total || events != last.Events {
			t.Errorf("line %d: the deltas so far add up to %d WRs and %d events, the totals are %d and %d", lines, wrs, events, total, last.Events)
		}
	}
	if lines < 2 || len(last.QPs) != 1 || last.QPs[0].WRs != 300000 {
		t.Fatalf("%d NDJSON lines, the last %+v", lines, last)
	}

	file := filepath.Join(t.TempDir(), "summary.txt")
	out, _ = run("trace", "-o", file, "--workload", "--", "-n", "1000")
	b, err := os.ReadFile(file)
	// the summary in the file, the target's own output where it was
	if err != nil || !strings.Contains(string(b), "events over") || strings.Contains(string(b), "sqscope workload: device sim") {
		t.Fatalf("-o: file %q (%v)", b, err)
	}
	if strings.Contains(out, "events over") || !strings.Contains(out, "sqscope workload: device sim") {
		t.Fatalf("-o: stdout %.300q", out)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("summary file mode %v", st.Mode().Perm())
	}
}
