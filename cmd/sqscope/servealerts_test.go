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
// near-full alerts for that QP only, and none for the rest; and the
// CQ-overrun alert on its fault (an overrun fails no post: the sentinel
// reads it in the QP's memory, where the simulated HCA counts it). The
// counters mode, whose kernel keeps each send queue, fires the same
// overflow, ENOMEM and near-full alerts on the same fault, and the
// CQ-overrun one on its fault.
func TestServeAlertsFire(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	prometheus := bpftest.RequireTool(t, "prometheus", "prometheus")
	// the workloads outlast the longest wait below (scaled to the host)
	run := fmt.Sprint(int(bpftest.Timeout(t, 150*time.Second).Seconds()) + 60)
	faulty := serveWith(t, "--workload", "--", "--qps", "2", "-t", "64", "-Q", "16", "--fault", "never-signal", "--fault-qp", "1",
		"--fault-after", "2", "-D", run, "--rate", "20000")
	healthy := serveWith(t, "--workload", "--", "-Q", "16", "-t", "128", "-D", run, "--rate", "20000")
	overrun := serveWith(t, "--workload", "--", "-Q", "1", "-t", "128", "--cq-depth", "32", "--fault", "cq-overrun", "-n", "2000")
	counted := serveWith(t, "--mode", "counters", "--workload", "--", "--qps", "2", "-t", "64", "-Q", "16", "--fault", "never-signal", "--fault-qp", "1",
		"--fault-after", "2", "-D", run, "--rate", "20000")
	countedOverrun := serveWith(t, "--mode", "counters", "--workload", "--", "-Q", "1", "-t", "128", "--cq-depth", "32", "--fault", "cq-overrun", "-n", "2000")
	query := runPrometheus(t, prometheus, faulty.addr, healthy.addr, overrun.addr, counted.addr, countedOverrun.addr)
	start := time.Now()

	// the QP refused with SQ full, the one the alerts must name
	sqFull := func(instance string) string {
		full := waitProm(t, query, `sqscope_post_enomem_total{cause="sq_full",instance="`+instance+`"} > 0`, func(r []promSample) bool { return len(r) > 0 })
		if len(full) != 1 {
			t.Fatalf("SQ-full refusals on %+v: want one QP of %s", full, instance)
		}
		return full[0].Metric["qpn"]
	}
	qpn, countedQPN := sqFull(faulty.addr), sqFull(counted.addr)
	firing := func(name, instance string) []promSample {
		return waitPromFor(t, query, `ALERTS{alertname="`+name+`",alertstate="firing",instance="`+instance+`"}`,
			func(r []promSample) bool { return len(r) > 0 }, 120*time.Second)
	}
	for _, f := range []struct{ addr, qpn, mode string }{{faulty.addr, qpn, "sentinel"}, {counted.addr, countedQPN, "counters"}} {
		for _, name := range []string{"SQScopeSendQueueOverflow", "SQScopePostENOMEM", "SQScopeSendQueueNearFull"} {
			for _, a := range firing(name, f.addr) {
				if a.Metric["qpn"] != f.qpn {
					t.Errorf("%s mode: %s for %v, want QP %s only", f.mode, name, a.Metric, f.qpn)
				}
			}
			t.Logf("%s mode: %s firing after %v", f.mode, name, time.Since(start).Round(time.Second))
		}
		if r := query(t, `ALERTS{instance="`+f.addr+`",qpn!="`+f.qpn+`"}`); len(r) != 0 {
			t.Errorf("%s mode: alerts on the faulty process's healthy QP: %+v", f.mode, r)
		}
	}
	firing("SQScopeCQOverrunRisk", overrun.addr)
	firing("SQScopeCQOverrunRisk", countedOverrun.addr)
	// nothing else, pending or firing, on the healthy process, nor for the
	// faulty process's other QP
	if r := query(t, `ALERTS{instance="`+healthy.addr+`"}`); len(r) != 0 {
		t.Errorf("alerts on the healthy process: %+v", r)
	}
	// the sentinel's own cost is measured and exported
	if r := query(t, `sqscope_probe_budget_ratio{instance="`+healthy.addr+`"}`); len(r) != 1 || r[0].value() != 0.01 {
		t.Errorf("budget %+v, want the default 1%%", r)
	}
}
