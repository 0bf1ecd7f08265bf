package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/analyzertest"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// smallRecording is two QPs of one process: 0x1c0 posts inline batches of 4,
// signals every 8th WR and polls; 0x1c1 never signals and overflows.
func smallRecording() []trace.Event {
	s := streamtest.New()
	s.Add(
		&trace.Attach{Header: s.Header(), Func: "post_send", Path: "/usr/bin/app", Offset: 0x1234, How: "symbol"},
		&trace.Attach{Header: s.Header(), Func: "poll_cq", Path: "/usr/bin/app", Offset: 0x2345, How: "symbol"})
	s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(64, 124, 1), false)
	s.Create(0x1c1, trace.QPTypeRC, streamtest.RCCaps(8, 124, 1), false)
	for i := range 8 {
		s.Post(0x1c0, s.WRs(0x1c0, 4, ibv.WRSend, ibv.SendInline, 1, 64, 8), 0, 4)
		if i%2 == 1 {
			s.EmptyPolls(0x1c0, 2)
			s.Poll(0x1c0, s.IDs[0x1c0]-1)
		}
	}
	for range 8 {
		s.Post(0x1c1, s.WRs(0x1c1, 1, ibv.WRRDMAWrite, 0, 1, 4096, 0), 0, 1)
	}
	s.Post(0x1c1, s.WRs(0x1c1, 1, ibv.WRRDMAWrite, 0, 1, 4096, 0), ibv.ENOMEM, 0)
	s.Add(&trace.Exit{Header: s.Header(), Code: 1})
	return s.Events
}

func TestReportOfRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.sqscope")
	w, err := trace.Create(path, trace.FileInfo{Hostname: "host", Kernel: "6.8.0", Version: "test",
		StartWall: time.Unix(1700000000, 0), Target: "app", TargetPID: streamtest.PID, ProbeMode: "symbol"})
	if err != nil {
		t.Fatal(err)
	}
	evs := smallRecording()
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := analyzer.New(withBF)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Ingest(ev)
	}
	s := analyzertest.Snapshot(t, a)
	if s.Events != uint64(len(evs)) || len(s.QPs) != 2 || s.QPs[0].WRs != 32 || s.QPs[1].ENOMEMSQFull != 1 {
		t.Fatalf("events %d, QPs %d; want %d events, 2 QPs, 32 WRs and 1 overflow", s.Events, len(s.QPs), len(evs))
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_small.txt.golden", []byte(text(t, s)))
	golden(t, "report_small.json.golden", js.Bytes())
}

func TestReportEmpty(t *testing.T) {
	got := text(t, analyzertest.Run(t, analyzer.Options{}, nil))
	want := "sqscope: 0 events over 0.000 s, 0 QP(s), 0 lost events\n  no send queue activity seen\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// unmeasuredText is what the text of a counters-mode QP must not say: the
// figures of per-call events.
var unmeasuredText = []string{"longest unsignaled run", "BlueFlame %", "(BlueFlame", "WQEBBs", "occupancy:",
	"outstanding now", "CQEs polled", "signal interval", "(batching)", "of transactions", "of bytes", "CQEs/s"}

// A counters-mode QP's text gives what it measured and leaves the rest
// out, saying once why.
func TestCountersModeText(t *testing.T) {
	for _, c := range streamtest.CountersMode {
		t.Run(c.Name, func(t *testing.T) {
			out := text(t, snapshotOf(t, analyzer.Options{}, c.Build))
			checkText(t, out, []string{"signaled 12500 (6.2%)", "rates over 0.500000 s"}, unmeasuredText)
			if n := strings.Count(out, "counters mode:"); n != 1 {
				t.Errorf("text gives counters mode's reason %d times, want once:\n%s", n, out)
			}
		})
	}
}

// The report of a QP whose lists and SGE lists were cut, and of one beside
// it where nothing was.
func TestReportCuts(t *testing.T) {
	snap := snapshotOf(t, withBF, func(s *streamtest.Stream) {
		s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(4096, 0, 30), false)
		s.Create(0x1c1, trace.QPTypeRC, streamtest.RCCaps(64, 0, 1), false)
		s.Capped(0x1c0, s.WRs(0x1c0, 64, ibv.WRSend, 0, 1, 64, 0), 1024, 0, 1024)
		s.Post(0x1c0, streamtest.SGECut(s.WRs(0x1c0, 3, ibv.WRSend, 0, 1, 64, 3), 4, 0, 1, 2), 0, 3)
		s.Send(0x1c1, 4, 0, 4)
	})
	golden(t, "report_cuts.txt.golden", []byte(text(t, snap)))
}

// A QP's cuts are one line, with what each bound cut, and none when
// nothing was.
func TestCutsLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    analyzer.Cuts
		want string
	}{
		{"nothing cut", analyzer.Cuts{}, ""},
		{"SGEs", analyzer.Cuts{SGECutWRs: 3, SGEsNotSummed: 263},
			"  cut by the tracer's bounds: 3 WRs with SGEs past the SGE bound (263 SGEs not summed: byte counts are lower bounds)\n"},
		{"walk", analyzer.Cuts{WalkCappedPosts: 2},
			"  cut by the tracer's bounds: 2 post calls with lists past the walk bound (WRs past it not seen: WR counts are lower bounds)\n"},
		{"both", analyzer.Cuts{SGECutWRs: 2, SGEsNotSummed: 8, WalkCappedPosts: 1},
			"  cut by the tracer's bounds: 2 WRs with SGEs past the SGE bound (8 SGEs not summed: byte counts are lower bounds), " +
				"1 post calls with lists past the walk bound (WRs past it not seen: WR counts are lower bounds)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeCuts(&b, tc.c)
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
			if got := Cuts(tc.c); got != strings.TrimSuffix(strings.TrimPrefix(tc.want, "  "), "\n") {
				t.Errorf("Cuts = %q, want the line's words", got)
			}
		})
	}
}

// mlx5Figures are what the text report prints of the mlx5 model's figures.
var mlx5Figures = []string{"HCA (", "(BlueFlame", "), WQEBBs ", "of transactions", "PCIe bytes are estimates"}

// Each provider's QP is written by its model: the mlx5 figures only where
// the mlx5 model applies, what is true on rxe, the causes the generic
// model infers marked so. The golden files hold the text and the JSON.
func TestProvidersText(t *testing.T) {
	type want struct {
		text    []string // in the text report
		notText []string // never in it
	}
	wants := map[string]want{
		"rxe_send_lazy_poll": {
			[]string{"provider rxe", "191 WRs outstanding at the peak (more than the max_send_wr 64 the QP reports: rxe holds more than it reports",
				"ENOMEM SQ full 1", "receiver-not-ready"},
			append(mlx5Figures, "never been polled")},
		"rxe_write_lazy_poll":      {[]string{"provider rxe", "500 WRs outstanding at the peak"}, mlx5Figures},
		"rxe_write_not_completing": {[]string{"not completing"}, []string{"receiver-not-ready"}},
		"mlx5_send_lazy_poll":      {[]string{"HCA (mlx5 model)", "BlueFlame", "never been polled"}, []string{"provider rxe"}},
		"unknown_provider": {
			[]string{"provider unknown (post_send in " + streamtest.OtherLib + ")", "ENOMEM SQ full 1, causes INFERRED FROM CAPS",
				"cause INFERRED FROM CAPS", "the provider holds more than it reports"},
			append(mlx5Figures, "ENOMEM cause unknown")},
		"late_attach_rxe":              {[]string{"provider rxe"}, mlx5Figures},
		"late_attach_unknown_provider": {[]string{"no ENOMEM cause"}, append(mlx5Figures, "INFERRED FROM CAPS")},
	}
	for _, c := range streamtest.Providers {
		t.Run(c.Name, func(t *testing.T) {
			w := streamtest.Want(t, wants, c.Name)
			snap := snapshotOf(t, withBF, c.Build)
			out := text(t, snap)
			checkText(t, out, w.text, w.notText)
			var js bytes.Buffer
			if err := WriteJSON(&js, snap); err != nil {
				t.Fatal(err)
			}
			golden(t, "provider_"+c.Name+".golden", append([]byte(out), js.Bytes()...))
		})
	}
}

// A QP's traffic by opcode: the golden file holds each stream's lines of
// its QP and its JSON of opcodes, DMA counts and savings.
func TestPCIeByOpcodeText(t *testing.T) {
	var out bytes.Buffer
	for _, c := range streamtest.PCIeByOpcode {
		q := snapshotOf(t, withBF, c.Build).QPs[0]
		fmt.Fprintf(&out, "== %s\n", c.Name)
		writeEventsQP(&out, &q)
		b, err := json.MarshalIndent(struct {
			Opcodes           analyzer.OpcodeMix `json:"opcodes"`
			DMAReadsPayload   uint64             `json:"dma_reads_payload"`
			DMABytesPayload   uint64             `json:"dma_bytes_payload"`
			DMAWritesResponse uint64             `json:"dma_writes_response"`
			DMABytesResponse  uint64             `json:"dma_bytes_response"`
			PCIe              analyzer.Savings   `json:"pcie"`
		}{q.Opcodes, q.DMAReadsPayload, q.DMABytesPayload, q.DMAWritesResponse, q.DMABytesResponse, q.PCIe}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteString("\n")
	}
	golden(t, "pcie_by_opcode.golden", out.Bytes())
}

// The text report says the bound and how the QP was found.
func TestLateAttachReport(t *testing.T) {
	snap := snapshotOf(t, withBF, func(s *streamtest.Stream) {
		s.Add(&trace.Scan{Header: s.Header(), Bytes: 96 << 20, Mappings: 30, DurationNS: 80e6,
			Contexts: 1, QPs: 1, StopNS: 1_500_000})
		s.MemQP(0x1c0, ibv.QPSRTS)
		s.IDs[0x1c0] = 1000
		s.Send(0x1c0, 4, 0, 4)
		s.Poll(0x1c0, 999)
		s.Send(0x1c0, 4, 0, 4)
		s.MemQP(0x1c1, ibv.QPSInit)
		s.IDs[0x1c1] = 50
		s.Send(0x1c1, 4, 0, 4) // 50..53, 51 signaled
		s.Poll(0x1c1, 49, 51)
	})
	golden(t, "late_attach.txt.golden", []byte(text(t, snap)))
}

// Where no completion is traced, occupancy is said to be unknown, not
// given as a figure; a lower bound is given as one.
func TestCompletionsNotTracedText(t *testing.T) {
	for _, tc := range []struct {
		name     string
		q        analyzer.QP
		want, no []string
	}{
		{"no poll function traced", analyzer.QP{CompletionsNotTraced: true},
			[]string{"outstanding and occupancy UNKNOWN"}, []string{"occupancy: peak"}},
		{"attached late: lower bounds", analyzer.QP{OutstandingLowerBound: true},
			[]string{"outstanding now >= 0", "occupancy: peak >= 0"}, []string{"UNKNOWN"}},
		{"exact", analyzer.QP{}, []string{"outstanding now 0, peak 0", "occupancy: peak 0"}, []string{"UNKNOWN", ">="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.PostCalls, q.WRs, q.Doorbells = 50, 200, 50
			var b bytes.Buffer
			writeEventsQP(&b, &q)
			checkText(t, b.String(), tc.want, tc.no)
		})
	}
}

// What failed on a QP is one line, each cause with its count, and says
// when the causes were inferred; a counters-mode QP gives ENOMEM without
// a cause.
func TestErrorsLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    analyzer.QP
		want string
	}{
		{"nothing failed", analyzer.QP{}, ""},
		{"causes of the provider's own checks", analyzer.QP{Counters: analyzer.Counters{ENOMEMSQFull: 2, ENOMEMSGE: 1, EINVAL: 3}},
			"  errors: ENOMEM SQ full 2, ENOMEM too many SGEs 1, EINVAL 3\n"},
		{"causes inferred from caps", analyzer.QP{Counters: analyzer.Counters{ENOMEMInline: 1}, CauseBasis: analyzer.CauseInferred},
			"  errors: ENOMEM inline too big 1, causes INFERRED FROM CAPS\n"},
		{"no cause found", analyzer.QP{Counters: analyzer.Counters{ENOMEMUnknown: 1}, CauseBasis: analyzer.CauseInferred},
			"  errors: ENOMEM cause unknown 1\n"},
		{"counters mode", analyzer.QP{Counters: analyzer.Counters{ENOMEM: 4}, CountersOnly: true}, "  errors: ENOMEM 4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeErrors(&b, &tc.q)
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}
