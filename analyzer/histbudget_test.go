package analyzer

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

func TestHistLenFor(t *testing.T) {
	tests := []struct {
		name   string
		budget uint64
		qps    int
		most   uint64
		want   uint64
	}{
		{"one QP keeps the most", sampleBytes << 20, 1, 6000, 6000},
		{"one QP within the budget", sampleBytes * 1000, 1, 6000, 1000},
		{"two QPs share it", sampleBytes * 1000, 2, 6000, 500},
		{"three round up to four", sampleBytes * 2048, 3, 6000, 512},
		{"never below the floor", sampleBytes * 1000, 64, 6000, histMinLen},
		{"nor above the length asked", sampleBytes * 1000, 64, 4, 4},
		{"4,096 QPs of the default", DefaultHistoryBytes, 4096, DefaultHistoryLen, DefaultHistoryBytes / sampleBytes / 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := histLenFor(tc.budget, tc.qps, tc.most); got != tc.want {
				t.Fatalf("histLenFor(%d, %d, %d) = %d, want %d", tc.budget, tc.qps, tc.most, got, tc.want)
			}
		})
	}
}

// A history grows past its first ring as windows close, and shrinks to
// the newest windows when more QPs come to share the budget.
func TestHistoryBudget(t *testing.T) {
	tests := []struct {
		name    string
		windows int // windows QP 1 climbs through before QP 2..qps come
		qps     int
		budget  int // bytes
		wantLen int // QP 1's samples at the end
	}{
		{"grows past the first ring", 200, 1, sampleBytes * 1000, 201},
		{"capped by the budget", 1500, 1, sampleBytes * 1000, 1000},
		{"halved by a second QP", 900, 2, sampleBytes * 1000, 500},
		{"at the floor with many QPs", 900, 40, sampleBytes * 1000, histMinLen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := streamtest.New()
			s.Climb(1, tc.windows)
			dt := s.DT
			s.DT = 1 // the creates within the window
			for q := 2; q <= tc.qps; q++ {
				s.Create(uint32(q), trace.QPTypeRC, streamtest.RCCaps(64, 0, 1), false)
			}
			s.DT = dt
			s.Send(1, 1, 0, 0) // one more window of QP 1
			opts := Options{HistoryStepNS: 1000, HistoryLen: 6000, HistoryBytes: tc.budget}
			a := New(opts)
			if n, step := a.HistoryWindows(); n != 6000 || step != 1000 {
				t.Fatalf("before any QP: %d windows of %d ns, want 6000 of 1000", n, step)
			}
			a.IngestAll(s.Events)
			snap := checked(t, a)
			if n, _ := a.HistoryWindows(); uint64(n) != histLenFor(uint64(tc.budget), tc.qps, 6000) || n < len(snap.QPs[0].History) {
				t.Fatalf("HistoryWindows says %d windows, want %d (QP 1 holds %d)", n, histLenFor(uint64(tc.budget), tc.qps, 6000), len(snap.QPs[0].History))
			}
			h := snap.QPs[0].History
			if len(h) != tc.wantLen {
				t.Fatalf("%d samples, want %d", len(h), tc.wantLen)
			}
			// oldest first, each window one WR more than the one before
			last := h[len(h)-1].Max
			for i, smp := range h {
				if want := last - uint32(len(h)-1-i); smp.Max != want {
					t.Fatalf("sample %d of %d: max %d, want %d (last %d)", i, len(h), smp.Max, want, last)
				}
			}
			if want := uint32(tc.windows + 1); last != want {
				t.Fatalf("newest sample %d, want %d", last, want)
			}
			if want := snap.LastNS/1000*1000 - uint64(len(h)-1)*1000; snap.QPs[0].HistoryStartNS != want {
				t.Fatalf("history from %d, want %d", snap.QPs[0].HistoryStartNS, want)
			}
		})
	}
}

// A snapshot written into the QPs of an older one is the snapshot made
// afresh: nothing of the older one stays. None is taken at the version of
// the last, and a snapshot taken again at one version is the same. A
// snapshot of some QPs holds them as the whole one does, with their
// totals.
func TestSnapshotWith(t *testing.T) {
	s := streamtest.New()
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
	s.Create(2, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
	s.Send(1, 4, 0, 0)
	s.Send(2, 3, 0, 0)
	a := New(Options{HistoryStepNS: 1000})
	a.IngestAll(s.Events)
	old := a.Snapshot().QPs
	for i := range old { // make the old QPs differ from anything true
		old[i].SendCQGen, old[i].History, old[i].SignalIntervalLongest, old[i].Rates.PollsPerSec = 9, []OccSample{{Max: 9}}, 9, 9
	}
	old = append(old, QP{QPNum: 99})
	keep := func(pid, qpNum uint32) bool { return qpNum == 1 }
	got, ok := a.SnapshotWith(SnapshotOptions{History: keep, Reuse: old})
	want := a.SnapshotHistory(keep)
	if !ok || &got.QPs[0] != &old[0] {
		t.Fatal("the buffer was not reused")
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reused snapshot\n%+v\nwant\n%+v", got.QPs, want.QPs)
	}
	if small, _ := a.SnapshotWith(SnapshotOptions{History: keep, Reuse: old[:0:1]}); &small.QPs[0] == &old[0] || !reflect.DeepEqual(small, want) {
		t.Fatal("a buffer too small was used, or the snapshot differs")
	}
	if none, ok := a.SnapshotWith(SnapshotOptions{Since: want.Version, History: keep, Reuse: old}); ok || none.QPs != nil || old[0].QPNum != 1 {
		t.Fatalf("a snapshot was taken at the version of the last (%v), or the buffer touched", ok)
	}
	whole := a.Snapshot()
	part, _ := a.SnapshotWith(SnapshotOptions{QPs: func(_, qpNum uint32) bool { return qpNum == 2 }})
	if !part.Partial || whole.Partial || len(part.QPs) != 1 || !reflect.DeepEqual(part.QPs[0], whole.QPs[1]) {
		t.Fatalf("partial snapshot %+v, want QP 2 of %+v", part.QPs, whole.QPs)
	}
	if part.Total.WRs != 3 || whole.QPs[1].WRs != 3 || part.CQs != nil || whole.CQs == nil {
		t.Fatalf("partial totals %d WRs (QP 2 posted %d), CQs %v", part.Total.WRs, whole.QPs[1].WRs, part.CQs)
	}
	for _, err := range part.Check() {
		t.Errorf("partial snapshot: %v", err)
	}
	b := New(Options{HistoryStepNS: 1000})
	b.IngestAll(s.Events)
	if _, ok := b.SnapshotWith(SnapshotOptions{Since: want.Version}); !ok {
		t.Fatal("another analyzer's version was taken for this one's")
	}
	a.Ingest(&trace.Proc{Header: trace.Header{TimeNS: want.LastNS, PID: 1}, How: trace.ProcFork, Comm: "x"})
	if after, ok := a.SnapshotWith(SnapshotOptions{Since: want.Version, History: keep}); !ok || after.Version == want.Version {
		t.Fatalf("no snapshot after an event (%v)", ok)
	}
}

// The budget counts samples at their real size.
func TestSampleBytes(t *testing.T) {
	if n := unsafe.Sizeof(OccSample{}); n != sampleBytes {
		t.Fatalf("OccSample is %d bytes, the budget counts %d", n, sampleBytes)
	}
}
