package diff

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const faults = "../cmd/sqscope/testdata/faults/"

func mlx5BF(trace.FileInfo) analyzer.BFConfig { return analyzer.DefaultBF }

func load(t *testing.T, name string) *Side {
	t.Helper()
	s, err := Load(context.Background(), faults+name+".sqscope", mlx5BF)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// The text and JSON of diffs of committed recordings.
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			rep := Compare(load(t, tc.before), load(t, tc.after), tc.match)
			checkReport(t, rep)
			var b bytes.Buffer
			if err := WriteText(&b, rep); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".txt", b.Bytes())
			js, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".json", append(js, '\n'))
		})
	}
}

// Each figure of a diff is the one the report of that recording gives:
// WRs per doorbell, PCIe bytes per WR, the peak and depth, ENOMEMs.
func TestFiguresAreTheReports(t *testing.T) {
	for _, name := range []string{"lazy-poll", "sig-all-with-flags", "never-signal", "rq-starve"} {
		t.Run(name, func(t *testing.T) {
			s := load(t, name)
			rep := Compare(s, s, ByProcess)
			if len(rep.QPs) != len(s.Snap.QPs) {
				t.Fatalf("%d QPs matched, the recording has %d", len(rep.QPs), len(s.Snap.QPs))
			}
			for i, qd := range rep.QPs {
				q, f := &s.Snap.QPs[i], qd.Before.Figures
				if len(qd.Appeared)+len(qd.Went)+len(qd.Changed) > 0 {
					t.Errorf("%s against itself: %+v", qd.Match, qd)
				}
				if q.Reported("doorbells") && q.Doorbells > 0 {
					if f.WRsPerDoorbell == nil || math.Abs(*f.WRsPerDoorbell-q.Rates.WRsPerDoorbell) > 1e-9 {
						t.Errorf("%s: WRs per doorbell %v, the report's %g", qd.Match, f.WRsPerDoorbell, q.Rates.WRsPerDoorbell)
					}
				}
				if q.Reported("actual") && q.WRs > 0 {
					want := float64(q.PCIe.Actual.Bytes) / float64(q.WRs)
					if f.PCIeBytesPerWR == nil || *f.PCIeBytesPerWR != want {
						t.Errorf("%s: PCIe bytes per WR %v, the report's %d B / %d WRs", qd.Match, f.PCIeBytesPerWR, q.PCIe.Actual.Bytes, q.WRs)
					}
				} else if f.PCIeBytesPerWR != nil {
					t.Errorf("%s: PCIe bytes per WR %g where the report gives none", qd.Match, *f.PCIeBytesPerWR)
				}
				if q.Occupancy.Depth > 0 && (f.Peak == nil || *f.Peak != q.Occupancy.Peak || f.Depth == nil || *f.Depth != q.Occupancy.Depth) {
					t.Errorf("%s: peak %v of %v, the report's %d of %d", qd.Match, f.Peak, f.Depth, q.Occupancy.Peak, q.Occupancy.Depth)
				}
				if f.ENOMEM != q.ENOMEM {
					t.Errorf("%s: ENOMEM %d, the report's %d", qd.Match, f.ENOMEM, q.ENOMEM)
				}
			}
			if tot := rep.Total.Before; tot.WRs != s.Snap.Total.WRs || tot.ENOMEM != s.Snap.Total.ENOMEM {
				t.Errorf("total WRs %d ENOMEM %d, the report's %d %d", tot.WRs, tot.ENOMEM, s.Snap.Total.WRs, s.Snap.Total.ENOMEM)
			}
			if tot := rep.Total.Before; tot.WRsPerDoorbell != nil && math.Abs(*tot.WRsPerDoorbell-s.Snap.TotalRates.WRsPerDoorbell) > 1e-9 {
				t.Errorf("total WRs per doorbell %g, the report's %g", *tot.WRsPerDoorbell, s.Snap.TotalRates.WRsPerDoorbell)
			}
		})
	}
}
