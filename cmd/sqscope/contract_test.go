package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// TestCLIContract is the command line's contract in one table: for each
// command line, its exit status, what stdout holds (JSON that parses where
// JSON is asked for), a line of stderr, and the state of files before and
// after. The binary runs as users run it, as root.
func TestCLIContract(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	bin := sqscopeBin(t)
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }

	// the files the cases act on
	writeRecording(t, p("good.sqscope"), sample(), 5)
	writeRecording(t, p("other.sqscope"), sample(), 5)
	full, _ := os.ReadFile(p("good.sqscope"))
	bad := append([]byte(nil), full...)
	bad[len(bad)-40] ^= 0xff
	os.WriteFile(p("damaged.sqscope"), bad, 0o600)
	os.WriteFile(p("existing.json"), []byte("keep me"), 0o644)
	os.WriteFile(p("target.json"), []byte("link target"), 0o644)
	os.Symlink(p("target.json"), p("link.json"))
	if err := syscall.Mknod(p("null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatalf("mknod: %v", err)
	}

	const (
		jsonDoc  = "json"   // stdout is one JSON document
		ndjson   = "ndjson" // stdout is JSON objects, one per line
		anything = ""
	)
	tests := []struct {
		name   string
		args   []string
		stdout string // jsonDoc, ndjson, or a string stdout holds
		code   int
		stderr string   // in stderr
		same   []string // files that must not change
		devOut bool     // stdout is /dev/full
	}{
		// files: only regular files or stdout, never a link, an input or a recording
		{"export to a device node", []string{"export", p("good.sqscope"), "-o", p("null")}, anything, 1, "is a character device, not a regular file", []string{p("null")}, false},
		{"export through a link", []string{"export", p("good.sqscope"), "-o", p("link.json")}, anything, 1, "is a symbolic link", []string{p("link.json"), p("target.json")}, false},
		{"export over its input", []string{"export", p("good.sqscope"), "-o", p("good.sqscope")}, anything, 1, "is also an input", []string{p("good.sqscope")}, false},
		{"export over a recording", []string{"export", p("good.sqscope"), "-o", p("other.sqscope")}, anything, 1, "is an existing recording: give --force", []string{p("other.sqscope")}, false},
		{"a damaged export keeps the old output", []string{"export", p("damaged.sqscope"), "-o", p("existing.json")}, anything, 1, "is left as it was", []string{p("existing.json")}, false},
		{"export to stdout", []string{"export", p("good.sqscope"), "-o", "-"}, jsonDoc, 0, "", []string{p("good.sqscope")}, false},
		{"record over a recording", []string{"record", "-o", p("good.sqscope"), "--workload", "--", "-n", "100"}, anything, 1, "is an existing recording: give --force", []string{p("good.sqscope")}, false},
		{"record to a directory", []string{"record", "-o", dir, "--workload", "--", "-n", "100"}, anything, 1, "is a directory", nil, false},
		{"report to a full device", []string{"report", p("good.sqscope")}, anything, 1, "no space left on device", nil, true},
		// streams
		{"trace --json is JSON alone", []string{"trace", "--json", "--workload", "--", "-n", "2000"}, jsonDoc, 0, "sqscope workload: device sim", nil, false},
		{"trace --json -i is NDJSON", []string{"trace", "--json", "-i", "0.2", "--workload", "--", "-n", "100000", "--rate", "200000"}, ndjson, 0, "", nil, false},
		{"report --json", []string{"report", "--json", p("good.sqscope")}, jsonDoc, 0, "", nil, false},
		// exit status
		{"the target's status", []string{"trace", "-c", "sh -c 'exit 3'"}, anything, 3, "the target exited with status 3", nil, false},
		{"a signal's", []string{"trace", "-c", "sh -c 'kill -TERM $$'"}, anything, 128 + 15, "killed by signal 15", nil, false},
		{"--fail-on", []string{"trace", "--fail-on", "error", "--workload", "--", "--fault", "never-signal", "-n", "2000"}, anything, 3, "--fail-on error", nil, false},
		{"a duration", []string{"trace", "-D", "1s", "--workload", "--", "-D", "60", "--rate", "1000"}, "trace ended: the time limit was reached", 0, "", nil, false},
		// conventions
		{"help on stdout", []string{"trace", "--help"}, "usage: sqscope trace", 0, "", nil, false},
		{"help TOPIC", []string{"help", "export"}, "usage: sqscope export", 0, "", nil, false},
		{"--version", []string{"--version"}, "sqscope ", 0, "", nil, false},
		{"a flag's names together", []string{"workload", "--help"}, "-s, --size N", 0, "", nil, false},
		{"perftest's names", []string{"workload", "-c", "UD", "-q", "2", "-n", "100"}, "UD SEND, api post_send, 2 QP(s)", 0, "", nil, false},
		{"a limit named", []string{"workload", "-I", "100000", "-n", "10"}, anything, 2, "the simulated HCA takes at most 828", nil, false},
		{"-n with -D", []string{"workload", "-n", "100", "-D", "0.5"}, anything, 2, "give -n/--iters or -D/--duration, not both", nil, false},
		{"completion", []string{"completion", "bash"}, "-F __start_sqscope sqscope", 0, "", nil, false},
		{"an unknown command", []string{"nope"}, anything, 2, `unknown command "nope"`, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]string{}
			for _, f := range tc.same {
				before[f] = fileState(t, f)
			}
			cmd := exec.Command(bin, tc.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if tc.devOut {
				f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
				if err != nil {
					t.Skip("no /dev/full")
				}
				defer f.Close()
				cmd.Stdout = f
			}
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tc.code, tc.stderr)
			}
			out := stdout.Bytes()
			switch tc.stdout {
			case jsonDoc:
				var v any
				if err := json.Unmarshal(out, &v); err != nil {
					t.Errorf("stdout is not one JSON document: %v: %.200q", err, out)
				}
			case ndjson:
				sc := bufio.NewScanner(bytes.NewReader(out))
				sc.Buffer(nil, 1<<24)
				n := 0
				for ; sc.Scan(); n++ {
					var v map[string]any
					if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
						t.Fatalf("line %d is not a JSON object: %v", n+1, err)
					}
				}
				if n < 2 {
					t.Errorf("%d JSON lines", n)
				}
			default:
				if !strings.Contains(string(out), tc.stdout) {
					t.Errorf("stdout lacks %q: %.300q", tc.stdout, out)
				}
			}
			for _, f := range tc.same {
				if after := fileState(t, f); after != before[f] {
					t.Errorf("%s changed: %q -> %q", f, before[f], after)
				}
			}
		})
	}
}
