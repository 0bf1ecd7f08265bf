package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// A workload that posts through the simulated HCA's direct path, as
// direct-verbs applications do (its WQEs written without ibv_post_send):
// traced in events mode, its QP is said to have its posts not traced,
// with its completions exact and no send figure shown as 0; in sentinel
// mode, the counters read from its memory still count every WR it posted.
func TestDirectVerbsPostsNotTraced(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	out, truth := traceWorkload(t, "--api direct -Q 16 -n 4000") // events mode
	if len(out.QPs) != 1 || len(truth) != 1 {
		t.Fatalf("QPs %v, truth %v: want one", out.QPs, truth)
	}
	q, w := out.QPs[0], truth[0]
	if q["posts_not_traced"] != true || q["cqes_polled"] != w["cqes_polled"] || w["wrs"] != 4000.0 {
		t.Errorf("QP: posts not traced %v, CQEs %v; the simulated HCA: %v WRs, %v CQEs polled", q["posts_not_traced"], q["cqes_polled"], w["wrs"], w["cqes_polled"])
	}
	for _, k := range []string{"wrs", "post_calls", "doorbells", "outstanding", "occupancy"} {
		if v, ok := q[k]; ok {
			t.Errorf("%s = %v of a QP whose posts were not seen", k, v)
		}
	}
	if len(out.Diagnoses) != 1 || out.Diagnoses[0].Kind != "posts_not_traced" || out.Diagnoses[0].QPNum != w["qp_num"] {
		t.Errorf("diagnoses %+v: want posts_not_traced on QP %v alone", out.Diagnoses, w["qp_num"])
	}

	// paced, so that the reads (every 0.1 s) see it run
	sout, struth := traceSentinelWith(t, "--sample-every 0 --budget 0", "--api direct -Q 16 -n 60000 --rate 50000")
	if len(sout.QPs) != 1 || len(struth) != 1 {
		t.Fatalf("sentinel: QPs %v, truth %v: want one", sout.QPs, struth)
	}
	mem, _ := sout.QPs[0]["memory"].(map[string]any)
	all := struth[0]["wrs"].(float64)
	if mem == nil || mem["samples"].(float64) < 3 || mem["posted"].(float64) > all || mem["posted"].(float64) < all/2 || len(sout.Diagnoses) != 0 {
		t.Errorf("sentinel: memory %v, diagnoses %+v; want most of the %v WRs posted read, nothing diagnosed", mem, sout.Diagnoses, all)
	}
}

// A process whose executable imports mlx5dv's direct-verbs functions is
// said to, with the object and the functions, in the trace's text and
// JSON (a probe record that could not be placed); one that does not is
// not.
func TestDirectVerbsImportsSaid(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	cc := bpftest.RequireTool(t, "cc", "gcc")
	dir := t.TempDir()
	build := func(name string, flags ...string) string {
		bin := filepath.Join(dir, name)
		sim, _ := filepath.Glob("../../verbs/sim*.c")
		args := append(append([]string{"-O2", "-Wall", "-pthread", "-I../../verbs", "-o", bin}, flags...), "testdata/direct/dv.c")
		args = append(append(args, sim...), "-lmlx5", "-libverbs")
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("cc: %v\n%s", err, out)
		}
		return bin
	}
	for _, c := range []struct {
		name   string
		flags  []string
		direct bool
	}{{"dv", []string{"-DDIRECT_VERBS"}, true}, {"plain", nil, false}} {
		bin := build(c.name, c.flags...)
		// the program waits for a signal: it runs while the trace does
		// (the look at its objects is made when its QP's create is
		// read), until the trace's end interrupts it
		var stdout, stderr bytes.Buffer
		d := bpftest.Timeout(t, 500*time.Millisecond)
		cmd := exec.Command(sqscopeBin(t), "trace", "--json", "-D", d.String(), "-c", bin)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("trace -c %s: %v\n%s", c.name, err, stderr.String())
		}
		var out struct {
			QPs    []map[string]any `json:"qps"`
			Probes []struct{ Func, Path, How, Err string }
		}
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("trace JSON: %v\n%s", err, stdout.String())
		}
		var said []string
		for _, p := range out.Probes {
			if p.Func == "direct_verbs" {
				said = append(said, p.Path+": "+p.Err)
			}
		}
		switch {
		case len(out.QPs) != 1 || out.QPs[0]["wrs"] != 16.0:
			t.Errorf("%s: QPs %v: want one with its 16 WRs traced", c.name, out.QPs)
		case c.direct && (len(said) != 1 || !strings.HasPrefix(said[0], bin+": imports mlx5dv's mlx5dv_init_obj")):
			t.Errorf("%s: direct verbs said %q: want its executable importing mlx5dv_init_obj\n%s", c.name, said, stderr.String())
		case !c.direct && len(said) != 0:
			t.Errorf("%s: direct verbs said %q of a program without them", c.name, said)
		}
	}
}
