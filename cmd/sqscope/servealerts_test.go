package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// TestServeAlertsFire: serve in its default mode, as the shipped systemd
// unit and DaemonSet run it, on a process whose second QP stops
// signaling after 2 s of healthy traffic and on a healthy process; a real
// Prometheus with the shipped rules fires the overflow, ENOMEM and
// near-full alerts for that QP only, and none for the rest. The CQ-overrun
// alert needs the completions traced (events mode; the sentinel sees it
// only when a window does): it fires on its fault with --mode events.
func TestServeAlertsFire(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	prometheus := bpftest.RequireTool(t, "prometheus", "prometheus")
	// the workloads outlast the longest wait below (scaled to the host)
	run := fmt.Sprint(int(bpftest.Timeout(t, 150*time.Second).Seconds()) + 60)
	faulty := serveWith(t, "--workload", "--", "--qps", "2", "-t", "64", "-Q", "16", "--fault", "never-signal", "--fault-qp", "1",
		"--fault-after", "2", "-D", run, "--rate", "20000")
	healthy := serveWith(t, "--workload", "--", "-Q", "16", "-t", "128", "-D", run, "--rate", "20000")
	overrun := serveWith(t, "--mode", "events", "--workload", "--", "-Q", "1", "-t", "128", "--cq-depth", "32", "--fault", "cq-overrun", "-n", "2000")
	query := runPrometheus(t, prometheus, faulty.addr, healthy.addr, overrun.addr)
	start := time.Now()

	// the QP refused with SQ full, the one the alerts must name
	full := waitProm(t, query, `sqscope_post_enomem_total{cause="sq_full"} > 0`, func(r []promSample) bool { return len(r) > 0 })
	qpn := full[0].Metric["qpn"]
	if len(full) != 1 || full[0].Metric["instance"] != faulty.addr {
		t.Fatalf("SQ-full refusals on %+v: want one QP of %s", full, faulty.addr)
	}
	firing := func(name, instance string) []promSample {
		return waitPromFor(t, query, `ALERTS{alertname="`+name+`",alertstate="firing",instance="`+instance+`"}`,
			func(r []promSample) bool { return len(r) > 0 }, 120*time.Second)
	}
	for _, name := range []string{"SQScopeSendQueueOverflow", "SQScopePostENOMEM", "SQScopeSendQueueNearFull"} {
		for _, a := range firing(name, faulty.addr) {
			if a.Metric["qpn"] != qpn {
				t.Errorf("%s for %v, want QP %s only", name, a.Metric, qpn)
			}
		}
		t.Logf("%s firing after %v", name, time.Since(start).Round(time.Second))
	}
	firing("SQScopeCQOverrunRisk", overrun.addr)
	// nothing else, pending or firing, on the healthy process, nor for the
	// faulty process's other QP
	if r := query(t, `ALERTS{instance="`+healthy.addr+`"}`); len(r) != 0 {
		t.Errorf("alerts on the healthy process: %+v", r)
	}
	if r := query(t, `ALERTS{instance="`+faulty.addr+`",qpn!="`+qpn+`"}`); len(r) != 0 {
		t.Errorf("alerts on the faulty process's healthy QP: %+v", r)
	}
	// the sentinel's own cost is measured and exported
	if r := query(t, `sqscope_probe_budget_ratio{instance="`+healthy.addr+`"}`); len(r) != 1 || r[0].value() != 0.01 {
		t.Errorf("budget %+v, want the default 1%%", r)
	}
}
