package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

// startFlight starts `sqscope record --flight ...` with args; the caller
// waits for it.
func startFlight(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(sqscopeBin(t), append([]string{"record"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stderr
}

// flightFiles lists the flight recordings in dir, oldest first, and
// checks the directory's and the files' modes.
func flightFiles(t testing.TB, dir string) []string {
	t.Helper()
	if st, err := os.Lstat(dir); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("%s: %v (err %v), want a directory with mode 0700", dir, st.Mode(), err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "sqscope-flight-*.sqscope"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for _, f := range files {
		if st, err := os.Lstat(f); err != nil || st.Mode().Perm() != 0o600 || !st.Mode().IsRegular() {
			t.Errorf("%s: %v (err %v), want a regular file with mode 0600", f, st.Mode(), err)
		}
	}
	return files
}

// flightSpan is what a flight recording holds: its header's flight info,
// the times of its first and last event and of its first failed post.
type flightSpan struct {
	info                      trace.FlightInfo
	events                    int
	firstNS, lastNS, failedNS uint64
	end                       string
}

func readFlight(t testing.TB, path string) flightSpan {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Info().Flight == nil {
		t.Fatalf("%s: no flight info in its header", path)
	}
	sp := flightSpan{info: *r.Info().Flight}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return sp
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		sp.events++
		ns := ev.Hdr().TimeNS
		if sp.firstNS == 0 || ns < sp.firstNS {
			sp.firstNS = ns
		}
		sp.lastNS = max(sp.lastNS, ns)
		switch e := ev.(type) {
		case *trace.Post:
			if e.Ret != 0 && sp.failedNS == 0 {
				sp.failedNS = ns
			}
		case *trace.End:
			sp.end = e.Reason
		}
	}
}

// A never-signal overflow after seconds of healthy traffic: one file,
// holding the 2 s before the first ENOMEM and the after window (the
// workload ends inside it), and its report finds the overflow's QP and
// cause as a recording of the whole run does.
func TestFlightOverflow(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	for _, trigger := range []string{"enomem", "diagnosis=sq_overflow_unsignaled_run"} {
		t.Run(trigger, func(t *testing.T) { flightOverflow(t, trigger, false) })
	}
	// the same of a command started with -c
	t.Run("enomem, -c", func(t *testing.T) { flightOverflow(t, "enomem", true) })
}

func flightOverflow(t *testing.T, trigger string, viaC bool) {
	dir := filepath.Join(t.TempDir(), "flight")
	wl := []string{"--qps", "4", "-s", "64", "-I", "64", "-Q", "16", "-t", "128", "--fault", "never-signal", "--fault-after", "3",
		"--fault-qp", "2", "-D", "4.5", "--rate", "20000"}
	target := append([]string{"--workload", "--"}, wl...)
	if viaC {
		target = []string{"-c", sqscopeBin(t) + " workload " + strings.Join(wl, " ")}
	}
	cmd, stderr := startFlight(t, append([]string{"--flight", "2s", "--trigger", trigger, "-o", dir}, target...)...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record --flight: %v\n%s", err, stderr)
	}
	files := flightFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d files %v, want 1\n%s", len(files), files, stderr)
	}
	if !strings.Contains(stderr.String(), "recordings written: 1 on "+trigger) || !strings.Contains(stderr.String(), "0 event(s) dropped") {
		t.Errorf("stderr does not say one recording on %s, none dropped:\n%s", trigger, stderr)
	}
	sp := readFlight(t, files[0])
	before := float64(sp.info.TriggerNS-sp.firstNS) / 1e9
	after := float64(sp.lastNS-sp.info.TriggerNS) / 1e9
	t.Logf("%s: %d events, %.3f s before the trigger, %.3f s after; ends %q", filepath.Base(files[0]), sp.events, before, after, sp.end)
	switch {
	case sp.info.Trigger != trigger || sp.failedNS != sp.info.TriggerNS:
		t.Errorf("trigger %q at %d, first failed post at %d: want %s at the first failure", sp.info.Trigger, sp.info.TriggerNS, sp.failedNS, trigger)
	case sp.info.WindowNS != sp.firstNS:
		t.Errorf("header says the window starts at %d, its first event is at %d", sp.info.WindowNS, sp.firstNS)
	case before < 2 || before > 3:
		t.Errorf("%.3f s before the trigger, want 2 s and a block more at most (a block ends every 250 ms, later on a busy host)", before)
	case after < 1 || after > 2:
		t.Errorf("%.3f s after the trigger, want the 1.5 s until the workload ended", after)
	case !strings.Contains(sp.end, "exited"):
		t.Errorf("ends %q, want the target's exit", sp.end)
	}

	out, err := exec.Command(sqscopeBin(t), "report", "--json", files[0]).Output()
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Recording session.RecordingInfo `json:"recording"`
		QPs       []struct {
			QPNum        uint32 `json:"qp_num"`
			Found        string `json:"found"`
			ENOMEMSQFull uint64 `json:"enomem_sq_full"`
		} `json:"qps"`
		Diagnoses []struct {
			Kind  string `json:"kind"`
			QPNum uint32 `json:"qp_num"`
		} `json:"diagnoses"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if f := rep.Recording.Flight; f == nil || f.Trigger != trigger || f.WindowS < 2 || f.TriggerWall == "" {
		t.Errorf("report's flight %+v, want %s with a 2 s window", f, trigger)
	}
	var full []uint32
	for _, q := range rep.QPs {
		if q.Found != "flight window" {
			t.Errorf("QP %#x found by %q, want its flight window", q.QPNum, q.Found)
		}
		if q.ENOMEMSQFull > 0 {
			full = append(full, q.QPNum)
		}
	}
	if len(rep.QPs) != 4 || len(full) != 1 {
		t.Fatalf("%d QPs, SQ full on %v: want 4 QPs, one full", len(rep.QPs), full)
	}
	if !slices.ContainsFunc(rep.Diagnoses, func(d struct {
		Kind  string `json:"kind"`
		QPNum uint32 `json:"qp_num"`
	}) bool {
		return d.Kind == "sq_overflow_unsignaled_run" && d.QPNum == full[0]
	}) {
		t.Errorf("diagnoses %+v, want sq_overflow_unsignaled_run on QP %#x", rep.Diagnoses, full[0])
	}
	text, err := exec.Command(sqscopeBin(t), "report", files[0]).Output()
	if err != nil || !strings.Contains(string(text), "flight recording: triggered by "+trigger) ||
		!strings.Contains(string(text), "occupancy a lower bound until a completion re-synchronises it") {
		t.Errorf("text report (err %v) does not say it is a flight recording:\n%.600s", err, text)
	}
}

// SIGUSR1 triggers a file; with --max-files 2 three triggers keep the
// last two, and a file of another name in the directory stays.
func TestFlightSignalMaxFiles(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	dir := filepath.Join(t.TempDir(), "flight")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(other, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	cmd, stderr := startFlight(t, "--flight", "1s", "--after", "300ms", "--trigger", "signal", "--max-files", "2",
		"-o", dir, "--workload", "--", "-D", "30", "--rate", "5000", "--ready-file", ready)
	waitFile(t, ready) // traffic from now: each file's second before its signal holds some
	written := regexp.MustCompile(`flight recording (\S+): signal`)
	var latency [3]time.Duration
	for i := range 3 {
		time.Sleep(1500 * time.Millisecond)
		sent := time.Now()
		if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		// wait for the file: the after window, then the line saying it
		for deadline := time.Now().Add(bpftest.Timeout(t, 5*time.Second)); len(written.FindAllString(stderr.String(), -1)) <= i; {
			if time.Now().After(deadline) {
				t.Fatalf("no file after SIGUSR1 #%d:\n%s", i+1, stderr)
			}
			time.Sleep(10 * time.Millisecond)
		}
		latency[i] = time.Since(sent)
	}
	t.Logf("each file complete %v after its SIGUSR1 (--after 300ms)", latency)
	cmd.Process.Signal(syscall.SIGINT) // the workload runs on: Ctrl-C
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record --flight: %v\n%s", err, stderr)
	}
	var names []string
	for _, m := range written.FindAllStringSubmatch(stderr.String(), -1) {
		names = append(names, m[1])
	}
	files := flightFiles(t, dir)
	if len(names) != 3 || !slices.Equal(files, names[1:]) {
		t.Fatalf("wrote %v, kept %v: want the last two of three", names, files)
	}
	if b, err := os.ReadFile(other); err != nil || string(b) != "mine" {
		t.Errorf("another file in the directory changed: %q, %v", b, err)
	}
	for _, f := range files {
		sp := readFlight(t, f)
		before := float64(sp.info.TriggerNS-sp.firstNS) / 1e9
		if sp.info.Trigger != "signal" || before < 1 || before > 1.6 || sp.end != "flight recording: the window after the trigger ended" {
			t.Errorf("%s: trigger %q, %.3f s before it, ends %q", f, sp.info.Trigger, before, sp.end)
		}
	}
}

// A bound smaller than the window's events: the ring holds no more, the
// events it dropped are counted, said on exit and in the file, and the
// file's window is that much shorter.
func TestFlightMemoryBound(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	dir := filepath.Join(t.TempDir(), "flight")
	// some 3 MB of blocks in 6 s (0.5 MB/s when this test was written):
	// as long again as the host's traps are dearer, which slow the
	// workload as much, and a window longer than that
	wait := bpftest.Timeout(t, 6*time.Second)
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }
	cmd, stderr := startFlight(t, "--flight", secs(wait+10*time.Second)+"s", "--flight-mib", "1", "--after", "100ms", "--trigger", "signal",
		"-o", dir, "--workload", "--", "-D", secs(wait+time.Second), "--qps", "8", "-Q", "1", "-s", "64")
	time.Sleep(wait)
	rss := vmKiB(t, cmd.Process.Pid, "RssAnon")
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record --flight: %v\n%s", err, stderr)
	}
	m := regexp.MustCompile(`(\d+) event\(s\) dropped by --flight-mib`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("stderr does not count the events dropped:\n%s", stderr)
	}
	dropped, _ := strconv.ParseUint(m[1], 10, 64)
	files := flightFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d files, want 1\n%s", len(files), stderr)
	}
	st, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	sp := readFlight(t, files[0])
	before := float64(sp.info.TriggerNS-sp.firstNS) / 1e9
	t.Logf("%d dropped in all, %d before the trigger; the file holds %.3f s before it in %d bytes; sqscope's anonymous resident memory before the trigger %d KiB", dropped, sp.info.Dropped, before, st.Size(), rss)
	// --flight-mib and 64 MiB; the mapped files (the binary, the BPF
	// ring buffer's pages) are as a plain record's
	if rss > (1+64)<<10 {
		t.Errorf("anonymous resident memory %d KiB, want at most %d", rss, (1+64)<<10)
	}
	// the file is the ring's blocks (at most the bound), the prefix and
	// the 0.1 s after
	if dropped == 0 || sp.info.Dropped == 0 || sp.info.Dropped > dropped || st.Size() > 3<<19 {
		t.Errorf("dropped %d (file: %d), %d bytes: want events dropped, at most the 1 MiB bound and the after window", dropped, sp.info.Dropped, st.Size())
	}
}

// vmKiB reads a memory figure of /proc/PID/status, in KiB.
func vmKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	n, ok := statusKiB(b, field)
	if !ok {
		t.Fatalf("no %s in /proc/%d/status", field, pid)
	}
	return n
}

// statusKiB is the field of /proc/PID/status given in kB, if it has it.
func statusKiB(status []byte, field string) (int64, bool) {
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(status)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(m[1]), 10, 64)
	return n, err == nil
}

// Bad flight flags: one line, exit 2, nothing started nor created.
func TestFlightBadFlags(t *testing.T) {
	bin := sqscopeBin(t)
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "new")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no trigger", []string{"--flight", "2s", "-o", dir}, "--flight needs a --trigger"},
		{"a trigger not known", []string{"--flight", "2s", "--trigger", "oom", "-o", dir}, `"oom": want enomem, signal, diagnosis`},
		{"a diagnosis not known", []string{"--flight", "2s", "--trigger", "diagnosis=nope", "-o", dir}, `"nope": not a diagnosis kind`},
		{"a value to enomem", []string{"--flight", "2s", "--trigger", "enomem=1", "-o", dir}, "want enomem, signal"},
		{"trigger without --flight", []string{"--trigger", "enomem", "-o", dir}, "--trigger needs --flight DURATION"},
		{"max-files without --flight", []string{"--max-files", "3", "-o", dir}, "--max-files needs --flight DURATION"},
		{"negative window", []string{"--flight", "-1s", "--trigger", "enomem", "-o", dir}, `invalid value "-1s" for --flight: want a duration`},
		{"no files", []string{"--flight", "2s", "--trigger", "enomem", "--max-files", "0", "-o", dir}, "--max-files must be positive"},
		{"no memory", []string{"--flight", "2s", "--trigger", "enomem", "--flight-mib", "0", "-o", dir}, "--flight-mib 0"},
		{"standard output", []string{"--flight", "2s", "--trigger", "enomem", "-o", "-"}, "--flight needs -o DIR"},
		{"force", []string{"--flight", "2s", "--trigger", "enomem", "--force", "-o", dir}, "never replaces"},
		{"enomem in counters mode", []string{"--flight", "2s", "--trigger", "enomem", "--mode", "counters", "-o", dir}, "--trigger enomem needs --mode events or sentinel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"record"}, tc.args...), "--workload", "--", "-n", "10")
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			msg := strings.TrimSuffix(stderr.String(), "\n")
			if !errors.As(err, &ee) || ee.ExitCode() != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
				t.Errorf("%v: %v, stderr %q; want exit 2 and one line with %q", args, err, msg, tc.want)
			}
			if _, err := os.Lstat(dir); err == nil {
				t.Errorf("%s was created", dir)
			}
		})
	}
	for _, args := range [][]string{{"--flight-dir", dir}, {"--flight", "2s", "--trigger", "signal"}} {
		cmd := exec.Command(bin, append(append([]string{"serve"}, args...), "--workload", "--", "-n", "10")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if msg := strings.TrimSuffix(stderr.String(), "\n"); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(msg, "--flight-dir DIR and --flight DURATION go together") {
			t.Errorf("serve %v: %v, stderr %q; want exit 2 saying the two go together", args, err, msg)
		}
	}
	// a file where the directory goes: refused before a target starts
	cmd := exec.Command(bin, "record", "--flight", "2s", "--trigger", "enomem", "-o", file, "--workload", "--", "-n", "10")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	msg := strings.TrimSuffix(stderr.String(), "\n")
	if err == nil || strings.Contains(msg, "\n") || !strings.Contains(msg, "not a directory") {
		t.Errorf("-o FILE: %v, stderr %q; want one line saying it is not a directory", err, msg)
	}
}

// Healthy traffic: nothing written, and the summary says no trigger
// fired.
func TestFlightHealthyWritesNothing(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	dir := filepath.Join(t.TempDir(), "flight")
	cmd, stderr := startFlight(t, "--flight", "1s", "--trigger", "enomem", "--trigger", "diagnosis=error", "-o", dir,
		"--workload", "--", "-D", "2", "--qps", "2", "-s", "64", "-I", "64", "-Q", "16")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record --flight: %v\n%s", err, stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 || !strings.Contains(stderr.String(), "recordings written: none: no trigger fired") {
		t.Errorf("directory holds %d entries (err %v), stderr:\n%s\nwant nothing written", len(entries), err, stderr)
	}
}

// serve --flight-dir: SIGUSR1 writes a file, counted on /metrics by its
// trigger.
func TestServeFlight(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	dir := filepath.Join(t.TempDir(), "flight")
	s := serveWith(t, "--mode", "events", "--flight", "1s", "--after", "200ms", "--trigger", "signal", "--flight-dir", dir,
		"--workload", "--", "-D", "30", "--rate", "2000")
	body, _ := s.scrape(t, "")
	if _, ok := value(series(t, body), "sqscope_flight_recordings_total", nil); ok {
		t.Errorf("a flight recording counted before any trigger")
	}
	if _, ok := value(series(t, body), "sqscope_flight_latest_recording_info", nil); ok {
		t.Errorf("a latest flight recording before any trigger")
	}
	if v, ok := value(series(t, body), "sqscope_flight_window_max_bytes", nil); !ok || v != 64<<20 {
		t.Errorf("sqscope_flight_window_max_bytes = %v (%v), want the default bound, 64 MiB", v, ok)
	}
	time.Sleep(1200 * time.Millisecond)
	if err := s.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	m := s.waitFor(t, regexp.MustCompile(`flight recording (\S+): signal`))
	body, _ = s.scrape(t, "")
	if n, ok := value(series(t, body), "sqscope_flight_recordings_total", map[string]string{"trigger": "signal"}); !ok || n != 1 {
		t.Errorf("sqscope_flight_recordings_total{trigger=\"signal\"} = %v (%v), want 1", n, ok)
	}
	if files := flightFiles(t, dir); len(files) != 1 || files[0] != m[1] {
		t.Errorf("files %v, want %s", files, m[1])
	}
	mfs := series(t, body)
	if n, ok := value(mfs, "sqscope_flight_latest_recording_info", map[string]string{"file": filepath.Base(m[1]), "trigger": "signal"}); !ok || n != 1 {
		t.Errorf("sqscope_flight_latest_recording_info{file=%q,trigger=\"signal\"} = %v (%v), want 1", filepath.Base(m[1]), n, ok)
	}
	if at, ok := value(mfs, "sqscope_flight_latest_recording_timestamp_seconds", nil); !ok || time.Since(time.Unix(int64(at), 0)) > time.Minute {
		t.Errorf("sqscope_flight_latest_recording_timestamp_seconds = %v (%v), want about now", at, ok)
	}
	if b, ok := value(mfs, "sqscope_flight_window_bytes", nil); !ok || b <= 0 || b > 64<<20 {
		t.Errorf("sqscope_flight_window_bytes = %v (%v), want some bytes within the bound", b, ok)
	}
	resp, err := http.Get("http://" + s.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	health, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(health), "tracing ") ||
		!strings.Contains(string(health), "\nlatest flight recording: "+m[1]+" (trigger signal, complete ") {
		t.Errorf("/healthz %d %q, want 200, tracing and the file", resp.StatusCode, health)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, s.log.String())
	}
}
