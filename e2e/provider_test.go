package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mlx5Text is what the text report prints of the mlx5 model's figures and
// causes: none of it may appear for an rxe QP.
var mlx5Text = []string{"HCA (", "(BlueFlame", "), WQEBBs ", "of transactions", "PCIe bytes are estimates",
	"never been polled", "mlx5 model)"}

// mlx5JSON are the QP fields of the mlx5 model, absent for an rxe QP.
var mlx5JSON = []string{"model", "bf_writes", "wqebbs", "dma_reads_wqe", "dma_reads_payload", "dma_bytes_payload", "mmio_bytes",
	"pcie", "enomem_inline", "enomem_sge"}

// tracedRxe records a workload on rxe0, reports it as JSON and as text,
// and requires the trace to equal the workload, every QP to be rxe's with
// none of the mlx5 model's figures in either report, and the diagnoses to
// be exactly want for the workload's QPs (none at all when want is empty).
//
// Why a lazily polled SEND stream overflows rxe and a WRITE stream does
// not: the workload reposts the peer's receives only when it polls, so
// between polls at most -t SENDs find a receive. The next SEND is answered
// with an RNR NAK and retried (rnr_retry 7: for ever), nothing behind it
// completes, and the SQ fills: measured with -t 128, the first ENOMEM
// comes at WR 383, 128 receives plus 255 queued WQEs (rxe rounds its ring
// to a power of two and holds one less, more than the max_send_wr 128 it
// reports). WRITEs need no receive: they complete, rxe frees their slots
// whether or not their CQEs are polled, and nothing fails.
func tracedRxe(name, args, want string) guestCmd {
	wl := "-d rxe0 -x 1 " + args + " --json-out " + truthFile
	sh := "sqscope record -o run.sqscope --workload -- " + wl +
		" && sqscope report --json run.sqscope && sqscope report run.sqscope > report.txt"
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 40 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			s, truth := readTraced(t, r, sh)
			checkTruth(t, args, truth.qps)
			compareTruth(t, sh, s, truth)
			b, err := os.ReadFile(filepath.Join(r.dir, "report.txt"))
			if err != nil {
				t.Fatalf("the text report: %v", err)
			}
			text := string(b)
			for _, q := range s.QPs {
				if q["provider"] != "rxe" {
					t.Errorf("QP %#x: provider %v, want rxe\n%s", num(q, "qp_num"), q["provider"], excerpt(q))
				}
				for _, k := range mlx5JSON {
					if _, ok := q[k]; ok {
						t.Errorf("QP %#x: JSON has the mlx5 model's %q on rxe", num(q, "qp_num"), k)
					}
				}
			}
			for _, no := range mlx5Text {
				if strings.Contains(text, no) {
					t.Errorf("the text report prints %q for rxe:\n%s", no, text)
				}
			}
			if !strings.Contains(text, "provider rxe") {
				t.Errorf("the text report does not name the provider:\n%s", text)
			}
			wlQPs := map[uint32]bool{}
			for _, w := range truth.qps {
				wlQPs[w.QPNum] = true
				var kinds []string
				for _, d := range s.Diagnoses {
					if d.QPNum == w.QPNum {
						kinds = append(kinds, d.Kind)
						t.Logf("diagnosis %s (%d times) for QP %#x: %s\n  fix: %s", d.Kind, d.Count, d.QPNum, d.Message, d.Fix)
					}
				}
				switch {
				case want == "" && (len(kinds) > 0 || w.ENOMEMSQFull > 0):
					t.Errorf("QP %#x: %d SQ-full ENOMEMs, diagnoses %v; want a quiet run", w.QPNum, w.ENOMEMSQFull, kinds)
				case want != "" && w.ENOMEMSQFull == 0:
					t.Fatalf("QP %#x: the workload saw no SQ-full ENOMEM: the fault did not overflow rxe's send queue\ntruth: %s", w.QPNum, truth.raw[w.QPNum])
				case want != "" && !slices.Equal(kinds, []string{want}):
					t.Errorf("QP %#x: diagnoses %v, want [%s]", w.QPNum, kinds, want)
				}
				if g := s.findQP(uint64(w.QPNum)); g != nil && num(g, "peak_outstanding") > w.MaxSendWR &&
					!strings.Contains(text, "holds more than it reports") {
					t.Errorf("QP %#x: peak %d over max_send_wr %d, and the text does not say rxe holds more than it reports:\n%s",
						w.QPNum, num(g, "peak_outstanding"), w.MaxSendWR, text)
				}
			}
			for _, d := range s.Diagnoses {
				if !wlQPs[d.QPNum] {
					t.Errorf("diagnosis %s for QP %#x, which is not the workload's sending QP: %s", d.Kind, d.QPNum, d.Message)
				}
			}
			if want == "sq_overflow_rnr_retry" && !strings.Contains(text, "receiver-not-ready") {
				t.Errorf("the text report does not name rxe's cause:\n%s", text)
			}
			t.Logf("text report:\n%s", text)
		},
	}
}
