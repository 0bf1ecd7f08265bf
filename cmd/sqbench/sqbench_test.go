package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/sqscope/sqscope/bpf/bench"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

func TestSummarize(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []float64
		want summary
	}{
		{"empty", nil, summary{}},
		{"one", []float64{3}, summary{Med: 3, Min: 3, Max: 3, N: 1}},
		{"odd", []float64{5, 1, 3}, summary{Med: 3, Min: 1, Max: 5, N: 3}},
		{"even", []float64{4, 1, 3, 2}, summary{Med: 2.5, Min: 1, Max: 4, N: 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := summarize(c.in); got != c.want {
				t.Errorf("summarize(%v) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestParseGoBench(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkSim/post_list=1-2   	 1000000	       181.0 ns/op	   5449523 WR/s	       181.0 ns/post_call
BenchmarkSim/post_list=1-2   	 1000000	       190.0 ns/op	   5249523 WR/s	       190.0 ns/post_call
BenchmarkIngest-2   	   10000	    100 ns/op	  82300000 WRs/s	 0 B/op
PASS
`)
	got := parseGoBench(out)
	for _, c := range []struct {
		key  string
		want []float64
	}{
		{"BenchmarkSim/post_list=1 WR/s", []float64{5449523, 5249523}},
		{"BenchmarkSim/post_list=1 ns/post_call", []float64{181, 190}},
		{"BenchmarkIngest WRs/s", []float64{82300000}},
		{"BenchmarkIngest B/op", []float64{0}},
	} {
		t.Run(c.key, func(t *testing.T) {
			if fmt.Sprint(got[c.key]) != fmt.Sprint(c.want) {
				t.Errorf("%s: %v, want %v", c.key, got[c.key], c.want)
			}
		})
	}
}

func TestWlIters(t *testing.T) {
	if n := wlIters(overheadFlags(16, 800000)); n != 800000 {
		t.Errorf("wlIters = %d, want 800000", n)
	}
}

// The programs `make bench` measures against load on this kernel: a
// verifier change must fail a test, not the benchmark.
func TestBenchProgramsLoad(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	for _, c := range []struct {
		name string
		load func() (*ebpf.CollectionSpec, error)
		objs interface{ Close() error }
	}{
		{"floor", bench.LoadFloor, &bench.FloorObjects{}},
		{"least", bench.LoadLeast, &bench.LeastObjects{}},
		{"cost", bench.LoadCost, &bench.CostObjects{}},
		{"qpcache", bench.LoadQPCache, &bench.QPCacheObjects{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := c.load()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := loadForUprobes(spec, c.objs); err != nil {
				t.Fatal(err)
			}
			c.objs.Close()
		})
	}
}

// figures is a report of other figures, each one run's value.
func figures(vals map[string]float64) *report {
	r := &report{}
	for what, v := range vals {
		r.other = append(r.other, otherRow{What: what, Value: summary{Med: v, N: 1}})
	}
	return r
}

// wantVerdicts checks that verdicts hold each of want.
func wantVerdicts(t *testing.T, verdicts []string, want ...string) {
	t.Helper()
	got := fmt.Sprint(verdicts)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("verdicts %s lack %q", got, w)
		}
	}
}

func TestRecordingVerdicts(t *testing.T) {
	r := figures(map[string]float64{recordingSize1: 1.23, recordingSize16: 1.6, reportRate1: 9e6, reportRate16: 25e6})
	wantVerdicts(t, r.recordingVerdicts(), "recording size, post_list 1 ≤ 8.0 bytes/WR: met (1.23 bytes/WR)",
		"recording size, post_list 16 ≤ 1.5 bytes/WR: NOT met (1.60 bytes/WR)",
		"one core, post_list 1 ≥ 15.00M WR/s: NOT met (9.00M WRs per CPU-second)",
		"one core, post_list 16 ≥ 15.00M WR/s: met (25.00M WRs per CPU-second)")
}

func TestExportVerdicts(t *testing.T) {
	r := figures(map[string]float64{exportPerfettoSize: 0.57, exportSpeed: 4e6, exportHeapThird: 1.2, exportHeapWhole: 1.3})
	wantVerdicts(t, r.exportVerdicts(), "Perfetto export ≤ 1.5× the recording: met (0.57×)",
		"Perfetto export ≥ 5.00M events/s on one core: NOT met (4.00M events per CPU-second)",
		"export memory flat in the recording's size (3× the events, < 1.5× the heap): met (1.20 MiB for a third, 1.30 MiB for the whole)")
}

// The tracer's JSON summary is read whether or not the workload wrote text
// before it.
func TestParseTraceJSON(t *testing.T) {
	const js = "{\n  \"events\": 12,\n  \"lost_events\": 3,\n  \"qps\": [\n    {\n      \"wrs\": 7\n    }\n  ]\n}\n"
	for _, c := range []struct {
		name, out string
		err       bool
	}{
		{"alone", js, false},
		{"after the workload's text", "QP 0x1c0: 7 WRs\n" + js, false},
		{"none", "QP 0x1c0: 7 WRs\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := parseTraceJSON([]byte(c.out))
			if c.err {
				if err == nil {
					t.Fatalf("no error for %q", c.out)
				}
				return
			}
			if err != nil || tr.Events != 12 || tr.Lost != 3 || len(tr.QPs) != 1 || tr.QPs[0].WRs != 7 {
				t.Fatalf("parseTraceJSON = %+v, %v", tr, err)
			}
		})
	}
}

// leastWRs tells the least programs' records apart by their sizes: a
// post holds one WR, a list its N, a poll none.
func TestLeastWRs(t *testing.T) {
	var list bytes.Buffer
	if err := binary.Write(&list, binary.LittleEndian, bench.LeastLeastList{N: 7}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rec  []byte
		want uint64
	}{
		{"post", make([]byte, binary.Size(bench.LeastLeastPost{})), 1},
		{"list of 7", list.Bytes(), 7},
		{"poll", make([]byte, binary.Size(bench.LeastLeastPoll{})), 0},
	} {
		if got := leastWRs(c.rec); got != c.want {
			t.Errorf("leastWRs(%s record of %d bytes) = %d, want %d", c.name, len(c.rec), got, c.want)
		}
	}
}
