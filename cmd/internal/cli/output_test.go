package cli

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/cmd/internal/cli/ptytest"
)

func TestCreateOutput(t *testing.T) {
	tty := ptytest.Open(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	for _, tc := range []struct {
		name        string
		out         string
		forTerminal bool
		stdout      io.Writer
		usage       bool // a usage error (exit 2)
		file        bool
	}{
		{"a page to a terminal", "-", false, tty, true, false},
		{"text to a terminal", "-", true, tty, false, false},
		{"a page to a pipe", "-", false, &buf, false, false},
		{"no name", "", false, &buf, true, false},
		{"a file", filepath.Join(dir, "page.html"), false, tty, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := CreateOutput("report", tc.out, nil, false, tc.forTerminal, tc.stdout)
			var ee *ExitError
			if tc.usage {
				if err == nil || !errors.As(err, &ee) || ee.Code != 2 || !strings.HasPrefix(err.Error(), "report: ") {
					t.Fatalf("error %v, want a usage error of report", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer o.Discard()
			if o.IsFile() != tc.file {
				t.Fatalf("IsFile %v, want %v", o.IsFile(), tc.file)
			}
			if _, err := o.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if err := o.Commit(); err != nil {
				t.Fatal(err)
			}
			if tc.file {
				if b, err := os.ReadFile(tc.out); err != nil || string(b) != "x" {
					t.Fatalf("file holds %q (%v)", b, err)
				}
			}
		})
	}
}

// Page.Output: --html to a file or a pipe, never to a terminal; -o only
// with --html, and --html without --json; text to a terminal.
func TestPageOutput(t *testing.T) {
	tty := ptytest.Open(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	for _, tc := range []struct {
		name   string
		page   Page
		json   bool
		stdout io.Writer
		usage  string // the usage error's words; "": none
		file   bool
	}{
		{"a page to a terminal", Page{HTML: true, Out: "-"}, false, tty, "standard output is a terminal", false},
		{"a page to a pipe", Page{HTML: true, Out: "-"}, false, &buf, "", false},
		{"a page to a file", Page{HTML: true, Out: filepath.Join(dir, "d.html")}, false, tty, "", true},
		{"a page and JSON", Page{HTML: true, Out: "-"}, true, &buf, "without --json", false},
		{"-o without --html", Page{Out: filepath.Join(dir, "e.html")}, false, &buf, "-o and --html go together", false},
		{"text to a terminal", Page{Out: "-"}, false, tty, "", false},
		{"JSON to a terminal", Page{Out: "-"}, true, tty, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.page.Output("diff", tc.json, nil, tc.stdout)
			var ee *ExitError
			if tc.usage != "" {
				if err == nil || !errors.As(err, &ee) || ee.Code != 2 || !strings.HasPrefix(err.Error(), "diff: ") || !strings.Contains(err.Error(), tc.usage) {
					t.Fatalf("error %v, want a usage error of diff with %q", err, tc.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer o.Discard()
			if o.IsFile() != tc.file {
				t.Fatalf("IsFile %v, want %v", o.IsFile(), tc.file)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "e.html")); err == nil {
		t.Error("-o without --html made its file")
	}
}
