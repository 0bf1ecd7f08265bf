package serve

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/session"
)

// flightLatest is the newest file of the flight recorder these tests
// fake.
var flightLatest = session.FlightFile{Path: "/var/lib/sqscope/sqscope-flight-20261202T141133.534Z-diagnosis=sq_overflow_unsignaled_run.sqscope",
	Trigger: "diagnosis=sq_overflow_unsignaled_run", Done: time.Unix(1796220694, 250e6)}

// flightFixture is a collector with QPs and a flight recorder whose
// stats are st.
func flightFixture(st *session.FlightStats) *fixture {
	f := newFixture(testOpts)
	var e events
	e.create(1, 64)
	e.post(1, 3, 2, 0)
	f.an.IngestAll(e.evs)
	f.c.attachFlight(func() session.FlightStats { return *st })
	return f
}

// The flight recorder's series: its files by trigger, the newest (none
// before the first), the window's bytes against its bound, the events
// the bound dropped and the triggers absorbed; none without a recorder.
func TestFlightMetrics(t *testing.T) {
	armed := session.FlightStats{Written: map[string]int{}, RingBytes: 3 << 20, MaxBytes: 160 << 20}
	wrote := session.FlightStats{Written: map[string]int{"signal": 2, "diagnosis=sq_overflow_unsignaled_run": 1},
		Latest: flightLatest, Absorbed: 4, Dropped: 12345, RingBytes: 160<<20 - 100, MaxBytes: 160 << 20}
	const latestInfo = "sqscope_flight_latest_recording_info{file=sqscope-flight-20261202T141133.534Z-diagnosis=sq_overflow_unsignaled_run.sqscope,trigger=diagnosis=sq_overflow_unsignaled_run}"
	cases := []struct {
		name string
		st   *session.FlightStats // nil: no flight recorder
		want map[string]float64   // -1: absent
	}{
		{"no flight recorder", nil, map[string]float64{
			"sqscope_flight_window_bytes{}": -1, "sqscope_flight_window_max_bytes{}": -1,
			"sqscope_flight_window_dropped_events_total{}": -1, "sqscope_flight_absorbed_triggers_total{}": -1,
			"sqscope_flight_recordings_total{trigger=signal}": -1, "sqscope_flight_latest_recording_timestamp_seconds{}": -1,
		}},
		{"armed, nothing written", &armed, map[string]float64{
			"sqscope_flight_window_bytes{}": 3 << 20, "sqscope_flight_window_max_bytes{}": 160 << 20,
			"sqscope_flight_window_dropped_events_total{}": 0, "sqscope_flight_absorbed_triggers_total{}": 0,
			"sqscope_flight_recordings_total{trigger=signal}": -1, "sqscope_flight_latest_recording_timestamp_seconds{}": -1,
		}},
		{"files written", &wrote, map[string]float64{
			"sqscope_flight_recordings_total{trigger=signal}":                               2,
			"sqscope_flight_recordings_total{trigger=diagnosis=sq_overflow_unsignaled_run}": 1,
			latestInfo: 1,
			"sqscope_flight_latest_recording_timestamp_seconds{}": 1796220694.25,
			"sqscope_flight_window_bytes{}":                       160<<20 - 100, "sqscope_flight_window_max_bytes{}": 160 << 20,
			"sqscope_flight_window_dropped_events_total{}": 12345, "sqscope_flight_absorbed_triggers_total{}": 4,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(testOpts)
			if tc.st != nil {
				f = flightFixture(tc.st)
			}
			got := scrape(t, f.c)
			n := 0
			for k := range got {
				if strings.HasPrefix(k, "sqscope_flight_latest_recording_info{") {
					n++
				}
			}
			if want := map[bool]int{true: 1}[tc.want[latestInfo] == 1]; n != want {
				t.Errorf("%d latest recording series, want %d", n, want)
			}
			for series, want := range tc.want {
				v, ok := got[series]
				switch {
				case want < 0 && ok:
					t.Errorf("%s = %v, want it absent", series, v)
				case want >= 0 && (!ok || v != want):
					t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
				}
			}
			if probs, err := testutil.CollectAndLint(f.c); err != nil || len(probs) > 0 {
				t.Errorf("lint: %v %+v", err, probs)
			}
		})
	}
}

// The exposer writes the flight recorder's series as client_golang does,
// and promtool finds nothing to say of them.
func TestFlightExposition(t *testing.T) {
	st := session.FlightStats{Written: map[string]int{"signal": 1}, Latest: flightLatest, Absorbed: 1, Dropped: 7,
		RingBytes: 1 << 20, MaxBytes: 64 << 20}
	f := flightFixture(&st)
	f.c.cpu = func() time.Duration { return 1500 * time.Millisecond }
	full := prometheus.NewPedanticRegistry()
	full.MustRegister(f.c)
	ref := promhttp.HandlerFor(full, promhttp.HandlerOpts{EnableOpenMetrics: true})
	h := newMetricsHandler(f.c, prometheus.NewRegistry(), full)
	var text []byte
	for _, accept := range []string{"text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"} {
		_, _, got := get(t, h, accept, "")
		_, _, want := get(t, ref, accept, "")
		if !bytes.Contains(want, []byte("\nsqscope_flight_latest_recording_info{")) || !bytes.Equal(got, want) {
			t.Fatalf("%s: exposer wrote:\n%s\nclient_golang wrote:\n%s", accept, got, want)
		}
		if text == nil {
			text = got
		}
	}
	promtool := bpftest.RequireTool(t, "promtool", "prometheus")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// /healthz keeps its status and first line, and adds one naming the
// newest flight recording once there is one.
func TestHealthzFlight(t *testing.T) {
	s := listening(t, Options{}, 1, 1)
	var mu sync.Mutex // the server reads st while the test changes it
	st := session.FlightStats{Written: map[string]int{}, MaxBytes: 64 << 20}
	s.C.attachFlight(func() session.FlightStats {
		mu.Lock()
		defer mu.Unlock()
		return st
	})
	healthz := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr().String() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := healthz(); code != http.StatusServiceUnavailable || body != "attaching the probes\n" {
		t.Errorf("attaching, nothing written: %d %q", code, body)
	}
	s.setHealth(true, "tracing app")
	if code, body := healthz(); code != http.StatusOK || body != "tracing app\n" {
		t.Errorf("tracing, nothing written: %d %q", code, body)
	}
	mu.Lock()
	st.Latest = flightLatest
	mu.Unlock()
	want := "tracing app\nlatest flight recording: " + flightLatest.Path +
		" (trigger diagnosis=sq_overflow_unsignaled_run, complete 2026-12-02T14:11:34.25Z)\n"
	if code, body := healthz(); code != http.StatusOK || body != want {
		t.Errorf("tracing, a file written: %d %q, want 200 %q", code, body, want)
	}
	s.setHealth(false, "trace ended: the target exited with status 0")
	if code, body := healthz(); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "trace ended: ") ||
		!strings.HasSuffix(body, "\nlatest flight recording: "+flightLatest.Path+" (trigger diagnosis=sq_overflow_unsignaled_run, complete 2026-12-02T14:11:34.25Z)\n") {
		t.Errorf("ended, a file written: %d %q", code, body)
	}
}
