package serve

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sqscope/sqscope/internal/bpftest"
)

const deployDir = "../deploy"

// metricNames are the names the collector (and the process collector
// beside it) exports.
func metricNames() map[string]bool {
	descs := make(chan *prometheus.Desc, 100)
	go func() {
		NewCollector(testOpts).Describe(descs)
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}).Describe(descs)
		close(descs)
	}()
	names := map[string]bool{}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	return names
}

var metricRef = regexp.MustCompile(`\b(sqscope|process)_[a-z_]+\b`)

// TestDeployNamesExist: every expression of the dashboard and of the
// alerting rules names only metrics sqscope serve exports.
func TestDeployNamesExist(t *testing.T) {
	names := metricNames()
	if !names["sqscope_send_wrs_total"] || !names["process_resident_memory_bytes"] {
		t.Fatalf("the collectors' names were not read: %v", names)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct{ List []struct{ Query any } }
	}
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "sqscope-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	exprs := map[string]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs["dashboard panel "+p.Title+": "+tg.Expr] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs["dashboard variable: "+q] = q
		}
	}
	rules, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "sqscope-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(rules), "\n") {
		if s := strings.TrimSpace(line); !strings.HasPrefix(s, "#") {
			exprs["rules: "+s] = s
		}
	}
	used := map[string]bool{}
	for where, e := range exprs {
		for _, n := range metricRef.FindAllString(e, -1) {
			used[n] = true
			if !names[n] {
				t.Errorf("%s: no metric %s", where, n)
			}
		}
	}
	// the dashboard and rules use the main metrics
	for _, n := range []string{"sqscope_send_wrs_total", "sqscope_doorbells_total", "sqscope_sq_outstanding_wrs", "sqscope_sq_depth_wrs",
		"sqscope_post_enomem_total", "sqscope_diagnosis", "sqscope_lost_events_total", "sqscope_cpu_seconds_total"} {
		if !used[n] {
			t.Errorf("%s is in neither the dashboard nor the rules", n)
		}
	}
	var all []string
	for n := range used {
		all = append(all, n)
	}
	sort.Strings(all)
	t.Logf("metrics used: %s", strings.Join(all, " "))
}

// TestRules checks the alerting rules with promtool and runs their unit
// tests.
func TestRules(t *testing.T) {
	promtool := bpftest.RequireTool(t, "promtool", "prometheus")
	dir := filepath.Join(deployDir, "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "sqscope-rules.yml"},
		{"test", "rules", "sqscope-rules.test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
