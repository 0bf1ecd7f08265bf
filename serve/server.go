package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sqscope/sqscope/session"
)

// The bounds of a connection: its request's headers must come within
// headerTimeout (and be at most maxHeaderBytes), the whole request within
// readTimeout, the answer be written within scrapeTimeout, and a
// keep-alive connection idle for idleTimeout is closed. Prometheus
// scrapes every 15 s or 1 min: it reconnects after a long interval, which
// costs it nothing.
const (
	headerTimeout  = 5 * time.Second
	readTimeout    = 10 * time.Second
	scrapeTimeout  = 10 * time.Second
	idleTimeout    = 30 * time.Second
	maxHeaderBytes = 16 << 10
)

// Server is the HTTP side: /metrics, /healthz and an index, GET and HEAD
// only, on at most --max-connections connections.
type Server struct {
	C   *Collector
	ln  *connLimit
	srv *http.Server
	mu  sync.Mutex
	// health is what /healthz says, and whether it is healthy
	health string
	ok     bool
}

// Listen binds the address first, so a port in use or an address not of
// this host is said in one line before any target starts.
func Listen(o Options) (*Server, error) {
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			return nil, fmt.Errorf("serve: --listen %s: the port is in use (another sqscope serve, or another exporter?)", o.Listen)
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			return nil, fmt.Errorf("serve: --listen %s: not an address of this host", o.Listen)
		case errors.Is(err, syscall.EACCES):
			return nil, fmt.Errorf("serve: --listen %s: not allowed to bind this port", o.Listen)
		}
		return nil, fmt.Errorf("serve: --listen %s: %w", o.Listen, err)
	}
	s := &Server{C: NewCollector(o), ln: newConnLimit(ln, cmp.Or(o.MaxConnections, DefaultMaxConnections)), health: "attaching the probes"}
	// the process collector's families join the collector's in every
	// format; the text formats are written by metricsHandler, protobuf by
	// client_golang
	own := prometheus.NewRegistry()
	own.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	full := prometheus.NewRegistry()
	full.MustRegister(s.C, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", newMetricsHandler(s.C, own, full))
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "sqscope serve: /metrics (Prometheus text or OpenMetrics), /healthz")
	})
	// a scrape written past scrapeTimeout fails rather than holds a
	// connection (every body is rendered from one snapshot, never waiting
	// on the trace)
	s.srv = &http.Server{Handler: readOnly(mux), ReadHeaderTimeout: headerTimeout, ReadTimeout: readTimeout,
		WriteTimeout: scrapeTimeout, IdleTimeout: cmp.Or(o.idleTimeout, idleTimeout), MaxHeaderBytes: maxHeaderBytes,
		ConnState: s.ln.state}
	go s.srv.Serve(s.ln)
	return s, nil
}

// readOnly answers GET and HEAD only: every other method is 405, with the
// methods allowed.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "sqscope serve answers GET and HEAD only", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Addr is the address bound (the port chosen, for :0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

func (s *Server) setHealth(ok bool, msg string) {
	s.mu.Lock()
	s.ok, s.health = ok, msg
	s.mu.Unlock()
}

// healthz answers 200 while the trace runs, 503 with the reason while the
// probes are being attached or after the trace ended: its first line.
// With a flight recorder that wrote a recording, a second line names the
// newest.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	ok, msg := s.ok, s.health
	s.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, msg)
	if line := s.C.flightHealth(); line != "" {
		fmt.Fprintln(w, line)
	}
}

// Shutdown stops the HTTP server, letting scrapes under way finish.
func (s *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
}

// Run serves o until ctx is done (SIGTERM, SIGINT): it listens, starts the
// trace with start (scrapes are answered while the probes attach), sweeps
// what ended, and at the end detaches the probes before the HTTP server
// stops. A trace that ends first (its target exited) leaves its last
// numbers served, /healthz saying why, until ctx is done; one that ends
// on an error of sqscope's returns it.
func Run(ctx context.Context, o Options, start func() (*session.Session, error), log io.Writer) error {
	softMemoryLimit()
	srv, err := Listen(o)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	sess, err := start() // scrapes are answered meanwhile
	if err != nil {
		return err
	}
	// everything a scrape shows is attached before the line that says
	// the trace is served: a scrape that follows it sees the recorder
	if f := sess.Flight(); f != nil {
		srv.C.AttachFlight(f)
	}
	srv.C.Attach(sess.Analyzer(), sess.PID())
	srv.setHealth(true, "tracing "+sess.Target())
	fmt.Fprintf(log, "sqscope: serving http://%s/metrics, tracing %s\n", srv.Addr(), sess.Target())

	sweepCtx, stopSweep := context.WithCancel(context.Background())
	defer stopSweep()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sweepCtx.Done():
				return
			case <-t.C:
				srv.C.Sweep()
			}
		}
	}()
	runErr := sess.Run(ctx)
	sess.Close() // probes detached before the last scrapes
	srv.C.End()
	why := sess.Analyzer().Snapshot().Ended
	if ctx.Err() != nil || runErr != nil {
		fmt.Fprintf(log, "sqscope: stopped, probes detached (%s)\n", why)
		return runErr
	}
	srv.setHealth(false, "trace ended: "+why)
	fmt.Fprintf(log, "sqscope: the trace ended (%s); serving its last numbers until stopped\n", why)
	<-ctx.Done()
	fmt.Fprintf(log, "sqscope: stopped, probes detached when the trace ended\n")
	return nil
}

// memoryLimit is serve's soft memory limit (GOMEMLIMIT, unless set in the
// environment): a long-running tracer of a host's QPs allocates a
// snapshot per scrape and per sweep, and with the default GOGC its heap
// would grow to twice what it keeps before a collection. Measured with
// 4,096 QPs (BENCHMARKS.md), the heap kept after a collection was 55-84
// MB; the limit lets the collector run earlier rather than let the
// resident memory grow past 200 MiB. At 150 MiB a 200-scraper flood on
// 4,096 QPs peaked at 197-202 MiB resident; at 128 MiB, 180-183 MiB, the
// scrapes answered as fast (TestScrapeFlood).
const memoryLimit = 128 << 20

func softMemoryLimit() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(memoryLimit)
	}
}
