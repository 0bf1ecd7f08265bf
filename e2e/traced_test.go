package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// How a traced command reads its target: `sqscope trace --json`, or
// `sqscope record` followed by `sqscope report --json` of the recording.
const (
	viaTrace  = "trace"
	viaRecord = "record"
)

// truthFile is where the traced workload writes its own JSON (--json-out),
// in the command's directory.
const truthFile = "truth.json"

// exactFields are the counters the trace must rebuild exactly: the ones the
// application side knows on a real device (the workload leaves the
// HCA-only counters out there).
var exactFields = []string{
	"wrs", "inline", "signaled", "post_calls", "doorbells", "cqes_polled",
	"enomem_sq_full", "enomem_inline", "enomem_sge", "einval",
	"peak_outstanding", "max_send_wr", "max_inline_data",
}

// excerptFields are shown, with exactFields, when a trace disagrees.
var excerptFields = []string{
	"qp_num", "qp_type", "caps_known", "signal_interval_typical", "wr_api_calls",
	"enomem_unknown", "other_errors", "cqe_errors", "wrs_beyond_model", "unmatched_cqes", "post_recvs",
}

// dataPathFuncs are the probes that must come from the provider's ops
// table, never from a symbol: librxe is stripped.
var dataPathFuncs = []string{"post_send", "poll_cq", "post_recv", "wr_start", "wr_complete", "wr_abort",
	"start_poll", "next_poll", "end_poll"}

// snapshot is the part of `sqscope trace --json` and `sqscope report
// --json` the checks read; QPs stay maps to be compared field by field.
type snapshot struct {
	Recording *struct {
		Target   string `json:"target"`
		Complete bool   `json:"complete"`
	} `json:"recording"`
	Lost      uint64           `json:"lost_events"`
	QPs       []map[string]any `json:"qps"`
	Probes    []probeJSON      `json:"probes"`
	Diagnoses []struct {
		Kind     string            `json:"kind"`
		Severity string            `json:"severity"`
		QPNum    uint32            `json:"qp_num"`
		Count    uint64            `json:"count"`
		Evidence map[string]uint64 `json:"evidence"`
		Message  string            `json:"message"`
		Fix      string            `json:"fix"`
	} `json:"diagnoses"`
	traceQueues
}

type probeJSON struct {
	PID    uint32
	Func   string
	Path   string
	Offset uint64
	How    string
	Err    string
}

// parseSnapshot reads the tracer's JSON object from out, which may start
// with the target's own text output.
func parseSnapshot(out string) (*snapshot, error) {
	i := 0
	if !strings.HasPrefix(out, "{") {
		i = strings.Index(out, "\n{")
		if i < 0 {
			return nil, fmt.Errorf("no JSON object in the output")
		}
		i++
	}
	var s snapshot
	if err := json.Unmarshal([]byte(out[i:]), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// num reads a JSON number field of a QP object.
func num(q map[string]any, field string) uint64 {
	v, _ := q[field].(float64)
	return uint64(v)
}

// findQP returns the QP with qp_num n.
func (s *snapshot) findQP(n uint64) map[string]any {
	for _, q := range s.QPs {
		if num(q, "qp_num") == n {
			return q
		}
	}
	return nil
}

// excerpt is a QP object cut down to the fields a reader needs.
func excerpt(q map[string]any, extra ...string) string {
	m := map[string]any{}
	for _, f := range slices.Concat(excerptFields, exactFields, extra) {
		if v, ok := q[f]; ok {
			m[f] = v
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// logProbes shows where every probe went and how it was found.
func logProbes(t *testing.T, s *snapshot) {
	t.Helper()
	var b strings.Builder
	for _, p := range s.Probes {
		fmt.Fprintf(&b, "\n  %-24s %s+%#x (%s)", p.Func, p.Path, p.Offset, p.How)
		if p.Err != "" {
			fmt.Fprintf(&b, " NOT ATTACHED: %s", p.Err)
		}
	}
	t.Logf("probes:%s", b.String())
}

// checkProbes requires each of funcs to have been attached through the ops
// table inside librxe, and no data-path probe to have been placed by
// symbol.
func checkProbes(t *testing.T, s *snapshot, funcs ...string) {
	t.Helper()
	for _, f := range funcs {
		found := false
		for _, p := range s.Probes {
			if p.Func != f {
				continue
			}
			found = true
			if p.How != "ops-table" || p.Err != "" || !strings.Contains(filepath.Base(p.Path), "rxe") {
				t.Errorf("probe %s at %s+%#x found by %q (error %q), want by the ops table inside librxe", f, p.Path, p.Offset, p.How, p.Err)
			}
		}
		if !found {
			t.Errorf("no %s probe in the report", f)
		}
	}
	for _, p := range s.Probes {
		if slices.Contains(dataPathFuncs, p.Func) && p.How == "symbol" {
			t.Errorf("data-path probe %s placed by symbol at %s+%#x: librxe is stripped, discovery must use the ops table", p.Func, p.Path, p.Offset)
		}
	}
}

// tracedWorkload traces `sqscope workload -d rxe0` with args and requires
// what the trace rebuilt to equal the workload's application-side truth,
// with 0 lost events and the data path found through rxe's ops table.
func tracedWorkload(name, via, args string) guestCmd {
	wl := "-d rxe0 -x 1 " + args + " --json-out " + truthFile
	sh := "sqscope trace --json --workload -- " + wl
	if via == viaRecord {
		sh = "sqscope record -o run.sqscope --workload -- " + wl + " && sqscope report --json run.sqscope"
	}
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 30 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			s, truth := readTraced(t, r, sh)
			checkTruth(t, args, truth.qps)
			compareTruth(t, sh, s, truth)
			noWarnings(t, r)
			funcs := []string{"post_send", "poll_cq"}
			if strings.Contains(args, "--api wr") {
				funcs = []string{"wr_start", "wr_complete", "poll_cq"}
				if strings.Contains(args, rxeOpcodes) {
					funcs = append(funcs, "wr_send_imm", "wr_rdma_write_imm", "wr_rdma_read", "wr_atomic_cmp_swp", "wr_atomic_fetch_add")
				}
			}
			if strings.Contains(args, "--cq-ex") {
				funcs = append(funcs, "start_poll", "next_poll", "end_poll")
			}
			checkProbes(t, s, funcs...)
			logProbes(t, s)
		},
	}
}

// tracedCounters traces `sqscope workload -d rxe0` in the counters mode
// and requires the kernel's per-QP totals to equal the workload's own
// counts, ENOMEMs (not told apart in this mode) summed over their causes.
func tracedCounters(name, args string) guestCmd {
	wl := "-d rxe0 -x 1 " + args + " --json-out " + truthFile
	sh := "sqscope trace --json --mode counters --workload -- " + wl
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 30 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			s, truth := readTraced(t, r, sh)
			if s.Lost != 0 {
				t.Errorf("%d events lost", s.Lost)
			}
			for _, w := range truth.qps {
				g := s.findQP(uint64(w.QPNum))
				if g == nil || g["counters_only"] != true {
					t.Fatalf("QP %#x: not in the trace as a counters-only QP\ncommand: %s\ntrace: %v", w.QPNum, sh, s.QPs)
				}
				want := map[string]uint64{"wrs": w.WRs, "post_calls": w.PostCalls, "inline": w.Inline,
					"signaled": w.Signaled, "doorbells": w.Doorbells, "einval": w.EINVAL,
					"enomem": w.ENOMEMSQFull + w.ENOMEMInline + w.ENOMEMSGE}
				for f, v := range want {
					if num(g, f) != v {
						t.Errorf("QP %#x %s: counters mode %d, workload %d\ncommand: %s\ntruth: %s", w.QPNum, f, num(g, f), v, sh, truth.raw[w.QPNum])
					}
				}
				t.Logf("QP %#x: counters = workload: wrs %d, post_calls %d, doorbells %d, ENOMEM %d", w.QPNum, w.WRs, w.PostCalls, w.Doorbells, want["enomem"])
			}
		},
	}
}

// workloadTruth is the workload's --json-out, typed and raw per QP.
type workloadTruth struct {
	qps []wlQP
	raw map[uint32]string
}

// readTraced parses a traced command's output and the workload's truth.
func readTraced(t *testing.T, r cmdResult, sh string) (*snapshot, workloadTruth) {
	t.Helper()
	requireExit(t, r, 0)
	s, err := parseSnapshot(r.stdout)
	if err != nil {
		t.Fatalf("%s: tracer JSON: %v\nstdout:\n%s\nstderr:\n%s", sh, err, tail(r.stdout, 40), tail(r.stderr, 20))
	}
	b, err := os.ReadFile(filepath.Join(r.dir, truthFile))
	if err != nil {
		t.Fatalf("%s: the workload's truth: %v", sh, err)
	}
	var truth workloadTruth
	if err := json.Unmarshal(b, &truth.qps); err != nil {
		t.Fatalf("%s: %s: %v\n%s", sh, truthFile, err, b)
	}
	var raws []json.RawMessage
	json.Unmarshal(b, &raws)
	truth.raw = map[uint32]string{}
	for i, q := range truth.qps {
		var c bytes.Buffer
		json.Compact(&c, raws[i])
		truth.raw[q.QPNum] = c.String()
	}
	return s, truth
}

// compareTruth requires every exact field of every workload QP to equal
// what the trace rebuilt, 0 lost events, and the trace's other QPs (the
// peers, which only receive) to have posted nothing. A mismatch shows the
// command, the trace's QP and the truth.
func compareTruth(t *testing.T, sh string, s *snapshot, truth workloadTruth) {
	t.Helper()
	if s.Lost != 0 {
		t.Errorf("%d events lost", s.Lost)
	}
	if s.Recording != nil && !s.Recording.Complete {
		t.Errorf("the recording is incomplete")
	}
	want := map[uint64]bool{}
	for _, w := range truth.qps {
		want[uint64(w.QPNum)] = true
		var m map[string]any
		json.Unmarshal([]byte(truth.raw[w.QPNum]), &m)
		g := s.findQP(uint64(w.QPNum))
		if g == nil {
			t.Errorf("QP %#x of the workload is not in the trace\ncommand: %s\ntruth: %s", w.QPNum, sh, truth.raw[w.QPNum])
			continue
		}
		var diffs []string
		for _, f := range exactFields {
			if _, ok := m[f]; !ok {
				diffs = append(diffs, f+" missing from the truth")
				continue
			}
			if num(g, f) != num(m, f) {
				diffs = append(diffs, fmt.Sprintf("%s: trace %d, workload %d", f, num(g, f), num(m, f)))
			}
		}
		if len(diffs) > 0 {
			t.Errorf("QP %#x: the trace disagrees with the workload (lost events %d):\n  %s\ncommand: %s\ntrace:   %s\ntruth:   %s",
				w.QPNum, s.Lost, strings.Join(diffs, "\n  "), sh, excerpt(g), truth.raw[w.QPNum])
			continue
		}
		t.Logf("QP %#x: trace = workload: wrs %d, inline %d, signaled %d, post_calls %d, cqes_polled %d, enomem_sq_full %d, peak_outstanding %d (%d lost events)",
			w.QPNum, num(g, "wrs"), num(g, "inline"), num(g, "signaled"), num(g, "post_calls"), num(g, "cqes_polled"),
			num(g, "enomem_sq_full"), num(g, "peak_outstanding"), s.Lost)
	}
	for _, q := range s.QPs {
		if want[num(q, "qp_num")] {
			continue
		}
		if num(q, "wrs") != 0 || num(q, "post_calls") != 0 {
			t.Errorf("QP %#x is not the workload's sending QP but posted %d WRs in %d calls\ncommand: %s\ntrace: %s",
				num(q, "qp_num"), num(q, "wrs"), num(q, "post_calls"), sh, excerpt(q))
		}
	}
}

// noWarnings requires a clean trace of a started command to say no
// warning.
func noWarnings(t *testing.T, r cmdResult) {
	t.Helper()
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(l, "sqscope: warning") {
			t.Errorf("a warning on a clean trace: %s", l)
		}
	}
}
