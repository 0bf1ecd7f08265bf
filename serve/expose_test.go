package serve

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sqscope/sqscope/ibv"
)

// get scrapes h with the Accept and Accept-Encoding headers given and
// returns the status, the content type and the body, gunzipped.
func get(t *testing.T, h http.Handler, accept, encoding string) (int, string, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("gunzip: %v", err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("gunzip: %v", err)
		}
	}
	return rec.Code, rec.Header().Get("Content-Type"), body
}

// TestExposerMatchesClientGolang checks that the text formats written by
// the exposer are, byte for byte, what client_golang writes for the same
// collector (with families of other collectors merged by name before and
// after the collector's), in both formats, compressed or not.
func TestExposerMatchesClientGolang(t *testing.T) {
	scenarios := []struct {
		name  string
		comm  string
		opts  Options
		build func(e *events)
	}{
		{"attaching: no analyzer yet", "app", testOpts, nil},
		{"QPs, an error, a diagnosis", "app", testOpts, func(e *events) {
			for q := range uint32(12) { // numbers whose strings sort apart from their values
				e.create(q*7+1, 16)
				e.post(q*7+1, int(q)+1, 2, 0)
			}
			e.post(1, 20, 0, 0)
			e.post(1, 1, 0, int32(ibv.ENOMEM))
			e.post(8, 1, 0, int32(ibv.EINVAL))
		}},
		{"folded past --max-qps, a comm to escape", `a"b\c`, Options{MaxQPs: 3, Grace: time.Minute, DiagWindow: time.Minute}, func(e *events) {
			for q := range uint32(6) {
				e.create(q+1, 8)
				e.post(q+1, 3, 1, 0)
			}
			e.destroy(2)
		}},
		{"counters mode", "app", testOpts, func(e *events) {
			e.create(3, 64)
			e.counts(3, 100)
		}},
	}
	formats := []struct{ name, accept, encoding string }{
		{"text", "text/plain;version=0.0.4", ""},
		{"no Accept", "", ""},
		{"OpenMetrics", "application/openmetrics-text;version=1.0.0", ""},
		{"OpenMetrics gzip", "application/openmetrics-text;version=1.0.0,text/plain;q=0.5", "gzip, deflate"},
		{"text gzip", "text/plain", "gzip"},
	}
	for _, sc := range scenarios {
		f := newFixture(sc.opts)
		f.c.ch.comm = func(uint32) string { return sc.comm }
		f.c.cpu = func() time.Duration { return 1500 * time.Millisecond }
		if sc.build == nil {
			f.c = NewCollector(sc.opts)
			f.c.cpu = func() time.Duration { return 0 }
		} else {
			var e events
			sc.build(&e)
			f.an.IngestAll(e.evs)
		}
		before := prometheus.NewGauge(prometheus.GaugeOpts{Name: "process_x", Help: "before sqscope_*"})
		after := prometheus.NewCounter(prometheus.CounterOpts{Name: "zz_total", Help: "after sqscope_*"})
		before.Set(2.5)
		after.Add(3)
		own := prometheus.NewRegistry()
		own.MustRegister(before, after)
		full := prometheus.NewPedanticRegistry()
		full.MustRegister(f.c, before, after)
		ref := promhttp.HandlerFor(full, promhttp.HandlerOpts{EnableOpenMetrics: true})
		h := newMetricsHandler(f.c, own, full)
		for _, ft := range formats {
			t.Run(sc.name+"/"+ft.name, func(t *testing.T) {
				for range 2 { // the second scrape reuses the first's buffers
					code, ctype, got := get(t, h, ft.accept, ft.encoding)
					wcode, wctype, want := get(t, ref, ft.accept, ft.encoding)
					if code != wcode || ctype != wctype {
						t.Fatalf("status %d %q, client_golang %d %q", code, ctype, wcode, wctype)
					}
					if !bytes.Contains(want, []byte("\nsqscope_tracing ")) || !bytes.Contains(want, []byte("\nzz_total 3")) ||
						sc.build != nil && !bytes.Contains(want, []byte("\nsqscope_send_wrs_total{")) {
						t.Fatalf("client_golang wrote no sqscope series:\n%s", want)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("exposer wrote:\n%s\nclient_golang wrote:\n%s", got, want)
					}
				}
			})
		}
	}
}

func TestMetricsHandlerProtobuf(t *testing.T) {
	f := newFixture(testOpts)
	var e events
	e.create(1, 8)
	e.post(1, 2, 1, 0)
	f.an.IngestAll(e.evs)
	full := prometheus.NewRegistry()
	full.MustRegister(f.c)
	h := newMetricsHandler(f.c, prometheus.NewRegistry(), full)
	code, ctype, body := get(t, h, "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "")
	if code != http.StatusOK || ctype == "" || !bytes.Contains(body, []byte("sqscope_send_wrs_total")) {
		t.Fatalf("protobuf scrape: status %d, type %q, %d bytes", code, ctype, len(body))
	}
}

func TestAcceptsGzip(t *testing.T) {
	for _, tc := range []struct {
		h    string
		want bool
	}{
		{"", false},
		{"gzip", true},
		{"deflate, gzip;q=1.0, *;q=0.5", true},
		{"GZIP", true},
		{"gzip;q=0", false},
		{"identity", false},
		{"x-gzip2", false},
	} {
		if got := acceptsGzip(tc.h); got != tc.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestAppendValue(t *testing.T) {
	for _, tc := range []struct {
		v        float64
		text, om string
	}{
		{0, "0", "0.0"},
		{1, "1", "1.0"},
		{-1, "-1", "-1.0"},
		{1.5, "1.5", "1.5"},
		{123456789, "1.23456789e+08", "1.23456789e+08"},
		{4096, "4096", "4096.0"},
		{math.NaN(), "NaN", "NaN"},
		{math.Inf(1), "+Inf", "+Inf"},
		{math.Inf(-1), "-Inf", "-Inf"},
	} {
		if got := string(appendValue(nil, tc.v, false)); got != tc.text {
			t.Errorf("text %v: %q, want %q", tc.v, got, tc.text)
		}
		if got := string(appendValue([]byte("x "), tc.v, true)); got != "x "+tc.om {
			t.Errorf("OpenMetrics %v: %q, want %q", tc.v, got, "x "+tc.om)
		}
	}
}
