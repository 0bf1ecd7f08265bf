// Package cli is the flag plumbing sqscope's commands share: usage texts
// with examples, one-line errors with exit status 2 for bad usage, flags
// given before or after positional arguments, and unsigned flags that say
// what they want.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ExitError carries an exit status other than 1.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// UsageErr is a usage error: one line, exit status 2.
func UsageErr(format string, a ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, a...)}
}

// ParseQuiet runs parse (a FlagSet's Parse, or a loop around it) so that a
// bad flag yields only the one-line error the caller returns, and -h/--help
// prints the full usage to w.
func ParseQuiet(fs *flag.FlagSet, w io.Writer, parse func() error) error {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := parse()
	fs.Usage = usage
	fs.SetOutput(w)
	if errors.Is(err, flag.ErrHelp) && usage != nil {
		usage()
	}
	return err
}

// CommandFlags makes a command's FlagSet whose usage text, written to help
// (standard output, as users page it), is the usage line, what the command
// does, its flags and its examples.
func CommandFlags(name, usage, about, examples string, help io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(help)
	fs.Usage = func() {
		fmt.Fprintf(help, "usage: sqscope %s\n\n%s\n\nFLAGS\n", usage, about)
		PrintFlags(help, fs)
		fmt.Fprint(help, examples)
	}
	return fs
}

// ParseCommand parses a command's arguments: -h prints the usage to help,
// a bad flag is a usage error (exit status 2) naming the command.
func ParseCommand(fs *flag.FlagSet, args []string, help io.Writer) error {
	err := ParseQuiet(fs, help, func() error { return fs.Parse(args) })
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return UsageErr("%s: %v", fs.Name(), err)
}

// ParseArgs parses flags given before or after the positional arguments
// (the flag package stops at the first one); everything after "--" is
// positional.
func ParseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// Positional parses a command's flags, given before or after its
// positional arguments, and returns those.
func Positional(fs *flag.FlagSet, name string, args []string) ([]string, error) {
	var pos []string
	err := ParseQuiet(fs, fs.Output(), func() (err error) {
		pos, err = ParseArgs(fs, args)
		return err
	})
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		err = UsageErr("%s: %v", name, err)
	}
	return pos, err
}

// OneFile parses the flags of a command that takes exactly one recording.
func OneFile(fs *flag.FlagSet, name string, args []string) (string, error) {
	pos, err := Positional(fs, name, args)
	if err != nil {
		return "", err
	}
	switch len(pos) {
	case 0:
		return "", UsageErr("%s: no recording given (usage: sqscope %s FILE)", name, name)
	case 1:
		return pos[0], nil
	}
	return "", UsageErr("%s: one recording at a time, got %d (%s)", name, len(pos), strings.Join(pos, " "))
}

// UintVar registers a uint32 flag.
func UintVar(fs *flag.FlagSet, p *uint32, name string, v uint32, usage string) {
	*p = v
	fs.Var((*uint32Flag)(p), name, usage)
}

// uint32Flag is a uint32 flag whose errors say what it wants.
type uint32Flag uint32

func (u *uint32Flag) String() string { return fmt.Sprint(uint32(*u)) }

func (u *uint32Flag) Set(s string) error {
	var x uint64
	if _, err := fmt.Sscan(s, &x); err != nil || strings.HasPrefix(s, "-") {
		return fmt.Errorf("want a non-negative integer, got %q", s)
	}
	if x > 1<<32-1 {
		return fmt.Errorf("%s is more than this flag takes (at most %d)", s, uint32(1<<32-1))
	}
	*u = uint32Flag(x)
	return nil
}

// FlagGiven reports whether any of the names was given on the command line.
func FlagGiven(fs *flag.FlagSet, names ...string) bool {
	given := false
	fs.Visit(func(fl *flag.Flag) {
		for _, n := range names {
			if fl.Name == n {
				given = true
			}
		}
	})
	return given
}
