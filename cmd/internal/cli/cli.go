// Package cli is the command-line plumbing sqscope's commands share, on
// cobra and pflag: GNU long and short flags with typed placeholders,
// usage texts with examples, one-line errors with exit status 2 for bad
// usage that name the flag, and completion of flag values.
package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
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

// OneFile is the one recording a command (name) takes as its argument.
func OneFile(name string, args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", UsageErr("%s: no recording given (usage: sqscope %s FILE)", name, name)
	case 1:
		return args[0], nil
	}
	return "", UsageErr("%s: one recording at a time, got %d (%s)", name, len(args), strings.Join(args, " "))
}

// UintVarP registers a uint32 flag (short: its one-letter name, or "").
func UintVarP(fs *pflag.FlagSet, p *uint32, name, short string, v uint32, usage string) {
	*p = v
	fs.VarP((*uint32Flag)(p), name, short, usage)
}

// uint32Flag is a uint32 flag whose errors say what it wants.
type uint32Flag uint32

func (u *uint32Flag) String() string { return fmt.Sprint(uint32(*u)) }

// Type names the value in help: N.
func (u *uint32Flag) Type() string { return "N" }

func (u *uint32Flag) Set(s string) error {
	x, err := strconv.ParseUint(s, 10, 64)
	if err != nil && !strings.Contains(err.Error(), strconv.ErrRange.Error()) || strings.HasPrefix(s, "-") {
		return errors.New("want a non-negative integer")
	}
	if err != nil || x > 1<<32-1 {
		return fmt.Errorf("%s is more than this flag takes (at most %d)", s, uint32(1<<32-1))
	}
	*u = uint32Flag(x)
	return nil
}
