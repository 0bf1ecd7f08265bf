package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// SIGUSR1 triggers a flight recording of a process attached to while it
// runs, by -p and by -a: the file holds its QP and the posts of the
// second before the signal, and -a's holds no process the test did not
// start but those it found (others may run on the host: they are ignored).
func TestFlightSignalAttached(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	for _, how := range []string{"-p", "-a"} {
		t.Run(how, func(t *testing.T) {
			pid := startWorkload(t, "-D", "60", "--rate", "5000").Process.Pid
			dir := filepath.Join(t.TempDir(), "flight")
			target := []string{"-p", strconv.Itoa(pid)}
			if how == "-a" {
				target = []string{"-a"}
			}
			args := append([]string{"--flight", "1s", "--after", "300ms", "--trigger", "signal", "-o", dir}, target...)
			rec, stderr := startFlight(t, append(args, "--max-files", "20")...)
			// attached: -p says it found the running process's QP in its
			// memory; -a that it traces every process (the scan of those
			// running goes on in the background: a file before it ended
			// may miss the process, and the signal is sent again)
			attached := "process " + strconv.Itoa(pid) + " was running before sqscope attached"
			if how == "-a" {
				attached = "sqscope: tracing every process that uses verbs"
			}
			wait := func(what string, re *regexp.Regexp, n int, limit time.Duration) {
				t.Helper()
				for deadline := time.Now().Add(bpftest.Timeout(t, limit)); len(re.FindAllString(stderr.String(), -1)) < n; {
					if time.Now().After(deadline) {
						rec.Process.Kill()
						rec.Wait()
						t.Fatalf("%s:\n%s", what, stderr)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			wait("not attached to "+strconv.Itoa(pid), regexp.MustCompile(regexp.QuoteMeta(attached)), 1, 20*time.Second)
			written := regexp.MustCompile(`flight recording (\S+): signal`)
			var wrs uint64
			var file string
			tries := 0
			for deadline := time.Now().Add(bpftest.Timeout(t, 20*time.Second)); wrs < 1000; tries++ {
				if tries > 0 && time.Now().After(deadline) {
					t.Fatalf("%d files, none with the posts of process %d (last: %d WRs):\n%s", tries, pid, wrs, stderr)
				}
				time.Sleep(1500 * time.Millisecond) // a second of posts to keep
				if err := rec.Process.Signal(syscall.SIGUSR1); err != nil {
					t.Fatal(err)
				}
				wait("no file after SIGUSR1", written, tries+1, 5*time.Second)
				m := written.FindAllStringSubmatch(stderr.String(), -1)
				file = m[len(m)-1][1]
				wrs = flightWRsOf(t, file, uint32(pid))
			}
			t.Logf("%s: the file of signal %d holds %d WRs of process %d", how, tries, wrs, pid)
			rec.Process.Signal(syscall.SIGINT)
			if err := rec.Wait(); err != nil {
				t.Fatalf("record %s: %v\n%s", how, err, stderr)
			}
			if files := flightFiles(t, dir); len(files) != tries || files[len(files)-1] != file {
				t.Fatalf("files %v, want %d, the last %s", files, tries, file)
			}
			sp := readFlight(t, file)
			before := float64(sp.info.TriggerNS-sp.firstNS) / 1e9
			if sp.info.Trigger != "signal" || before < 0.9 || before > 1.6 {
				t.Errorf("trigger %q, %.3f s before it", sp.info.Trigger, before)
			}
		})
	}
}

// flightWRsOf is the WRs of process pid's QPs in a recording, by its
// JSON report.
func flightWRsOf(t *testing.T, path string, pid uint32) uint64 {
	t.Helper()
	out, errs, code, err := sqscope("report", "--json", path)
	if code != 0 || err != nil {
		t.Fatalf("report %s: exit %d (%v): %s", path, code, err, errs)
	}
	var rep struct {
		QPs []struct {
			PID uint32 `json:"pid"`
			WRs uint64 `json:"wrs"`
		} `json:"qps"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var wrs uint64
	for _, q := range rep.QPs {
		if q.PID == pid {
			wrs += q.WRs
		}
	}
	return wrs
}
