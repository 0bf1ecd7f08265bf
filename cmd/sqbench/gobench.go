package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// goBench is one `go test -bench` run and the metrics taken from it.
type goBench struct {
	pkg, pattern, benchtime string
	count                   int
	root                    bool // needs root and the sqscope binary
	metrics                 []goMetric
}

type goMetric struct {
	bench     string // benchmark name without the -GOMAXPROCS suffix
	unit      string
	what      string
	unitShown string
}

var goBenches = []goBench{
	{pkg: "./workload/", pattern: "BenchmarkSim", count: 5, metrics: []goMetric{
		{"BenchmarkSim/post_list=1", "WR/s", "simulator throughput, untraced, post_list 1", "WR/s"},
		{"BenchmarkSim/post_list=16", "WR/s", "simulator throughput, untraced, post_list 16", "WR/s"},
	}},
	{pkg: "./analyzer/", pattern: "BenchmarkIngest", count: 5, metrics: []goMetric{
		{"BenchmarkIngest", "WRs/s", "analyzer ingest, synthetic 16-WR posts, one core", "WR/s"},
		{"BenchmarkIngest", "events/s", "analyzer ingest, synthetic 16-WR posts, one core (events)", "events/s"},
	}},
	{pkg: "./cmd/sqscope/", pattern: "BenchmarkRecording", benchtime: "1x", count: 3, root: true, metrics: []goMetric{
		{"BenchmarkRecording/post_list=1", "bytes/WR", recordingSize1, "bytes/WR"},
		{"BenchmarkRecording/post_list=16", "bytes/WR", recordingSize16, "bytes/WR"},
		{"BenchmarkRecording/post_list=1", "WR/s", "analyzer ingest from a recording, post_list 1", "WR/s"},
		{"BenchmarkRecording/post_list=16", "WR/s", "analyzer ingest from a recording, post_list 16", "WR/s"},
	}},
	{pkg: "./trace/", pattern: "BenchmarkCompact", benchtime: "3x", count: 3, metrics: []goMetric{
		{"BenchmarkCompact/post_list=1", "B/WR", "recording size, synthetic workload stream (4 QPs over 2 threads, inline and not, a CQE every 16th WR), post_list 1", "bytes/WR"},
		{"BenchmarkCompact/post_list=16", "B/WR", "recording size, synthetic workload stream, post_list 16", "bytes/WR"},
		{"BenchmarkCompact/post_list=1", "v1-B/WR", "the same stream in format version 1, post_list 1", "bytes/WR"},
		{"BenchmarkCompact/post_list=16", "v1-B/WR", "the same stream in format version 1, post_list 16", "bytes/WR"},
		{"BenchmarkCompact/post_list=1,varied", "B/WR", "recording size, the stream with what applications vary (wr_ids that are addresses, sizes, call times, empty polls), post_list 1", "bytes/WR"},
		{"BenchmarkCompact/post_list=16,varied", "B/WR", "recording size, the stream with what applications vary, post_list 16", "bytes/WR"},
		{"BenchmarkCompact/post_list=1", "WR/cpu-s", "reading a recording of the synthetic workload stream, one core, post_list 1", "WR/CPU-s"},
		{"BenchmarkCompact/post_list=16", "WR/cpu-s", "reading a recording of the synthetic workload stream, one core, post_list 16", "WR/CPU-s"},
		{"BenchmarkCompact/post_list=1", "v2/v1-rate", "reading it, against reading the same stream in format version 1, post_list 1", "×"},
	}},
	{pkg: "./trace/", pattern: "BenchmarkReport", benchtime: "3x", count: 3, metrics: []goMetric{
		{"BenchmarkReport/post_list=1", "WR/cpu-s", reportRate1, "WR/CPU-s"},
		{"BenchmarkReport/post_list=16", "WR/cpu-s", reportRate16, "WR/CPU-s"},
		{"BenchmarkReport/post_list=1", "analyse-WR/cpu-s", "the analysis alone, over the same events read before, post_list 1", "WR/CPU-s"},
		{"BenchmarkReport/post_list=16", "analyse-WR/cpu-s", "the analysis alone, over the same events read before, post_list 16", "WR/CPU-s"},
	}},
	{pkg: "./cmd/sqscope/", pattern: "BenchmarkExport", benchtime: "1x", count: 1, root: true, metrics: []goMetric{
		{"BenchmarkExport", "recording-MB", exportRecording, "MB"},
		{"BenchmarkExport", "recorded-events", "30 s demo recording: events", "events"},
		{"BenchmarkExport", "perfetto/recording", exportPerfettoSize, "× the recording"},
		{"BenchmarkExport", "json/recording", "Chrome JSON export: size", "× the recording"},
		{"BenchmarkExport", "events/s", "Perfetto export of decoded events, one core", "events/s"},
		{"BenchmarkExport", "events/cpu-s", exportSpeed, "events/CPU-s"},
		{"BenchmarkExport", "e2e-events/cpu-s", "sqscope export --format perfetto, reading the file too", "events/CPU-s"},
		{"BenchmarkExport", "heap-MiB-third", exportHeapThird, "MiB"},
		{"BenchmarkExport", "heap-MiB-whole", exportHeapWhole, "MiB"},
	}},
	{pkg: "./serve/", pattern: "BenchmarkScrape", benchtime: "5x", count: 5, metrics: []goMetric{
		{"BenchmarkScrape/qps=1024", "ms/scrape", "sqscope serve: a scrape of 1,024 QPs, text, snapshot included (target < 50)", "ms"},
		{"BenchmarkScrape/qps=1024", "ms/scrape-om-gzip", "sqscope serve: a scrape of 1,024 QPs, OpenMetrics with gzip as Prometheus asks", "ms"},
		{"BenchmarkScrape/qps=1024", "ms/scrape-client_golang", "sqscope serve: the same series gathered and encoded by client_golang, 1,024 QPs (the way before)", "ms"},
		{"BenchmarkScrape/qps=4096", "ms/scrape", "sqscope serve: a scrape of 4,096 QPs, text, snapshot included", "ms"},
		{"BenchmarkScrape/qps=4096", "ms/scrape-om-gzip", "sqscope serve: a scrape of 4,096 QPs, OpenMetrics with gzip", "ms"},
		{"BenchmarkScrape/qps=4096", "encode-ms", "sqscope serve: 4,096 QPs, the series of a snapshot already taken, text", "ms"},
		{"BenchmarkScrape/qps=4096", "snapshot-ms", "sqscope serve: 4,096 QPs, the analyzer snapshot alone", "ms"},
		{"BenchmarkScrape/qps=4096", "ms/scrape-client_golang", "sqscope serve: the same series gathered and encoded by client_golang, 4,096 QPs (the way before)", "ms"},
		{"BenchmarkScrape/qps=4096", "alloc-MiB/scrape", "sqscope serve: allocated per scrape, 4,096 QPs, text", "MiB"},
		{"BenchmarkScrape/qps=4096", "alloc-MiB/scrape-client_golang", "sqscope serve: allocated per scrape by client_golang, 4,096 QPs", "MiB"},
		{"BenchmarkScrape/qps=4096", "heap-MiB", "sqscope serve: heap of the analyzer (100 history windows per QP) and collector, 4,096 QPs", "MiB"},
	}},
	{pkg: "./cmd/sqscope/", pattern: "BenchmarkFlight", benchtime: "1x", count: 3, root: true, metrics: []goMetric{
		{"BenchmarkFlight", "healthy-bytes", "record --flight 10s, full speed, 4 QPs: bytes in the flight directory during the 30 s of healthy traffic before a never-signal overflow (looked at every 200 ms)", "bytes"},
		{"BenchmarkFlight", "anon-MiB", "record --flight 10s: sqscope's anonymous resident memory, at its largest (bound: the default --flight-mib, 160 for 10 s, + 64 MiB)", "MiB"},
		{"BenchmarkFlight", "hwm-MiB", "record --flight 10s: sqscope's peak resident memory (VmHWM: the binary's pages and the BPF ring buffer too)", "MiB"},
		{"BenchmarkFlight", "dropped", "record --flight 10s: events the memory bound dropped before the trigger", "events"},
		{"BenchmarkFlight", "window-s", "record --flight 10s: seconds the file holds before the trigger", "s"},
		{"BenchmarkFlight", "late-ms", "record --flight 10s --after 2s: the file complete this long after the trigger and its after window", "ms"},
	}},
	{pkg: "./cmd/sqscope/", pattern: "BenchmarkAdvice", benchtime: "1x", count: 3, root: true, metrics: []goMetric{
		{"BenchmarkAdvice", "counts-err-%", "advise, 7 poor workloads on the simulator: largest error of the predicted doorbells, BlueFlame writes, DMA reads, CQE writes, peak outstanding", "% of the prediction"},
		{"BenchmarkAdvice", "wrs-err-%", "advise, the same runs: largest error of the predicted WR/s", "% of the prediction"},
	}},
	{pkg: "./probe/", pattern: "BenchmarkAttachRunning", benchtime: "1x", count: 3, root: true, metrics: []goMetric{
		{"BenchmarkAttachRunning", "scan-GiB/s", "-p on a process with 1 GiB of heap: memory scan speed (target >= 1)", "GiB/s"},
		{"BenchmarkAttachRunning", "scan-GiB/cpu-s", "-p on a process with 1 GiB of heap: memory scan speed per CPU-second", "GiB/CPU-s"},
		{"BenchmarkAttachRunning", "scan-cpu-share", "-p on a process with 1 GiB of heap: share of a core the scan got", "× a core"},
		{"BenchmarkAttachRunning", "scan-ms", "-p on a process with 1 GiB of heap: memory scan time", "ms"},
		{"BenchmarkAttachRunning", "stop-ms", "-p on a process with 1 GiB of heap: target stopped while probes are placed", "ms"},
	}},
	{pkg: "./analyzer/", pattern: "BenchmarkSnapshot4096", benchtime: "20x", count: 3, metrics: []goMetric{
		{"BenchmarkSnapshot4096/view-reused", "cpu-ms/snapshot", snapshot4096, "CPU-ms"},
		{"BenchmarkSnapshot4096/view", "cpu-ms/snapshot", "analyzer snapshot of 4,096 QPs, into fresh memory", "CPU-ms"},
		{"BenchmarkSnapshot4096/whole", "cpu-ms/snapshot", "analyzer snapshot of 4,096 QPs with every occupancy history (reports)", "CPU-ms"},
	}},
	{pkg: "./analyzer/", pattern: "BenchmarkMemory4096", benchtime: "1x", count: 3, metrics: []goMetric{
		{"BenchmarkMemory4096", "MiB", "analyzer heap with 4,096 QPs after 70 s of traffic (histories at their budget)", "MiB"},
		{"BenchmarkMemory4096", "B/QP", "analyzer heap per QP, 4,096 QPs", "bytes"},
	}},
	{pkg: "./tui/", pattern: "BenchmarkTUICPU", benchtime: "1x", count: 3, metrics: []goMetric{
		{"BenchmarkTUICPU/qps=64", "%cpu@10Hz", "TUI CPU at 10 Hz, 64 QPs (target < 5)", "% of a core"},
		{"BenchmarkTUICPU/qps=4096", "%cpu@10Hz", tuiCPU4096, "% of a core"},
	}},
	{pkg: "./cmd/sqscope/", pattern: "BenchmarkScale", benchtime: "1x", count: 3, metrics: []goMetric{
		{"BenchmarkScale/qps=64", "top-%cpu@10Hz", topCPU64, "% of a core"},
		{"BenchmarkScale/qps=4096", "top-%cpu@10Hz", topCPU4096, "% of a core"},
		{"BenchmarkScale/qps=4096", "top-rss-MiB", topRSS4096, "MiB"},
		{"BenchmarkScale/qps=4096", "report-rss-MiB", reportRSS4096, "MiB"},
	}},
	{pkg: "./cmd/sqscope/", pattern: "BenchmarkLiveView", benchtime: "1x", count: 3, root: true, metrics: []goMetric{
		{"BenchmarkLiveView", "view-%cpu@10Hz", liveView4096, "% of a core"},
		{"BenchmarkLiveView", "process-%cpu", liveProc4096, "% of a core"},
	}},
	{pkg: "./tui/", pattern: "BenchmarkTick", benchtime: "100x", count: 3, metrics: []goMetric{
		{"BenchmarkTick/qps=64/traffic", "cpu-ms/tick", "TUI refresh (snapshot, rows, draw on a 200×60 screen), 64 QPs with traffic", "CPU-ms"},
		{"BenchmarkTick/qps=4096/traffic", "cpu-ms/tick", "TUI refresh (snapshot, rows, draw on a 200×60 screen), 4,096 QPs with traffic", "CPU-ms"},
		{"BenchmarkTick/qps=4096/still", "cpu-ms/tick", "TUI refresh, 4,096 QPs, nothing new (no snapshot taken)", "CPU-ms"},
	}},
}

func (g goBench) args() []string {
	a := []string{"test", "-run", "^$", "-bench", g.pattern, "-count", strconv.Itoa(g.count)}
	if g.benchtime != "" {
		a = append(a, "-benchtime", g.benchtime)
	}
	return append(a, g.pkg)
}

// goBenchmarks runs the go test benchmarks of the other packages and
// takes the median of their runs.
func goBenchmarks(ctx context.Context, c *config, r *report) error {
	for _, g := range goBenches {
		args := g.args()
		show := filepath.Base(c.goBin) + " " + strings.Join(args, " ")
		if g.root {
			show = "SQSCOPE_BIN=" + c.show() + " " + show
		}
		r.commands = append(r.commands, show)
		fmt.Fprintf(c.log, "go benchmarks: %s\n", show)
		cmd := exec.CommandContext(ctx, c.goBin, args...)
		cmd.Env = append(os.Environ(), "SQSCOPE_BIN="+c.sqscope)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %v\n%s", show, err, out.String())
		}
		vals := parseGoBench(out.Bytes())
		for _, m := range g.metrics {
			xs := vals[m.bench+" "+m.unit]
			if len(xs) == 0 {
				return fmt.Errorf("%s: no %s %s in its output:\n%s", show, m.bench, m.unit, out.String())
			}
			r.other = append(r.other, otherRow{What: m.what, Value: summarize(xs), Unit: m.unitShown})
		}
	}
	return nil
}

// parseGoBench collects "name unit" -> values from benchmark result lines
// ("BenchmarkX/sub-2  N  v1 unit1  v2 unit2 ...").
func parseGoBench(out []byte) map[string][]float64 {
	m := map[string][]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			m[name+" "+f[i+1]] = append(m[name+" "+f[i+1]], v)
		}
	}
	return m
}
