package cli

import (
	"fmt"
	"io"
	"os"

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
	switch {
	case name == "":
		return nil, UsageErr("%s: -o needs a file name (or %s for stdout)", cmd, outfile.Stdout)
	case name == outfile.Stdout && !forTerminal && IsTerminal(stdout):
		return nil, UsageErr("%s: standard output is a terminal: give -o FILE (or redirect standard output)", cmd)
	case name == outfile.Stdout:
		return &Output{Writer: stdout, Name: name}, nil
	}
	f, err := outfile.Create(name, 0o600, inputs, force, true)
	if err != nil {
		return nil, fmt.Errorf("%s: creating output: %w", cmd, err)
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
