package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
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
			got := diagnosisLines(t, out)
			if *updateFaults {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./cmd/sqscope -run TestFaultRecordingDiagnoses -update-faults, as root)", err)
			}
			if got != string(want) {
				t.Fatalf("diagnoses of %s changed:\n--- got\n%s--- want\n%s", rec, got, want)
			}
		})
	}
}
