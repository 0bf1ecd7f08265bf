package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

var updateFaults = flag.Bool("update-faults", false, "record the fault-mode recordings anew (needs root) and rewrite their goldens")

// faultRuns are the workload's fault modes (and one QP-setting mistake),
// recorded once and committed under testdata/faults, so the diagnoses of a
// real recording are checked on any machine.
var faultRuns = []struct{ name, flags string }{
	{"never-signal", "-t 128 --fault never-signal -n 1000"},
	{"lazy-poll", "-t 128 -Q 16 --fault lazy-poll=300 -n 2000"},
	{"inline-too-big", "-I 64 --fault inline-too-big -n 200"},
	{"too-many-sge", "--fault too-many-sge -n 200"},
	{"bad-opcode", "--fault bad-opcode -n 200"},
	{"sig-all-with-flags", "-s 64 -I 64 -Q 16 --sig-all -n 1000"},
	{"never-signal-after-healthy", "-s 64 -I 64 -Q 16 -t 128 --fault never-signal --fault-after 0.05 -D 0.2 --rate 20000"},
	{"post-before-rts", "--fault post-before-rts -n 200"},
	{"post-before-rts-wr-api", "--fault post-before-rts --api wr -n 200"},
	{"cq-overrun", "-t 128 -Q 1 --cq-depth 32 --fault cq-overrun -n 2000"},
	{"rq-starve", "-t 64 -Q 8 --fault rq-starve -n 500"},
}

// diagnosisLines renders a report's diagnoses without the times of day
// and process ids that differ between recordings.
func diagnosisLines(t *testing.T, reportJSON []byte) string {
	t.Helper()
	var r struct {
		QPs []struct {
			QPNum        uint32 `json:"qp_num"`
			WRs          uint64 `json:"wrs"`
			ENOMEMSQFull uint64 `json:"enomem_sq_full"`
			ENOMEMInline uint64 `json:"enomem_inline"`
			ENOMEMSGE    uint64 `json:"enomem_sge"`
			EINVAL       uint64 `json:"einval"`
			NotRTS       uint64 `json:"not_rts"`
		} `json:"qps"`
		Diagnoses []struct {
			Kind, Severity, Message, Fix string
			QPNum                        uint32 `json:"qp_num"`
			Count                        uint64
		} `json:"diagnoses"`
	}
	if err := decodeReport(t, reportJSON, &r); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	var b strings.Builder
	for _, q := range r.QPs {
		fmt.Fprintf(&b, "QP %#x: wrs %d, enomem sq_full %d inline %d sge %d, einval %d",
			q.QPNum, q.WRs, q.ENOMEMSQFull, q.ENOMEMInline, q.ENOMEMSGE, q.EINVAL)
		if q.NotRTS > 0 {
			fmt.Fprintf(&b, ", not in RTS %d", q.NotRTS)
		}
		b.WriteString("\n")
	}
	for _, d := range r.Diagnoses {
		fmt.Fprintf(&b, "%s %s QP %#x x%d\n  %s\n  fix: %s\n", strings.ToUpper(d.Severity), d.Kind, d.QPNum, d.Count, d.Message, d.Fix)
	}
	return b.String()
}

func TestFaultRecordingDiagnoses(t *testing.T) {
	bin := sqscopeBin(t)
	for _, fr := range faultRuns {
		t.Run(fr.name, func(t *testing.T) {
			rec := filepath.Join("testdata", "faults", fr.name+".sqscope")
			golden := filepath.Join("testdata", "faults", fr.name+".golden")
			if *updateFaults {
				bpftest.Require(t, probe.Preflight)
				args := append([]string{"record", "-o", rec, "--workload", "--"}, strings.Fields(fr.flags)...)
				args = append(args, "--sim-deterministic")
				if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
					t.Fatalf("record: %v\n%s", err, out)
				}
			}
			var stderr bytes.Buffer
			cmd := exec.Command(bin, "report", "--json", rec)
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("report %s: %v\n%s", rec, err, stderr.String())
			}
			goldenFile(t, golden, diagnosisLines(t, out), *updateFaults,
				"go test ./cmd/sqscope -run TestFaultRecordingDiagnoses -update-faults, as root")
		})
	}
}

// faultGolden compares the diagnoses of a recording with its golden file,
// or rewrites it when update is set; how says how to make it.
func goldenFile(t *testing.T, golden, got string, update bool, how string) {
	t.Helper()
	if update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (%s)", err, how)
	}
	if got != string(want) {
		t.Fatalf("%s changed:\n--- got\n%s--- want\n%s", golden, got, want)
	}
}

var updateGeneric = flag.Bool("update-generic", false, "rewrite the goldens of the fault recordings read as an unknown provider's")

// hiddenLib is the library the simulated HCA's QPs are said to post
// through when its identity is hidden: a provider sqscope has no model of.
const hiddenLib = "/usr/lib/x86_64-linux-gnu/libibverbs/libhidden-rdmav34.so"

// hideSim rewrites what tells the simulated HCA's QPs apart (its sqsim_*
// calls, the probes placed by its symbols) as a provider sqscope has no
// model of would show them.
func hideSim(ev trace.Event) {
	switch e := ev.(type) {
	case *trace.QPCreate:
		if strings.HasPrefix(e.Via, "sqsim_") {
			e.Via = "ibv_create_qp"
		}
		if e.Via != trace.ViaMemory {
			e.Lib = hiddenLib
		}
	case *trace.Attach:
		if e.How == trace.HowSimSymbol {
			e.How, e.Path = "symbol", hiddenLib
		}
	}
}

// readFaultRecording reads a recording into an analyzer, each event
// rewritten by edit first when it is not nil, and returns its JSON report.
func readFaultRecording(t *testing.T, path string, edit func(trace.Event)) []byte {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := analyzer.New(analyzer.Options{BF: analyzer.BFFromEnv(r.Info().Env), Clock: r.Info().Anchor()})
	if _, err := session.ReadAll(context.Background(), r, func(ev trace.Event) {
		if edit != nil {
			edit(ev)
		}
		a.Ingest(ev)
	}); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	var b bytes.Buffer
	if err := report.WriteJSON(&b, a.Snapshot()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The simulated HCA's fault recordings, read as a provider sqscope has no
// model of: the generic model gives each failed post the cause the mlx5
// model gives it, from the QP's caps alone, each marked inferred.
func TestFaultRecordingsGeneric(t *testing.T) {
	type qpCauses struct {
		QPNum        uint32 `json:"qp_num"`
		Provider     string `json:"provider"`
		CauseBasis   string `json:"cause_basis"`
		ENOMEMSQFull uint64 `json:"enomem_sq_full"`
		ENOMEMInline uint64 `json:"enomem_inline"`
		ENOMEMSGE    uint64 `json:"enomem_sge"`
		NotRTS       uint64 `json:"not_rts"`
		EINVAL       uint64 `json:"einval"`
	}
	type report struct {
		QPs       []qpCauses `json:"qps"`
		Diagnoses []struct {
			Kind       string `json:"kind"`
			CauseBasis string `json:"cause_basis"`
		} `json:"diagnoses"`
	}
	inferredKinds := map[string]bool{"sq_overflow_inferred": true, "inline_too_big": true, "too_many_sge": true, "post_qp_not_rts": true}
	for _, fr := range faultRuns {
		t.Run(fr.name, func(t *testing.T) {
			rec := filepath.Join("testdata", "faults", fr.name+".sqscope")
			var mlx5, generic report
			mlx5JSON, genericJSON := readFaultRecording(t, rec, nil), readFaultRecording(t, rec, hideSim)
			if err := decodeReport(t, mlx5JSON, &mlx5); err != nil {
				t.Fatal(err)
			}
			if err := decodeReport(t, genericJSON, &generic); err != nil {
				t.Fatal(err)
			}
			if len(mlx5.QPs) != len(generic.QPs) {
				t.Fatalf("%d QPs as the simulator's, %d hidden", len(mlx5.QPs), len(generic.QPs))
			}
			for i, g := range generic.QPs {
				m := mlx5.QPs[i]
				if g.Provider != "unknown" || m.Provider != "sim" {
					t.Errorf("QP %#x: provider %q hidden, %q not: the identity is not hidden", g.QPNum, g.Provider, m.Provider)
				}
				if g.CauseBasis != analyzer.CauseInferred {
					t.Errorf("QP %#x: cause basis %q, want %q", g.QPNum, g.CauseBasis, analyzer.CauseInferred)
				}
				m.Provider, m.CauseBasis = g.Provider, g.CauseBasis
				if g != m {
					t.Errorf("QP %#x: causes %+v read as an unknown provider, %+v by the mlx5 model", g.QPNum, g, m)
				}
			}
			for _, d := range generic.Diagnoses {
				if inferredKinds[d.Kind] && d.CauseBasis != analyzer.CauseInferred {
					t.Errorf("diagnosis %s: cause basis %q, want %q", d.Kind, d.CauseBasis, analyzer.CauseInferred)
				}
			}
			golden := filepath.Join("testdata", "faults", fr.name+".generic.golden")
			goldenFile(t, golden, diagnosisLines(t, genericJSON), *updateGeneric,
				"go test ./cmd/sqscope -run TestFaultRecordingsGeneric -args -update-generic")
		})
	}
}
