package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/sqscope/sqscope/internal/outfile"
)

// Output is the file a command writes what -o names: a file through
// outfile (replaced only when complete, never an input or, unless forced,
// a recording), or standard output for "-".
type Output struct {
	io.Writer
	Name string
	f    *outfile.File
}

// CreateOutput opens -o name of the command cmd for writing. A page or
// binary (forTerminal false) is refused on standard output when that is a
// terminal, as a usage error.
func CreateOutput(cmd, name string, inputs []string, force, forTerminal bool, stdout io.Writer) (*Output, error) {
	o, err := createOutput("-o", name, inputs, force, forTerminal, stdout)
	switch {
	case err == nil:
		return o, nil
	case errors.As(err, new(*ExitError)):
		return nil, UsageErr("%s: %v", cmd, err)
	}
	return nil, fmt.Errorf("%s: creating output: %w", cmd, err)
}

// createOutput opens name, the value of the flag flagName, for writing:
// a usage error (*ExitError) when name is no output or a terminal a
// page is refused on, outfile's error when the file cannot be created.
func createOutput(flagName, name string, inputs []string, force, forTerminal bool, stdout io.Writer) (*Output, error) {
	switch {
	case name == "":
		return nil, UsageErr("%s needs a file name (or %s for stdout)", flagName, outfile.Stdout)
	case name == outfile.Stdout && !forTerminal && IsTerminal(stdout):
		return nil, UsageErr("standard output is a terminal: give %s FILE (or redirect standard output)", flagName)
	case name == outfile.Stdout:
		return &Output{Writer: stdout, Name: name}, nil
	}
	f, err := outfile.Create(name, 0o600, inputs, force, true)
	if err != nil {
		return nil, err
	}
	return &Output{Writer: f, Name: name, f: f}, nil
}

// IsFile says the output is a file, not standard output.
func (o *Output) IsFile() bool { return o.f != nil }

// Commit puts a file written in full in place.
func (o *Output) Commit() error {
	if o.f == nil {
		return nil
	}
	return o.f.Commit()
}

// Discard removes a file not committed (a no-op after Commit).
func (o *Output) Discard() {
	if o.f != nil {
		o.f.Discard()
	}
}

// IsTerminal says w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Replaces says the output replaces an existing file when committed.
func (o *Output) Replaces() bool { return o.f != nil && o.f.Replaces() }

// Page is the flags of a command that writes an HTML page as well as text
// or JSON (report, diff): --html, -o, --force.
type Page struct {
	HTML, Force bool
	Out         string
}

// Register adds the flags; what says what the page holds.
func (p *Page) Register(fs *pflag.FlagSet, what string) {
	fs.BoolVar(&p.HTML, "html", false, "write one self-contained HTML page ("+what+") to -o")
	fs.StringVarP(&p.Out, "output", "o", outfile.Stdout, "with --html: output `FILE` (- for stdout, not a terminal); an existing file keeps its mode, a new one is 0600")
	fs.BoolVar(&p.Force, "force", false, "let -o replace an existing recording")
}

// Output is where the command cmd writes: with --html the file -o names
// (never one of inputs), or standard output when that is not a terminal;
// else standard output, and -o or --json with --html is a usage error.
func (p *Page) Output(cmd string, json bool, inputs []string, stdout io.Writer) (*Output, error) {
	if p.HTML && json || !p.HTML && p.Out != outfile.Stdout {
		return nil, UsageErr("%s: -o and --html go together, without --json (text and JSON go to standard output)", cmd)
	}
	if !p.HTML {
		return &Output{Writer: stdout}, nil
	}
	return CreateOutput(cmd, p.Out, inputs, p.Force, false, stdout)
}
