package serve

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/bpftest"
)

// listening serves an analyzer of qps QPs (events mode, windows of
// history each) on 127.0.0.1, as serve.Run does.
func listening(t *testing.T, o Options, qps, windows int) *Server {
	t.Helper()
	o.Listen = "127.0.0.1:0"
	o.MaxQPs, o.Grace, o.DiagWindow = max(o.MaxQPs, qps), time.Minute, time.Minute
	an := analyzer.New(analyzer.Options{})
	var e events
	for q := range uint32(qps) {
		e.create(q+1, 256)
	}
	for range windows {
		for q := range uint32(qps) {
			e.post(q+1, 4, 2, 0)
		}
		e.t += uint64(analyzer.DefaultHistoryStepNS)
		an.IngestAll(e.evs)
		e.evs = e.evs[:0]
	}
	s, err := Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	s.C.Attach(an, 0)
	return s
}

// Only GET and HEAD are answered; every other method is 405 with the
// methods allowed, on every path.
func TestReadOnlyMethods(t *testing.T) {
	s := listening(t, Options{}, 2, 1)
	for _, path := range []string{"/metrics", "/healthz", "/"} {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"} {
			req, err := http.NewRequest(m, "http://"+s.Addr().String()+path, strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", m, path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusOK
			if path == "/healthz" {
				want = http.StatusServiceUnavailable // attaching, in this test
			}
			switch m {
			case "GET":
				if resp.StatusCode != want || len(body) == 0 {
					t.Errorf("GET %s: %d, %d bytes", path, resp.StatusCode, len(body))
				}
			case "HEAD":
				if resp.StatusCode != want || len(body) != 0 {
					t.Errorf("HEAD %s: %d, %d bytes", path, resp.StatusCode, len(body))
				}
			default:
				if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
					t.Errorf("%s %s: %d, Allow %q; want 405 and GET, HEAD", m, path, resp.StatusCode, resp.Header.Get("Allow"))
				}
			}
		}
	}
}

// dial opens n connections to s, sends each one request (keep-alive) and
// reads its answer, leaving them idle; it returns them with their readers.
func dial(t *testing.T, s *Server, n int) ([]net.Conn, []*bufio.Reader) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	readers := make([]*bufio.Reader, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		r := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		readers = append(readers, r)
	}
	return conns, readers
}

// An idle keep-alive connection is closed after the idle timeout.
func TestIdleConnectionsClosed(t *testing.T) {
	s := listening(t, Options{idleTimeout: 300 * time.Millisecond}, 2, 1)
	conns, readers := dial(t, s, 50)
	if n := s.ln.Open(); n != 50 {
		t.Fatalf("%d connections open, want the 50 idle ones", n)
	}
	start := time.Now()
	for i, c := range conns {
		c.SetReadDeadline(start.Add(3 * time.Second))
		if _, err := readers[i].ReadByte(); err != io.EOF {
			t.Fatalf("idle connection %d: read %v, want EOF (closed by the server)", i, err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("idle connections closed after %v, want about 300 ms", d)
	}
	for deadline := time.Now().Add(time.Second); s.ln.Open() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.ln.Open(); n != 0 {
		t.Errorf("%d connections still counted open", n)
	}
}

// openFDs is how many descriptors the process holds.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// 900 idle keep-alive connections hold no more than --max-connections of
// sqscope's descriptors, and a scrape still gets in: it takes the place
// of the one idle longest.
func TestConnectionBound(t *testing.T) {
	const max, n = 16, 900
	s := listening(t, Options{MaxConnections: max}, 2, 1)
	before := openFDs(t)
	conns, _ := dial(t, s, n)
	if open := s.ln.Open(); open > max {
		t.Errorf("%d connections open, over --max-connections %d", open, max)
	}
	// the test holds the client ends: the server's are the rest
	if fds := openFDs(t) - before - len(conns); fds > max {
		t.Errorf("the server holds %d more descriptors with %d idle connections, want at most %d", fds, n, max)
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + s.Addr().String() + "/metrics")
	if err != nil {
		t.Fatalf("a scrape past %d idle connections: %v", n, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "sqscope_send_wrs_total") {
		t.Errorf("a scrape past %d idle connections: %d\n%.200s", n, resp.StatusCode, body)
	}
}

// counting counts the renders: each one gathers own's families once.
type counting struct{ n atomic.Int64 }

func (c *counting) Gather() ([]*dto.MetricFamily, error) {
	c.n.Add(1)
	return nil, nil
}

// Scrapes that come together share one render and one body; a render
// older than shareFor is not shared.
func TestScrapesShareARender(t *testing.T) {
	f := newFixture(testOpts)
	var e events
	for q := range uint32(4) {
		e.create(q+1, 64)
		e.post(q+1, 8, 2, 0)
	}
	f.an.IngestAll(e.evs)
	var own counting
	full := prometheus.NewRegistry()
	full.MustRegister(f.c)
	h := newMetricsHandler(f.c, &own, full)
	now := time.Unix(1e9, 0)
	var mu sync.Mutex
	h.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	scrapeAll := func(n int) map[string]int {
		bodies := map[string]int{}
		var bmu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				enc := []string{"", "gzip"}[i%2]
				code, _, body := get(t, h, promAccept, enc)
				if code != http.StatusOK {
					t.Errorf("scrape: %d", code)
				}
				bmu.Lock()
				bodies[string(body)]++
				bmu.Unlock()
			})
		}
		wg.Wait()
		return bodies
	}
	if bodies := scrapeAll(100); len(bodies) != 1 || own.n.Load() != 1 {
		t.Errorf("100 scrapes together: %d different bodies, %d renders; want one", len(bodies), own.n.Load())
	}
	mu.Lock()
	now = now.Add(shareFor)
	mu.Unlock()
	if scrapeAll(10); own.n.Load() != 2 {
		t.Errorf("%d renders after shareFor, want a second one", own.n.Load())
	}
}

// tail keeps of what is written to it its size, its first KiB and its
// last bytes: a scraper of the flood checks a body without holding it.
type tail struct {
	n          int
	head, last []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.n += len(p)
	if len(w.head) < 1024 {
		w.head = append(w.head, p[:min(len(p), 1024-len(w.head))]...)
	}
	w.last = append(w.last, p[max(0, len(p)-16):]...)
	w.last = w.last[max(0, len(w.last)-16):]
	return len(p), nil
}

// rss is the process's resident memory in MiB (VmRSS).
func rss(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// scrapeOM scrapes url as Prometheus does (OpenMetrics, gzip unless not
// gz) and checks that the body is a whole exposition, without holding it.
func scrapeOM(ctx context.Context, c *http.Client, url string, gz bool) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", promAccept)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if r, err = gzip.NewReader(resp.Body); err != nil {
			return 0, err
		}
	}
	var b tail
	if _, err := io.Copy(&b, r); err != nil {
		return 0, err
	}
	if resp.StatusCode == http.StatusOK && (!bytes.HasPrefix(b.head, []byte("# HELP ")) || !bytes.HasSuffix(b.last, []byte("# EOF\n"))) {
		return 0, fmt.Errorf("a body of %d bytes that is not all of an OpenMetrics exposition", b.n)
	}
	return resp.StatusCode, nil
}

// The flood of TestScrapeFlood, run in a process of its own so that the
// served process's memory is the server's: SQSCOPE_FLOOD_URL scraped by
// 200 scrapers, each on its own keep-alive connection, half of them
// asking for gzip, as fast as they are answered, for SQSCOPE_FLOOD_FOR.
func TestFloodProcess(t *testing.T) {
	url := os.Getenv("SQSCOPE_FLOOD_URL")
	d, err := time.ParseDuration(os.Getenv("SQSCOPE_FLOOD_FOR"))
	if url == "" || err != nil {
		t.Skip("the flood TestScrapeFlood runs in a process of its own")
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var answered, refused, failed atomic.Int64
	var errs sync.Map // the first of each error
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
			defer c.CloseIdleConnections()
			for ctx.Err() == nil {
				code, err := scrapeOM(ctx, c, url, i%2 == 0)
				switch {
				case err != nil && ctx.Err() == nil:
					failed.Add(1)
					errs.LoadOrStore(err.Error(), true)
				case code == http.StatusOK:
					answered.Add(1)
				case code != 0:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	errs.Range(func(k, _ any) bool {
		fmt.Println("flood error:", k)
		return true
	})
	fmt.Printf("flood: %d answered, %d refused, %d failed\n", answered.Load(), refused.Load(), failed.Load())
}

// A flood of 200 scrapers keeps the served process's resident memory
// under the README's 200 MiB, answers every scrape, and a Prometheus
// scraping meanwhile (every 100 ms, with its default timeout of 10 s) has
// every scrape answered.
func TestScrapeFlood(t *testing.T) {
	for _, tc := range []struct {
		name         string
		qps, windows int
	}{
		{"16 QPs", 16, 10},
		{"4,096 QPs", 4096, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.qps > 16 {
				t.Skip("-short: 4,096 QPs take seconds to build")
			}
			softMemoryLimit()
			t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
			s := listening(t, Options{}, tc.qps, tc.windows)
			runtime.GC()
			debug.FreeOSMemory()
			base := rss(t)
			url := "http://" + s.Addr().String() + "/metrics"
			// 2 s on a quiet host; longer on a busy one, where a render of
			// 4,096 QPs alone can take that long
			floodFor := min(20*time.Second, time.Duration(float64(2*time.Second)/bpftest.CPUShare(200*time.Millisecond)))
			flood := exec.Command(os.Args[0], "-test.run=^TestFloodProcess$")
			flood.Env = append(os.Environ(), "SQSCOPE_FLOOD_URL="+url, "SQSCOPE_FLOOD_FOR="+floodFor.String())
			var floodOut bytes.Buffer
			flood.Stdout, flood.Stderr = &floodOut, &floodOut
			if err := flood.Start(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), floodFor)
			defer cancel()
			var wg sync.WaitGroup
			var promOK int
			var promErrs []string
			wg.Go(func() {
				c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
				for ctx.Err() == nil {
					code, err := scrapeOM(context.Background(), c, url, true)
					if code == http.StatusOK {
						promOK++
					} else {
						promErrs = append(promErrs, fmt.Sprint(code, err))
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
			peak := 0.0
			for ctx.Err() == nil {
				peak = max(peak, rss(t))
				time.Sleep(20 * time.Millisecond)
			}
			wg.Wait()
			if err := flood.Wait(); err != nil {
				t.Fatalf("the flood: %v\n%s", err, floodOut.String())
			}
			var answered, refused, failed int
			line := floodOut.String()
			if i := strings.Index(line, "flood: "); i < 0 {
				t.Fatalf("the flood said nothing of its scrapes:\n%s", line)
			} else if _, err := fmt.Sscanf(line[i:], "flood: %d answered, %d refused, %d failed", &answered, &refused, &failed); err != nil {
				t.Fatalf("the flood's line: %v\n%s", err, line)
			}
			t.Logf("%d QPs: RSS %.0f MiB before the flood, %.0f MiB at its peak; the flood %d scrapes answered, %d refused, %d failed; Prometheus %d answered, %d not",
				tc.qps, base, peak, answered, refused, failed, promOK, len(promErrs))
			if failed > 0 {
				t.Logf("the flood's output:\n%s", line)
			}
			if peak >= 200 {
				t.Errorf("resident memory %.0f MiB under the flood, over the README's 200 MiB", peak)
			}
			if len(promErrs) != 0 || promOK == 0 {
				t.Errorf("Prometheus: %d scrapes answered, %d not: %v", promOK, len(promErrs), promErrs)
			}
			// Past --max-connections a new connection replaces the one
			// idle longest: a flood client that reuses such a connection
			// just as it is closed sees it end (the keep-alive race every
			// HTTP server with a connection cap has). None is refused, and
			// such ends stay rare.
			if refused != 0 || answered == 0 || failed*100 > answered {
				t.Errorf("the flood: %d scrapes answered, %d refused, %d failed (more than 1%%)", answered, refused, failed)
			}
		})
	}
}

// A connection whose next request waits to be read is not the one a new
// connection replaces: closing it would lose the request.
func TestRequestWaiting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if requestWaiting(server) {
		t.Fatal("a request waits on a connection nothing was sent on")
	}
	fmt.Fprintf(client, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	deadline := time.Now().Add(2 * time.Second)
	for !requestWaiting(server) {
		if time.Now().After(deadline) {
			t.Fatal("the request sent is not seen waiting")
		}
		time.Sleep(time.Millisecond)
	}
	l := newConnLimit(ln, 1)
	lc := &limitedConn{Conn: server, l: l}
	l.idle[lc] = idleSince{at: time.Now().Add(-time.Hour)}
	if v := l.longestIdle(time.Now()); v != nil {
		t.Error("the connection with a request waiting would be replaced")
	}
}
