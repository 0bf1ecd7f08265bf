package trace_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/trace"
)

// reportStreams are large recordings of the synthetic workload stream
// whose whole reports (text, JSON and every QP's occupancy history) are
// kept in testdata/report-NAME.golden: how a recording is read and
// analysed may get faster, never say anything else.
var reportStreams = []struct {
	name string
	cfg  trace.StreamConfig
}{
	{"post_list=1", trace.StreamConfig{QPs: 4, Threads: 2, PostList: 1, Signal: 16, Posts: 100_000}},
	{"post_list=16", trace.StreamConfig{QPs: 4, Threads: 2, PostList: 16, Signal: 16, Posts: 6_250}},
	{"post_list=1,varied,shared-cq", trace.StreamConfig{QPs: 8, Threads: 3, PostList: 1, Signal: 16, Posts: 40_000, Varied: true, SharedCQ: true, Seed: 7}},
	{"post_list=16,varied", trace.StreamConfig{QPs: 4, Threads: 2, PostList: 16, Signal: 16, Posts: 5_000, Varied: true, Seed: 9}},
	{"post_list=4,signal=300", trace.StreamConfig{QPs: 2, Threads: 1, PostList: 4, Signal: 300, Posts: 20_000}},
}

// reportCases are the analyzer's named streams and the fault recordings
// of cmd/sqscope: their reports, read from a recording, are kept in
// testdata/report-cases.golden as one digest each.
func reportCases(t *testing.T) map[string][]trace.Event {
	t.Helper()
	cases := map[string][]trace.Event{}
	build := func(prefix, name string, b func(*streamtest.Stream)) {
		s := streamtest.New()
		b(s)
		cases[prefix+"/"+name] = s.Events
	}
	for _, d := range slicesOf(streamtest.Diagnoses, streamtest.StateDiagnoses, streamtest.RecvDiagnoses, []streamtest.Diag{streamtest.CallsNotTraced}) {
		build("diagnosis", d.Name, d.Build)
	}
	for _, c := range slicesOf(streamtest.Endings, streamtest.CountersMode, streamtest.PCIeByOpcode, streamtest.Providers) {
		build("case", c.Name, c.Build)
	}
	cases["case/receives"] = streamtest.RecvRecording()
	faults, err := filepath.Glob(filepath.Join("..", "cmd", "sqscope", "testdata", "faults", "*.sqscope"))
	if err != nil || len(faults) == 0 {
		t.Fatalf("the fault recordings: %v (found %d)", err, len(faults))
	}
	for _, path := range faults {
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var evs []trace.Event
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			evs = append(evs, ev)
		}
		r.Close()
		cases["fault/"+strings.TrimSuffix(filepath.Base(path), ".sqscope")] = evs
	}
	return cases
}

func slicesOf[T any](lists ...[]T) []T {
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// reportOf reads a recording into an analyzer and renders the report: its
// text, its JSON and each QP's occupancy history. With reuse it reads as
// sqscope report does, the reader's events reused, in batches; else one
// new event at a time.
func reportOf(t *testing.T, data []byte, reuse bool) []byte {
	t.Helper()
	a := analyzer.New(analyzer.Options{BF: analyzer.DefaultBF})
	readBatches(t, data, reuse, a.IngestAll)
	return render(t, a.Snapshot())
}

// readBatches reads the recording data to fn: with reuse as sqscope report
// does, the reader's events reused, 256 at a time; else one new event at
// a time.
func readBatches(t testing.TB, data []byte, reuse bool, fn func([]trace.Event)) {
	t.Helper()
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]trace.Event, 256)
	if reuse {
		r.Reuse()
	} else {
		batch = batch[:1]
	}
	for {
		n, err := r.NextBatch(batch)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(batch[:n])
	}
}

func render(t *testing.T, snap analyzer.Snapshot) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteText(&b, snap); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b.Write(js)
	b.WriteString("\n")
	for _, q := range snap.QPs {
		fmt.Fprintf(&b, "history of QP %#x (pid %d) from %d ns, max/min/end/wrs/cqes:", q.QPNum, q.PID, q.HistoryStartNS)
		for _, s := range q.History {
			fmt.Fprintf(&b, " %d/%d/%d/%d/%d", s.Max, s.Min, s.End, s.WRs, s.CQEs)
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// checkReportGolden compares got with testdata/name, or rewrites it with
// -update.
func checkReportGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs from the golden file at line %d:\n got: %s\nwant: %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s differs from the golden file: %d lines, want %d", path, len(gl), len(wl))
	}
}

// TestReportStreams reads large recordings, with the reader's events
// reused and not, into reports that must be the golden ones and the same
// as the report of the events as they were made.
func TestReportStreams(t *testing.T) {
	for _, s := range reportStreams {
		t.Run(s.name, func(t *testing.T) {
			evs := trace.StreamEvents(s.cfg)
			a := analyzer.New(analyzer.Options{BF: analyzer.DefaultBF})
			a.IngestAll(evs)
			direct := render(t, a.Snapshot())
			data := trace.Recorded(t, evs)
			for _, reuse := range []bool{false, true} {
				if got := reportOf(t, data, reuse); !bytes.Equal(got, direct) {
					t.Fatalf("read with reuse %v: the report differs from that of the events as made", reuse)
				}
			}
			checkReportGolden(t, "report-"+strings.NewReplacer("=", "", ",", "-").Replace(s.name)+".golden", direct)
		})
	}
}

// TestReportCases does the same for the analyzer's named streams and the
// fault recordings, each kept as a digest of its report.
func TestReportCases(t *testing.T) {
	cases := reportCases(t)
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	slices.Sort(names)
	var digests strings.Builder
	for _, name := range names {
		evs := cases[name]
		data := trace.Recorded(t, evs)
		plain := reportOf(t, data, false)
		if reused := reportOf(t, data, true); !bytes.Equal(reused, plain) {
			t.Errorf("%s: the report read with the reader's events reused differs", name)
		}
		fmt.Fprintf(&digests, "%x %s\n", sha256.Sum256(plain), name)
	}
	checkReportGolden(t, "report-cases.golden", []byte(digests.String()))
}
