package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sqscope/sqscope/session"
)

// Server is the HTTP side: /metrics, /healthz and an index.
type Server struct {
	C   *Collector
	ln  net.Listener
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
	s := &Server{C: NewCollector(o), ln: ln, health: "attaching the probes"}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.C, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		EnableOpenMetrics:   true,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "sqscope serve: /metrics (Prometheus text or OpenMetrics), /healthz")
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr is the address bound (the port chosen, for :0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

func (s *Server) setHealth(ok bool, msg string) {
	s.mu.Lock()
	s.ok, s.health = ok, msg
	s.mu.Unlock()
}

// healthz answers 200 while the trace runs, 503 with the reason while the
// probes are being attached or after the trace ended.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	ok, msg := s.ok, s.health
	s.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, msg)
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
	srv, err := Listen(o)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	sess, err := start() // scrapes are answered meanwhile
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "sqscope: serving http://%s/metrics, tracing %s\n", srv.Addr(), sess.Target())
	srv.C.Attach(sess.Analyzer(), sess.PID())
	srv.setHealth(true, "tracing "+sess.Target())

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
