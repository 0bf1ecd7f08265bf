// Package serve runs sqscope as a service: a long-running trace whose
// numbers are exposed on /metrics for Prometheus (its text format, or
// OpenMetrics when the scraper asks for it), with /healthz, bounded
// series under QP churn, and a graceful stop that detaches the probes.
package serve

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/sqscope/sqscope/internal/durflag"
)

// DefaultPort is where serve listens unless told: not a port the exporters
// an RDMA host already runs take (node_exporter 9100, treydock's
// infiniband_exporter 9315, guilbaults' infiniband-exporter 9683,
// rdma_exporter 9879), nor Prometheus' own (9090 to 9094).
const DefaultPort = 9847

// DefaultListen is on localhost: metrics name the host's processes, so
// exposing them to the network is a choice (--listen :9847).
var DefaultListen = net.JoinHostPort("localhost", strconv.Itoa(DefaultPort))

// The command's help: its usage line, what it does, examples.
const (
	Usage = "serve (-a | -p PID | -c CMD | --workload -- FLAGS | -- CMD ARGS...) [flags]"
	About = "Trace in sentinel mode (probes where posts fail, and short sample windows kept within\n" +
		"--budget of the target's CPU; --mode counters or events for every call's totals) and\n" +
		"serve the numbers on /metrics\n" +
		"for Prometheus (text or OpenMetrics), /healthz for supervisors, until SIGTERM or Ctrl-C,\n" +
		"which detach the probes. A QP's series carry its number as qpn in decimal, as\n" +
		"'rdma res show qp' prints it (the live view and reports give it in hex too).\n" +
		"deploy/ holds alerting rules, a Grafana dashboard, a systemd unit and a Kubernetes\n" +
		"DaemonSet."
	Examples = `
EXAMPLES
  sqscope serve -a
        serve the send-queue alerts' metrics of every verbs process on localhost:9847/metrics
  sqscope serve -a --mode counters
        every post counted, at a uprobe trap per call
  sqscope serve -p 4242
        one running process
  sqscope serve --listen :9847 --mode events -c "ib_write_bw -d mlx5_0 -D 3600"
        start a program, trace every call, serve to the network
  curl -s localhost:9847/metrics | promtool check metrics
        what Prometheus scrapes, checked
`
)

// DefaultMaxConnections bounds the connections served at once: Prometheus
// takes one per server scraping, a person a few more.
const DefaultMaxConnections = 64

// Options are serve's own flags (the target's are the tracing commands').
type Options struct {
	Listen         string
	MaxQPs         int
	Grace          time.Duration
	DiagWindow     time.Duration
	MaxConnections int
	idleTimeout    time.Duration // a test's, for idleTimeout
}

// Register adds serve's flags to fs.
func (o *Options) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", DefaultListen, "`HOST:PORT` to serve /metrics and /healthz on (:PORT for every address)")
	fs.IntVar(&o.MaxQPs, "max-qps", 4096, "the `N` QPs given series of their own; past it, a QP's counts go to its process's series with qpn=\"folded\"")
	durflag.Var(fs, &o.Grace, "grace", 5*time.Minute, "keep the series of a destroyed QP, or of a process that exited, for `DURATION`, then drop them")
	durflag.Var(fs, &o.DiagWindow, "diag-window", 5*time.Minute, "sqscope_diagnosis is 1 while the diagnosis occurred within this `DURATION`")
	fs.IntVar(&o.MaxConnections, "max-connections", DefaultMaxConnections, "the `N` HTTP connections served at once; past it a new one replaces the one idle longest, or waits for one to end")
}

// Check validates the options: a bad --listen is said before anything
// starts.
func (o *Options) Check() error {
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT or :PORT", o.Listen)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("--listen %q: bad port %q", o.Listen, port)
	}
	if host != "" && net.ParseIP(host) == nil {
		if _, err := net.LookupHost(host); err != nil {
			return fmt.Errorf("--listen %q: unknown host %q", o.Listen, host)
		}
	}
	switch {
	case o.MaxQPs < 0:
		return errors.New("--max-qps must be 0 or more")
	case o.Grace <= 0:
		return errors.New("--grace must be positive")
	case o.DiagWindow <= 0:
		return errors.New("--diag-window must be positive")
	case o.MaxConnections < 1:
		return errors.New("--max-connections must be 1 or more")
	}
	return nil
}
