package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sqscope/sqscope/cmd/internal/cli/ptytest"
	"github.com/sqscope/sqscope/report/pagetest"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/verbs/nicmodel"
)

// --html FILE of trace and record is checked and created before the
// target starts: every refusal a usage error (exit status 2) of one
// line, leaving what was there as it was and creating nothing; a path
// taken is a new file of mode 0600 until the page is written, removed
// if it never is.
func TestTracePageOpen(t *testing.T) {
	tty := ptytest.Open(t)
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	write := func(name, content string) string {
		if err := os.WriteFile(path(name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path(name)
	}
	write("rec.sqscope", "SQSCOPE\x00 a recording")
	write("page.html", "an old page")
	write("summary.txt", "a summary")
	if err := os.Symlink(path("page.html"), path("link.html")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(path("sub"), path("alias")); err != nil {
		t.Fatal(err)
	}
	var pipe bytes.Buffer
	for _, tc := range []struct {
		name    string
		html    string
		tf      Target
		others  []string
		carries string
		stdout  io.Writer
		err     string // "" when taken
	}{
		{"a new file", path("new.html"), Target{}, nil, "", tty, ""},
		{"an existing page, replaced once complete", path("page.html"), Target{}, nil, "", tty, ""},
		{"standard output, a pipe", "-", Target{RecordTo: path("r.sqscope")}, nil, "", &pipe, ""},
		{"standard output, a terminal", "-", Target{}, nil, "", tty, "standard output is a terminal: give --html FILE"},
		{"standard output carrying the summary", "-", Target{}, nil, "the summary", &pipe, "standard output carries the summary"},
		{"through a link", path("link.html"), Target{}, nil, "", tty, "symbolic link"},
		{"a directory", path("sub"), Target{}, nil, "", tty, "a directory"},
		{"an existing recording", path("rec.sqscope"), Target{}, nil, "", tty, "existing recording"},
		{"the recording being written", path("new.sqscope"), Target{RecordTo: path("new.sqscope")}, nil, "", tty, "also an output"},
		{"the recording, named through a link", path("alias/new.sqscope"), Target{RecordTo: path("sub/new.sqscope")}, nil, "", tty, "also an output"},
		{"the recording forced over", path("rec.sqscope"), Target{RecordTo: path("rec.sqscope"), Force: true}, nil, "", tty, "also an output"},
		{"the summary's file", path("summary.txt"), Target{}, []string{path("summary.txt")}, "", tty, "also an output"},
		{"with a flight recorder", path("f.html"), Target{RecordTo: path("flight"), Flight: &session.FlightConfig{}}, nil, "", tty, "flight recorder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]string{}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				b, _ := os.ReadFile(path(e.Name()))
				before[e.Name()] = string(b)
			}
			p := &TracePage{Path: tc.html}
			err := p.Open("record", &tc.tf, tc.others, tc.carries, tc.stdout)
			if tc.err != "" {
				var ee *ExitError
				if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "record: ") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("Open: %v; want a usage error of one line with %q", err, tc.err)
				}
				after, _ := os.ReadDir(dir)
				if len(after) != len(entries) {
					t.Errorf("%d entries in the directory after, %d before: something was created", len(after), len(entries))
				}
				for name, content := range before {
					if b, _ := os.ReadFile(path(name)); string(b) != content {
						t.Errorf("%s changed", name)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if p.ToStdout() != (tc.html == "-") {
				t.Errorf("to standard output: %v", p.ToStdout())
			}
			if old, ok := before[filepath.Base(tc.html)]; ok {
				if b, _ := os.ReadFile(tc.html); string(b) != old {
					t.Error("the existing page changed before a new one was written")
				}
			} else if tc.html != "-" {
				if st, err := os.Stat(tc.html); err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("the new page: %v, mode %v; want 0600", err, st.Mode().Perm())
				}
			}
			p.Discard()
			if old, ok := before[filepath.Base(tc.html)]; ok {
				if b, _ := os.ReadFile(tc.html); string(b) != old {
					t.Error("the existing page changed though no page was written")
				}
			} else if _, err := os.Stat(tc.html); tc.html != "-" && err == nil {
				t.Error("a page never written was left")
			}
		})
	}

	fs := pflag.NewFlagSet("trace", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var p TracePage
	p.Register(fs)
	if err := fs.Parse([]string{"--html="}); err == nil {
		t.Error("--html with no file name was taken")
	}
	var none *TracePage
	if err := none.Write(context.Background(), &Target{}, nicmodel.Model{}, io.Discard); err != nil || none.ToStdout() {
		t.Errorf("no --html: Write %v", err)
	}
}

// record --html reads the recording written back, as report --html
// does: the page holds its QPs, the occupancy over the run and the
// advice, and replaces an older page, keeping its mode. A live trace's
// page needs the trace watched.
func TestTracePageOfRecording(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.sqscope")
	b, err := os.ReadFile(filepath.Join("..", "..", "sqscope", "testdata", "faults", "lazy-poll.sqscope"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, b, 0o600); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, "run.html")
	if err := os.WriteFile(html, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	tf := Target{RecordTo: rec}
	p := &TracePage{Path: html}
	if err := p.Open("record", &tf, nil, "", io.Discard); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if err := p.Write(context.Background(), &tf, nicmodel.Model{LinkGbps: 100, WQENS: 10, DMAReadNS: 450, RTTNS: 1500}, &stderr); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(html); st.Mode().Perm() != 0o640 {
		t.Errorf("the replaced page has mode %v, want the old one's 0640", st.Mode().Perm())
	}
	pg := pagetest.Parse(t, page)
	for _, want := range []string{"recording " + rec, "sq_overflow_cq_not_polled", "no peak is lost", "QP 0x1c0 (pid 25590, RC): 2000 WRs recorded", "best of "} {
		if !strings.Contains(pg.Text, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if len(pg.Rows) != 1 || !strings.Contains(stderr.String(), "wrote "+html+": 1 QPs, 1 diagnoses") {
		t.Errorf("%d rows; stderr %q", len(pg.Rows), stderr.String())
	}

	live := &TracePage{Path: filepath.Join(dir, "live.html")}
	if err := live.Open("trace", &Target{}, nil, "", io.Discard); err != nil {
		t.Fatal(err)
	}
	defer live.Discard()
	if err := live.Write(context.Background(), &Target{}, nicmodel.Model{}, io.Discard); err == nil || !strings.Contains(err.Error(), "not watched") {
		t.Errorf("a live page never watched: %v", err)
	}
}
