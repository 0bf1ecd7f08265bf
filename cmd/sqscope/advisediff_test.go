package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

var updateAdvise = flag.Bool("update-advise", false, "record the README's advise example anew (needs root) and rewrite the golden of its diff")

// The README's advise example: the built-in workload on a slow simulated
// NIC (adviseNIC), before, and after the changes advise gives for it.
// Its recordings are committed under testdata/advise with the names the
// README uses.
const (
	adviseDir    = "testdata/advise"
	adviseBefore = "poor.sqscope"
	adviseAfter  = "advised.sqscope"
	adviseGolden = "diff.golden"
)

var adviseRuns = []struct{ file, flags string }{
	{adviseBefore, "-s 256 -n 1000 -t 16 -Q 16"},
	{adviseAfter, "-s 256 -n 1000 -I 256 -Q 256 -l 32 -t 512"},
}

// recordAdvise records the README's two runs into dir, as the README's
// commands do.
func recordAdvise(t *testing.T, dir string) {
	t.Helper()
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	for _, r := range adviseRuns {
		args := append([]string{"record", "--force", "-o", filepath.Join(dir, r.file), "--workload", "--"}, strings.Fields(r.flags)...)
		args = append(args, "--sim-nic", adviseNIC)
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("record %s: %v\n%s", r.file, err, out)
		}
	}
}

// adviseDiff runs sqscope diff on the two recordings in dir, named as
// the README names them, and returns its text and its JSON.
func adviseDiff(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	t.Chdir(dir)
	text, stderr, code, err := sqscope("diff", adviseBefore, adviseAfter)
	if code != 0 {
		t.Fatalf("diff: exit %d: %v\n%s", code, err, stderr)
	}
	js, stderr, code, err := sqscope("diff", "--json", adviseBefore, adviseAfter)
	if code != 0 {
		t.Fatalf("diff --json: exit %d: %v\n%s", code, err, stderr)
	}
	return text, []byte(js)
}

// reportQP is what sqscope report --json says of a QP, the figures a
// diff compares.
type reportQP struct {
	QPNum     uint32 `json:"qp_num"`
	WRs       uint64 `json:"wrs"`
	Doorbells uint64 `json:"doorbells"`
	ENOMEM    uint64 `json:"enomem"`
	Occupancy struct {
		Peak  uint64 `json:"peak"`
		Depth uint64 `json:"depth"`
	} `json:"occupancy"`
	PCIe struct {
		Actual struct {
			Bytes uint64 `json:"bytes"`
		} `json:"actual"`
	} `json:"pcie"`
}

// diffSide is one side of a pair in sqscope diff --json.
type diffSide struct {
	QPNum          uint32   `json:"qp_num"`
	WRs            uint64   `json:"wrs"`
	WRsPerDoorbell *float64 `json:"wrs_per_doorbell"`
	PCIeBytesPerWR *float64 `json:"pcie_bytes_per_wr"`
	Peak           *uint64  `json:"peak_outstanding"`
	Depth          *uint64  `json:"depth"`
	ENOMEM         uint64   `json:"enomem"`
	Settings       *struct {
		Inline    uint32 `json:"inline_up_to_bytes"`
		SignalEvr uint32 `json:"signal_every"`
		PerPost   uint32 `json:"wrs_per_post"`
		Depth     uint32 `json:"max_send_wr"`
	} `json:"settings"`
}

// checkAdviseFigures holds the diff of the recordings in dir to the
// reports of the same files: doorbells per WR, PCIe bytes per WR and the
// peak against the depth of each side, in the JSON and in the text, and
// the advised run better than the poor one on both of the first two.
func checkAdviseFigures(t *testing.T, dir, text string, js []byte) {
	t.Helper()
	var d struct {
		QPs []struct {
			Match  string    `json:"match"`
			Before *diffSide `json:"before"`
			After  *diffSide `json:"after"`
		} `json:"qps"`
	}
	if err := json.Unmarshal(js, &d); err != nil {
		t.Fatalf("diff --json: %v", err)
	}
	if len(d.QPs) != 1 || d.QPs[0].Before == nil || d.QPs[0].After == nil {
		t.Fatalf("diff pairs %+v, want the one QP of each run matched", d.QPs)
	}
	pair := d.QPs[0]
	var reps [2]reportQP
	for i, side := range []*diffSide{pair.Before, pair.After} {
		file := adviseRuns[i].file
		stdout, stderr, code, err := sqscope("report", "--json", filepath.Join(dir, file))
		if code != 0 {
			t.Fatalf("report %s: exit %d: %v\n%s", file, code, err, stderr)
		}
		var r struct{ QPs []reportQP }
		if err := decodeReport(t, []byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.QPs) != 1 {
			t.Fatalf("report %s: %d QPs, want 1", file, len(r.QPs))
		}
		q := r.QPs[0]
		reps[i] = q
		if q.WRs == 0 || q.Doorbells == 0 {
			t.Fatalf("report %s: %d WRs, %d doorbells: the recording holds no run", file, q.WRs, q.Doorbells)
		}
		if side.QPNum != q.QPNum || side.WRs != q.WRs || side.ENOMEM != q.ENOMEM {
			t.Errorf("%s: diff says QP %#x, %d WRs, %d ENOMEM; report QP %#x, %d, %d", file, side.QPNum, side.WRs, side.ENOMEM, q.QPNum, q.WRs, q.ENOMEM)
		}
		if want := float64(q.WRs) / float64(q.Doorbells); side.WRsPerDoorbell == nil || math.Abs(*side.WRsPerDoorbell-want) > 1e-9*want {
			t.Errorf("%s: diff gives %v WRs per doorbell, the report %d doorbells for %d WRs", file, side.WRsPerDoorbell, q.Doorbells, q.WRs)
		}
		if want := float64(q.PCIe.Actual.Bytes) / float64(q.WRs); side.PCIeBytesPerWR == nil || *side.PCIeBytesPerWR != want {
			t.Errorf("%s: diff gives %v PCIe bytes per WR, the report %d B for %d WRs", file, side.PCIeBytesPerWR, q.PCIe.Actual.Bytes, q.WRs)
		}
		if side.Peak == nil || side.Depth == nil || *side.Peak != q.Occupancy.Peak || *side.Depth != q.Occupancy.Depth {
			t.Errorf("%s: diff gives peak %v of %v, the report %d of %d", file, side.Peak, side.Depth, q.Occupancy.Peak, q.Occupancy.Depth)
		}
	}
	b, a := reps[0], reps[1]
	ratio := func(n, d uint64) float64 { return float64(n) / float64(d) }
	for _, line := range []string{
		fmt.Sprintf("  %-26s %.2f -> %.2f\n", "WRs per doorbell", ratio(b.WRs, b.Doorbells), ratio(a.WRs, a.Doorbells)),
		fmt.Sprintf("  %-26s %.1f -> %.1f\n", "PCIe bytes per WR", ratio(b.PCIe.Actual.Bytes, b.WRs), ratio(a.PCIe.Actual.Bytes, a.WRs)),
		fmt.Sprintf("  %-26s %d of %d -> %d of %d\n", "peak outstanding", b.Occupancy.Peak, b.Occupancy.Depth, a.Occupancy.Peak, a.Occupancy.Depth),
	} {
		if strings.Count(text, line) != 2 { // the pair's and the total's
			t.Errorf("the diff's text does not give the reports' figures twice (QP and total) as %q:\n%s", line, text)
		}
	}
	if ratio(a.Doorbells, a.WRs) >= ratio(b.Doorbells, b.WRs) || ratio(a.PCIe.Actual.Bytes, a.WRs) >= ratio(b.PCIe.Actual.Bytes, b.WRs) {
		t.Errorf("the advised run rings %d doorbells and moves %d PCIe bytes for %d WRs, the poor one %d and %d for %d: no better",
			a.Doorbells, a.PCIe.Actual.Bytes, a.WRs, b.Doorbells, b.PCIe.Actual.Bytes, b.WRs)
	}
}

// The diff of the README's advise example, on the committed recordings
// its commands made: its figures are the two reports', the run after is
// made with the settings advise gives for the run before, and its text is
// the golden (testdata/advise/diff.golden, which the README shows).
// -update-advise records both anew, as root, and rewrites the golden.
func TestDiffAdviseExample(t *testing.T) {
	if *updateAdvise {
		recordAdvise(t, adviseDir)
	}
	dir, err := filepath.Abs(adviseDir)
	if err != nil {
		t.Fatal(err)
	}
	text, js := adviseDiff(t, dir)
	checkAdviseFigures(t, dir, text, js)

	// the run after has the settings advise's best candidate gives
	stdout, stderr, code, err := sqscope("advise", "--json", "--nic", adviseNIC, adviseBefore)
	if code != 0 {
		t.Fatalf("advise: exit %d: %v\n%s", code, err, stderr)
	}
	var adv struct {
		QPs []struct {
			Best []struct {
				Inline    uint32 `json:"inline_up_to_bytes"`
				SignalEvr uint32 `json:"signal_every"`
				PerPost   uint32 `json:"wrs_per_post"`
				Depth     uint32 `json:"max_send_wr"`
			} `json:"best"`
		} `json:"qps"`
	}
	var d struct {
		QPs []struct {
			After diffSide `json:"after"`
		} `json:"qps"`
	}
	if err := json.Unmarshal([]byte(stdout), &adv); err != nil || len(adv.QPs) != 1 || len(adv.QPs[0].Best) == 0 {
		t.Fatalf("advise --json: %v, %d QPs advised:\n%.400s", err, len(adv.QPs), stdout)
	}
	if err := json.Unmarshal(js, &d); err != nil || len(d.QPs) != 1 || d.QPs[0].After.Settings == nil {
		t.Fatalf("diff --json: %v, no settings inferred after", err)
	}
	if best, got := adv.QPs[0].Best[0], *d.QPs[0].After.Settings; best != got {
		t.Errorf("the run after has settings %+v, advise's best for the run before is %+v", got, best)
	}

	golden := filepath.Join(dir, adviseGolden)
	if *updateAdvise {
		if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/sqscope -run 'TestDiffAdviseExample$' -update-advise, as root)", err)
	}
	if text != string(want) {
		t.Errorf("the diff differs from %s (-update-advise, as root, records the runs anew and rewrites it):\n--- got\n%s--- want\n%s", adviseGolden, text, want)
	}
}

// The README's commands run now (BPF): the recordings they make compare
// as the committed ones do, their figures the reports', and every figure
// (WRs, doorbells, shares, PCIe bytes, the peak, ENOMEMs) and inferred
// setting the golden's; not the pids, nor the diagnoses, which the host's
// timing may change (a prediction made or not).
func TestDiffAdviseExampleRecorded(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(adviseDir, adviseGolden))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	recordAdvise(t, dir)
	text, js := adviseDiff(t, dir)
	checkAdviseFigures(t, dir, text, js)
	if got, w := figureLines(text), figureLines(string(want)); got != w {
		t.Errorf("recorded now, the figures differ from the golden's:\n--- now\n%s--- golden\n%s", got, w)
	}
}

// figureLines are the lines of a diff's text that give a figure or a
// setting: all but the header and the pairs' lines, which hold pids.
func figureLines(text string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "  diagnoses") {
			b.WriteString(l)
		}
	}
	return b.String()
}
