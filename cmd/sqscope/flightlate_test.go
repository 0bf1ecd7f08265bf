package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/trace"
)

// flightLate is what one late-fault flight run measured.
type flightLate struct {
	files []string // oldest first
	file  string   // the first
	span  flightSpan
	// before the trigger: how long the directory was watched, how many
	// times, and the most bytes it held
	healthyS float64
	looks    int
	written  int64
	anonKiB  int64 // sqscope's anonymous resident memory, at the largest
	hwmKiB   int64 // its peak resident memory (VmHWM), read last before it ended
	// the first file complete (the line saying so read from sqscope's
	// stderr) this long after its trigger and its --after window, on
	// CLOCK_MONOTONIC; negative when the target ended inside the window
	lateNS int64
	stderr string
}

// lockedBuffer is a stderr read while the command runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// runFlightLate records the built-in workload with `record --flight
// WINDOW --trigger diagnosis=sq_overflow_unsignaled_run`, the workload
// overflowing one of its four QPs (never signaling) after faultAfter
// seconds of healthy traffic at rate WR/s (0: as fast as it goes), and
// ending tail seconds after the fault began; after is --after. The
// directory is looked at every 200 ms until sqscope ends, and its memory
// read each time.
func runFlightLate(tb testing.TB, window, faultAfter, rate int, after string, tail float64) flightLate {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "flight")
	args := []string{"record", "--flight", strconv.Itoa(window) + "s", "--trigger", "diagnosis=sq_overflow_unsignaled_run",
		"--after", after, "-o", dir, "--workload", "--",
		"--qps", "4", "-s", "64", "-I", "64", "-Q", "16", "-t", "128", "--fault", "never-signal",
		"--fault-after", strconv.Itoa(faultAfter), "--fault-qp", "2", "-D", strconv.FormatFloat(float64(faultAfter)+tail, 'f', -1, 64)}
	if rate > 0 {
		args = append(args, "--rate", strconv.Itoa(rate))
	}
	cmd := exec.Command(sqscopeBin(tb), args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var (
		stderr lockedBuffer
		doneNS int64 // when the line saying the file is complete came
		read   = make(chan struct{})
	)
	complete := regexp.MustCompile(`flight recording \S+: diagnosis=sq_overflow_unsignaled_run`)
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			now := int64(trace.MonotonicNS())
			stderr.mu.Lock()
			stderr.b.Write(sc.Bytes())
			stderr.b.WriteByte('\n')
			if doneNS == 0 && complete.Match(sc.Bytes()) {
				doneNS = now
			}
			stderr.mu.Unlock()
		}
	}()
	var m flightLate
	type look struct {
		ns    uint64
		bytes int64
	}
	var looks []look
	status := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "status")
	for {
		st, err := os.ReadFile(status)
		if err != nil || bytes.Contains(st, []byte("\nState:\tZ")) {
			break // ended
		}
		if v, ok := statusKiB(st, "RssAnon"); ok {
			m.anonKiB = max(m.anonKiB, v)
		}
		if v, ok := statusKiB(st, "VmHWM"); ok {
			m.hwmKiB = max(m.hwmKiB, v)
		}
		l := look{ns: trace.MonotonicNS()}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if info, err := e.Info(); err == nil {
				l.bytes += info.Size()
			}
		}
		looks = append(looks, l)
		select {
		case <-read: // its stderr closed: it ends
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	<-read
	err = cmd.Wait()
	m.stderr = stderr.String()
	if err != nil {
		tb.Fatalf("record --flight: %v\n%s", err, m.stderr)
	}
	m.files = flightFiles(tb, dir)
	if len(m.files) == 0 {
		tb.Fatalf("no file\n%s", m.stderr)
	}
	m.file = m.files[0]
	m.span = readFlight(tb, m.file)
	if doneNS == 0 {
		tb.Fatalf("no line saying the file is complete:\n%s", m.stderr)
	}
	m.lateNS = doneNS - int64(m.span.info.TriggerNS) - int64(m.span.info.AfterNS)
	for _, l := range looks {
		if l.ns < m.span.info.TriggerNS {
			m.looks++
			m.written = max(m.written, l.bytes)
			m.healthyS = float64(l.ns-looks[0].ns) / 1e9
		}
	}
	return m
}

// The flight recorder's case: a never-signal overflow after two minutes
// of healthy traffic, under `record --flight 10s --trigger
// diagnosis=sq_overflow_unsignaled_run`. Nothing is written in those
// two minutes; one file holds the 10 s before the first failure, the
// failure and its diagnosis; sqscope's memory stays within the window's
// bound and 64 MiB; and the file reads as any recording: report,
// replay (its report, with no terminal), export and advise.
func TestFlightLateFault(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	// the target ends inside the default --after (5 s): the repeated
	// diagnoses of the overflow are in the one file, not a new one
	m := runFlightLate(t, 10, 120, 20000, "5s", 3)
	if len(m.files) != 1 {
		t.Fatalf("%d files %v, want 1\n%s", len(m.files), m.files, m.stderr)
	}
	sp := m.span
	before := float64(sp.info.TriggerNS-sp.firstNS) / 1e9
	t.Logf("%s: %d events, %.3f s before the trigger, ends %q; the directory held %d bytes at most in %d looks over %.1f s before the trigger; sqscope's anonymous memory at most %d KiB, its peak resident %d KiB; the file complete %.1f ms after the trigger and its --after (negative: the target ended first)",
		filepath.Base(m.file), sp.events, before, sp.end, m.written, m.looks, m.healthyS, m.anonKiB, m.hwmKiB, float64(m.lateNS)/1e6)
	if m.written != 0 || m.healthyS < 115 {
		t.Errorf("%d bytes in the directory before the trigger, watched for %.1f s: want nothing in the fault's 120 s of healthy traffic", m.written, m.healthyS)
	}
	if sp.info.Trigger != "diagnosis=sq_overflow_unsignaled_run" || sp.failedNS != sp.info.TriggerNS {
		t.Errorf("trigger %q at %d, first failed post at %d: want the diagnosis at the first failure", sp.info.Trigger, sp.info.TriggerNS, sp.failedNS)
	}
	// the ring keeps the window, twice the diagnoses' look (250 ms) and
	// a block (500 ms for 10 s), in whole blocks: a block more at most,
	// later on a host that delays the recorder's ticks
	if most := 11 + bpftest.Timeout(t, 500*time.Millisecond).Seconds(); before < 10 || before > most {
		t.Errorf("%.3f s before the trigger, want 10 s and at most %.2f", before, most)
	}
	if sp.info.Dropped != 0 {
		t.Errorf("%d events dropped by the memory bound at 20,000 WR/s", sp.info.Dropped)
	}
	// the default --flight-mib (16 per second of the window, at least 64)
	// and 64 MiB
	if bound := int64(max(64, 16*10)+64) << 10; m.anonKiB > bound {
		t.Errorf("anonymous resident memory %d KiB, want at most %d", m.anonKiB, bound)
	}
	if !strings.Contains(m.stderr, "recordings written: 1 on diagnosis=sq_overflow_unsignaled_run") {
		t.Errorf("stderr does not say one recording on the diagnosis:\n%s", m.stderr)
	}

	bin := sqscopeBin(t)
	var rep struct {
		Diagnoses []struct {
			Kind  string `json:"kind"`
			QPNum uint32 `json:"qp_num"`
		} `json:"diagnoses"`
		QPs []struct {
			QPNum        uint32 `json:"qp_num"`
			ENOMEMSQFull uint64 `json:"enomem_sq_full"`
		} `json:"qps"`
	}
	out, err := exec.Command(bin, "report", "--json", m.file).Output()
	if err != nil || json.Unmarshal(out, &rep) != nil {
		t.Fatalf("report --json: %v\n%.400s", err, out)
	}
	var full []uint32
	for _, q := range rep.QPs {
		if q.ENOMEMSQFull > 0 {
			full = append(full, q.QPNum)
		}
	}
	found := false
	for _, d := range rep.Diagnoses {
		found = found || len(full) == 1 && d.Kind == "sq_overflow_unsignaled_run" && d.QPNum == full[0]
	}
	if len(rep.QPs) != 4 || !found {
		t.Errorf("%d QPs, SQ full on %v, diagnoses %+v: want 4 QPs and the overflow's diagnosis on the one full", len(rep.QPs), full, rep.Diagnoses)
	}
	text, err := exec.Command(bin, "report", m.file).Output()
	if err != nil {
		t.Fatal(err)
	}
	// replay with no terminal prints the same report
	replayed, err := exec.Command(bin, "replay", m.file).Output()
	if err != nil || !bytes.Equal(replayed, text) || !bytes.Contains(text, []byte("flight recording: triggered by diagnosis=sq_overflow_unsignaled_run")) {
		t.Errorf("replay (err %v) is not the report, or it does not say it is a flight recording:\n%.600s\n---\n%.600s", err, replayed, text)
	}
	for _, format := range []string{"perfetto", "chrome"} {
		exported := filepath.Join(t.TempDir(), "export."+format)
		if out, err := exec.Command(bin, "export", "--format", format, "-o", exported, m.file).CombinedOutput(); err != nil {
			t.Errorf("export --format %s: %v\n%s", format, err, out)
		} else if st, err := os.Stat(exported); err != nil || st.Size() == 0 {
			t.Errorf("export --format %s: %v, an empty file", format, err)
		}
	}
	// advise replays each QP of the window: the full one as measured,
	// its refusals the report's, with settings that do not overflow
	out, err = exec.Command(bin, "advise", "--json", m.file).Output()
	var adv struct {
		QPs []struct {
			Measured struct {
				QPNum        uint32 `json:"qp_num"`
				ENOMEMSQFull uint64 `json:"enomem_sq_full"`
				LongestRun   uint64 `json:"longest_unsignaled_run"`
				MaxSendWR    uint64 `json:"max_send_wr"`
			} `json:"measured"`
			Best []json.RawMessage `json:"best"`
		} `json:"qps"`
	}
	if err != nil || json.Unmarshal(out, &adv) != nil || len(adv.QPs) != 4 {
		t.Fatalf("advise --json: %v, %d QPs\n%.400s", err, len(adv.QPs), out)
	}
	for _, q := range adv.QPs {
		if len(full) == 1 && q.Measured.QPNum == full[0] {
			for _, r := range rep.QPs {
				if r.QPNum == full[0] && (q.Measured.ENOMEMSQFull != r.ENOMEMSQFull || q.Measured.LongestRun < q.Measured.MaxSendWR || len(q.Best) == 0) {
					t.Errorf("advise on QP %#x: %+v, %d candidates; the report's SQ-full refusals %d: want them, an unsignaled run of the depth and advice",
						full[0], q.Measured, len(q.Best), r.ENOMEMSQFull)
				}
			}
		}
	}
}

// BenchmarkFlight measures the flight recorder on the built-in workload
// at full speed: 30 s of healthy traffic, then a never-signal overflow,
// under `record --flight 10s` with its default memory bound. It reports
// the bytes the flight directory held before the trigger, sqscope's
// anonymous and peak resident memory against the bound, the events the
// bound dropped, and how long after the trigger and its --after window
// the file was complete.
func BenchmarkFlight(b *testing.B) {
	bpftest.Require(b, probe.Preflight)
	for i := 0; i < b.N; i++ {
		// the target runs on past the after window, whose end completes
		// the file (later files, made as the overflow goes on, are not
		// measured)
		m := runFlightLate(b, 10, 30, 0, "2s", 4)
		b.ReportMetric(float64(m.written), "healthy-bytes")
		b.ReportMetric(m.healthyS, "healthy-s")
		b.ReportMetric(float64(m.anonKiB)/1024, "anon-MiB")
		b.ReportMetric(float64(m.hwmKiB)/1024, "hwm-MiB")
		b.ReportMetric(float64(m.span.info.Dropped), "dropped")
		b.ReportMetric(float64(m.span.info.TriggerNS-m.span.firstNS)/1e9, "window-s")
		b.ReportMetric(float64(m.lateNS)/1e6, "late-ms")
	}
}
