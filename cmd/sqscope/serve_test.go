package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// served is one `sqscope serve` the test started.
type served struct {
	cmd   *exec.Cmd
	addr  string
	truth string
	lines chan string // its stderr, line by line
	log   strings.Builder
}

// startServe starts `sqscope serve` on a free port of 127.0.0.1 in mode,
// tracing the built-in workload with flags, and waits for its address.
func startServe(t *testing.T, mode, flags string) *served {
	t.Helper()
	truth := filepath.Join(t.TempDir(), "truth.json")
	args := append([]string{"--mode", mode, "--workload", "--"}, strings.Fields(flags)...)
	s := serveWith(t, append(args, "--sim-deterministic", "--json-out", truth)...)
	s.truth = truth
	return s
}

// serveWith starts `sqscope serve --listen 127.0.0.1:0 ARGS`, reads its
// stderr line by line and waits for its address.
func serveWith(t *testing.T, args ...string) *served {
	t.Helper()
	s := &served{lines: make(chan string, 100)}
	s.cmd = exec.Command(sqscopeBin(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	stderr, _ := s.cmd.StderrPipe()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	if m := s.waitFor(t, regexp.MustCompile(`serving http://(\S+)/metrics`)); m != nil {
		s.addr = m[1]
	}
	return s
}

// waitFor reads stderr until a line matches re.
func (s *served) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(bpftest.Timeout(t, 60*time.Second))
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("sqscope serve ended before %q:\n%s", re, s.log.String())
			}
			s.log.WriteString(l + "\n")
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q from sqscope serve in 60 s:\n%s", re, s.log.String())
		}
	}
}

// scrape gets /metrics, as Prometheus' text format or OpenMetrics.
func (s *served) scrape(t *testing.T, accept string) (body []byte, contentType string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+s.addr+"/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %v %s\n%s", err, resp.Status, body)
	}
	t.Logf("scrape of %s: %d bytes in %v", s.addr, len(body), time.Since(start))
	return body, resp.Header.Get("Content-Type")
}

// series maps a metric's series to values: key "qpn" or "qpn/label=value".
func series(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return mfs
}

// value is the value of name's series with these labels, false if absent.
func value(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.Metric {
		for _, l := range m.Label {
			if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
				continue next
			}
		}
		return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true
	}
	return 0, false
}

// TestServe runs sqscope serve on two workloads of the simulated HCA, one
// healthy in counters mode and one that never signals in events mode; the
// scrapes equal the workloads' ground truth, a real Prometheus scraping
// both with the shipped rules sees the same and fires the SQ-overflow
// alert for the faulty QP only, and SIGTERM detaches and exits 0.
func TestServe(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	promtool := bpftest.RequireTool(t, "promtool", "prometheus")
	prometheus := bpftest.RequireTool(t, "prometheus", "prometheus")
	healthy := startServe(t, "counters", "-s 64 -I 64 -Q 16 -n 20000 --qps 2")
	faulty := startServe(t, "events", "-t 64 --fault never-signal -n 2000")
	ended := regexp.MustCompile(`the trace ended`)
	healthy.waitFor(t, ended)
	faulty.waitFor(t, ended)

	type check struct{ metric, truth, label string }
	tests := []struct {
		s      *served
		name   string
		checks []check
		absent []string // not measured in this mode
	}{
		{healthy, "counters mode", []check{
			{"sqscope_send_wrs_total", "wrs", ""}, {"sqscope_post_calls_total", "post_calls", ""},
			{"sqscope_inline_wrs_total", "inline", ""}, {"sqscope_signaled_wrs_total", "signaled", ""},
			{"sqscope_doorbells_total", "doorbells", ""}, {"sqscope_sq_depth_wrs", "max_send_wr", ""},
			// the send queue the kernel keeps
			{"sqscope_cqes_polled_total", "cqes_polled", ""}, {"sqscope_sq_outstanding_wrs", "outstanding", ""},
			{"sqscope_sq_peak_outstanding_wrs", "peak_outstanding", ""},
		}, []string{"sqscope_blueflame_writes_total", "sqscope_pcie_saved_bytes"}},
		{faulty, "events mode, never signaled", []check{
			{"sqscope_send_wrs_total", "wrs", ""}, {"sqscope_post_calls_total", "post_calls", ""},
			{"sqscope_signaled_wrs_total", "signaled", ""}, {"sqscope_doorbells_total", "doorbells", ""},
			{"sqscope_blueflame_writes_total", "bf_writes", ""}, {"sqscope_sq_peak_outstanding_wrs", "peak_outstanding", ""},
			{"sqscope_post_enomem_total", "enomem_sq_full", "sq_full"}, {"sqscope_sq_depth_wrs", "max_send_wr", ""},
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body, ct := tc.s.scrape(t, "")
			if !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
				t.Errorf("Content-Type %q, want Prometheus' text format", ct)
			}
			mfs := series(t, body)
			truth := readTruth(t, tc.s.truth)
			for _, q := range truth {
				qpn := fmt.Sprint(q["qp_num"])
				for _, c := range tc.checks {
					labels := map[string]string{"qpn": qpn}
					if c.label != "" { // the simulated HCA's causes are its model's own
						labels["cause"], labels["basis"] = c.label, "provider"
					}
					got, ok := value(mfs, c.metric, labels)
					if want := q[c.truth].(float64); !ok || got != want {
						t.Errorf("QP %s %s = %v (present %v), ground truth %s %v", qpn, c.metric, got, ok, c.truth, want)
					}
				}
				for _, name := range tc.absent {
					if v, ok := value(mfs, name, map[string]string{"qpn": qpn}); ok {
						t.Errorf("QP %s %s = %v: not measured in this mode, want it absent", qpn, name, v)
					}
				}
			}
			if v, ok := value(mfs, "sqscope_lost_events_total", nil); !ok || v != 0 {
				t.Errorf("lost events %v (present %v)", v, ok)
			}
			check := exec.Command(promtool, "check", "metrics")
			check.Stdin = strings.NewReader(string(body))
			if out, err := check.CombinedOutput(); err != nil {
				t.Errorf("promtool check metrics: %v\n%s", err, out)
			}
			om, ct := tc.s.scrape(t, "application/openmetrics-text; version=1.0.0")
			if !strings.HasPrefix(ct, "application/openmetrics-text") || !strings.HasSuffix(string(om), "# EOF\n") {
				t.Errorf("OpenMetrics asked, got Content-Type %q ending %q", ct, om[max(0, len(om)-20):])
			}
		})
	}
	faultyQPN := fmt.Sprint(readTruth(t, faulty.truth)[0]["qp_num"])
	promQuery := runPrometheus(t, prometheus, healthy.addr, faulty.addr)
	// the WR counters as Prometheus stored them equal the ground truth
	var total float64
	for _, s := range []*served{healthy, faulty} {
		for _, q := range readTruth(t, s.truth) {
			total += q["wrs"].(float64)
		}
	}
	waitProm(t, promQuery, `sum(sqscope_send_wrs_total)`, func(r []promSample) bool { return len(r) == 1 && r[0].value() == total })
	// the outstanding gauge (of every QP: the counters mode's from the
	// kernel's send-queue model) never exceeds the depth
	waitProm(t, promQuery, `count(sqscope_sq_outstanding_wrs)`, func(r []promSample) bool { return len(r) == 1 && r[0].value() == 3 })
	if r := promQuery(t, `max_over_time(sqscope_sq_outstanding_wrs[5m]) > on (instance, pid, qpn) group_left sqscope_sq_depth_wrs`); len(r) != 0 {
		t.Errorf("outstanding over the depth: %+v", r)
	}
	// the overflow alert fires for the faulty QP, and only for it
	alerts := waitProm(t, promQuery, `ALERTS{alertname="SQScopeSendQueueOverflow",alertstate="firing"}`, func(r []promSample) bool { return len(r) > 0 })
	for _, a := range alerts {
		if a.Metric["qpn"] != faultyQPN || a.Metric["instance"] != faulty.addr {
			t.Errorf("overflow alert for %v, want QP %s of %s only", a.Metric, faultyQPN, faulty.addr)
		}
	}
	// SIGTERM: probes detached, exit 0
	for _, s := range []*served{healthy, faulty} {
		s.cmd.Process.Signal(syscall.SIGTERM)
		s.waitFor(t, regexp.MustCompile(`stopped, probes detached`))
		if err := s.cmd.Wait(); err != nil {
			t.Errorf("sqscope serve after SIGTERM: %v\n%s", err, s.log.String())
		}
	}
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) value() float64 {
	var v float64
	fmt.Sscan(fmt.Sprint(s.Value[1]), &v)
	return v
}

// runPrometheus starts a real Prometheus on a free port of 127.0.0.1 with
// a temporary directory, scraping the targets every second with the
// shipped rules loaded, and returns a query function.
func runPrometheus(t *testing.T, bin string, targets ...string) func(*testing.T, string) []promSample {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs("../../deploy/prometheus/sqscope-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: sqscope
    static_configs: [{targets: ["%s"]}]
`, rules, strings.Join(targets, `", "`))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", log.String())
		}
	})
	return func(t *testing.T, q string) []promSample {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil // not up yet
		}
		defer resp.Body.Close()
		var r struct {
			Status string
			Error  string
			Data   struct{ Result []promSample }
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
			return nil
		}
		return r.Data.Result
	}
}

// waitProm queries until ok accepts the result (30 s at most).
func waitProm(t *testing.T, query func(*testing.T, string) []promSample, q string, ok func([]promSample) bool) []promSample {
	t.Helper()
	return waitPromFor(t, query, q, ok, 30*time.Second)
}

// waitPromFor is waitProm for at most d (scaled to the host).
func waitPromFor(t *testing.T, query func(*testing.T, string) []promSample, q string, ok func([]promSample) bool, d time.Duration) []promSample {
	t.Helper()
	deadline := time.Now().Add(bpftest.Timeout(t, d))
	for {
		r := query(t, q)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus query %s: %+v after %v", q, r, bpftest.Timeout(t, d))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestServeBadInput: a port in use, a bad address, no privileges: one
// line, a non-zero exit, nothing started.
func TestServeBadInput(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name   string
		args   []string
		nobody bool
		code   int
		want   string
	}{
		{"port in use", []string{"--listen", busy.Addr().String()}, false, 1, "the port is in use"},
		{"no port", []string{"--listen", "127.0.0.1"}, false, 2, `--listen "127.0.0.1": want HOST:PORT or :PORT`},
		{"bad port", []string{"--listen", "127.0.0.1:99999"}, false, 2, `bad port "99999"`},
		{"unknown host", []string{"--listen", "no-such-host.invalid:9847"}, false, 2, `unknown host "no-such-host.invalid"`},
		{"not an address of this host", []string{"--listen", "192.0.2.1:9847"}, false, 1, "not an address of this host"},
		{"no privilege", []string{"--listen", "127.0.0.1:0"}, true, 1, "CAP_BPF and CAP_PERFMON"},
		{"bad grace", []string{"--grace", "0s"}, false, 2, "--grace must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(sqscopeBin(t), append(append([]string{"serve"}, tc.args...), "-c", "true")...)
			if tc.nobody {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			msg := strings.TrimSpace(stderr.String())
			if code != tc.code || !strings.Contains(msg, tc.want) || strings.Contains(msg, "panic") || strings.Count(msg, "\n") > 0 {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line with %q", code, msg, tc.code, tc.want)
			}
		})
	}
}

// TestServeSIGTERM: while it traces, /healthz is 200 and the scrape says
// so; SIGTERM detaches the probes, stops the started workload and exits 0
// at once.
func TestServeSIGTERM(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	s := startServe(t, "counters", "-D 60 --rate 2000")
	// serving starts before the probes are placed: 503 until they are
	var status string
	var body []byte
	for deadline := time.Now().Add(bpftest.Timeout(t, 30*time.Second)); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + s.addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		status = resp.Status
		if resp.StatusCode == 200 || time.Now().After(deadline) {
			break
		}
		if resp.StatusCode != 503 || string(body) != "attaching the probes\n" {
			t.Fatalf("/healthz %s %q before tracing", status, body)
		}
	}
	if !strings.HasPrefix(status, "200") || !strings.HasPrefix(string(body), "tracing sqscope workload") {
		t.Errorf("/healthz %s %q while tracing", status, body)
	}
	metrics, _ := s.scrape(t, "")
	if v, ok := value(series(t, metrics), "sqscope_tracing", nil); !ok || v != 1 {
		t.Errorf("sqscope_tracing %v while tracing", v)
	}
	start := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitFor(t, regexp.MustCompile(`stopped, probes detached`))
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, s.log.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stopping took %v", d)
	}
	t.Logf("stopped in %v", time.Since(start))
}

// TestServeChurn: a process creates and destroys QPs in a loop (the
// lifecycle target of session/testdata); the series of destroyed QPs go
// after --grace and the analyzer forgets them, so what sqscope holds
// follows the QPs of the last grace period, not every QP ever made.
func TestServeChurn(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	dir := t.TempDir()
	life := filepath.Join(dir, "lifecycle")
	sim, _ := filepath.Glob("../../verbs/sim*.c") // the simulated HCA
	args := append([]string{"-O2", "-Wall", "-pthread", "-I../../verbs", "-o", life, "../../session/testdata/lifecycle.c"}, sim...)
	if out, err := exec.Command("cc", append(args, "-libverbs")...).CombinedOutput(); err != nil {
		t.Fatalf("building the lifecycle target: %v\n%s", err, out)
	}
	const rounds = 20000
	s := serveWith(t, "--grace", "1s", "--mode", "events", "-c", fmt.Sprintf("%s churn %d", life, rounds))
	ended := make(chan bool)
	go func() { s.waitFor(t, regexp.MustCompile(`the trace ended`)); close(ended) }()
	var peakQPs, peakRSS, scrapes float64
	done := false
	var endedAt time.Time
	for !done || time.Since(endedAt) < 2500*time.Millisecond {
		select {
		case <-ended:
			done, endedAt, ended = true, time.Now(), nil
		case <-time.After(300 * time.Millisecond):
		}
		body, _ := s.scrape(t, "")
		mfs := series(t, body)
		live, _ := value(mfs, "sqscope_qps", map[string]string{"state": "live"})
		gone, _ := value(mfs, "sqscope_qps", map[string]string{"state": "ended"})
		rss, _ := value(mfs, "process_resident_memory_bytes", nil)
		peakQPs, peakRSS, scrapes = max(peakQPs, live+gone), max(peakRSS, rss), scrapes+1
	}
	// the grace period, a sweep and a scrape's shared render (up to 1 s
	// old) after the end, every series of a destroyed QP is gone
	leftAfterGrace := func(mfs map[string]*dto.MetricFamily) bool {
		for _, name := range []string{"sqscope_send_wrs_total", "sqscope_sq_depth_wrs", "sqscope_diagnosis_occurrences_total"} {
			if mf := mfs[name]; mf != nil && len(mf.Metric) > 0 {
				return true
			}
		}
		return false
	}
	body, _ := s.scrape(t, "")
	mfs := series(t, body)
	for deadline := time.Now().Add(bpftest.Timeout(t, 10*time.Second)); leftAfterGrace(mfs) && time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		body, _ = s.scrape(t, "")
		mfs = series(t, body)
	}
	events, _ := value(mfs, "sqscope_events_total", nil)
	t.Logf("%d QPs created and destroyed, %v events: at most %v QPs exported at once, peak RSS %.0f MiB over %v scrapes",
		rounds, events, peakQPs, peakRSS/(1<<20), scrapes)
	if peakQPs == 0 || peakQPs >= rounds {
		t.Errorf("at most %v QPs exported at once: want some and fewer than the %d made", peakQPs, rounds)
	}
	for _, name := range []string{"sqscope_send_wrs_total", "sqscope_sq_depth_wrs", "sqscope_diagnosis_occurrences_total"} {
		if mf := mfs[name]; mf != nil && len(mf.Metric) > 0 {
			t.Errorf("%d series of %s left after the grace period", len(mf.Metric), name)
		}
	}
	for _, state := range []string{"live", "ended"} {
		if v, ok := value(mfs, "sqscope_qps", map[string]string{"state": state}); !ok || v != 0 {
			t.Errorf("sqscope_qps{state=%q} = %v after the grace period, want 0", state, v)
		}
	}
	if v, _ := value(mfs, "sqscope_lost_events_total", nil); v != 0 {
		t.Errorf("%v events lost", v)
	}
}

// TestServeHostWide: `serve -a` serves the QPs of a workload started after
// it, by the workload's pid, equal to its ground truth.
func TestServeHostWide(t *testing.T) {
	bpftest.RequireHost(t, probe.Preflight)
	s := serveWith(t, "-a", "--mode", "counters")
	truth := filepath.Join(t.TempDir(), "truth.json")
	w := exec.Command(sqscopeBin(t), "workload", "--qps", "2", "-n", "20000", "--sim-deterministic", "--json-out", truth)
	if out, err := w.CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	pid := fmt.Sprint(w.Process.Pid)
	want := readTruth(t, truth)
	deadline := time.Now().Add(bpftest.Timeout(t, 20*time.Second))
	for {
		body, _ := s.scrape(t, "")
		mfs := series(t, body)
		match := 0
		for _, q := range want {
			got, ok := value(mfs, "sqscope_send_wrs_total", map[string]string{"pid": pid, "qpn": fmt.Sprint(q["qp_num"])})
			if ok && got == q["wrs"].(float64) {
				match++
			}
		}
		if match == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workload's QPs (pid %s) never equal its ground truth %v:\n%s", pid, want, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitFor(t, regexp.MustCompile(`stopped, probes detached`))
	for l := range s.lines { // to the end of its stderr
		s.log.WriteString(l + "\n")
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	// a workload that ran to its end: nothing to warn of
	noWarnings(t, s.log.String())
}
