// Package durflag is the one rule every duration flag of sqscope follows:
// a Go duration (30s, 1m30s, 200ms) or a bare number of seconds (30,
// 0.5), whether the flag is kept as a time.Duration or as seconds.
package durflag

import (
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// maxSeconds bounds a bare number: past it a duration overflows.
const maxSeconds = 1e6

// Parse reads a duration flag's value: a Go duration or a bare number of
// seconds, 0 or more. Its error leaves the value to the flag package,
// which names it with the flag.
func Parse(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 || f > maxSeconds || math.IsNaN(f) {
			return 0, errors.New("want a duration of 0 or more, e.g. 30s or 30 (seconds)")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("want a duration, e.g. 30s, 1m30s, 200ms or 30 (seconds)")
	}
	return d, nil
}

// Var defines a duration flag name with default def: usage names its
// placeholder in backquotes, e.g. "stop after `DURATION`".
func Var(fs *pflag.FlagSet, d *time.Duration, name string, def time.Duration, usage string) {
	VarP(fs, d, name, "", def, usage)
}

// VarP is Var with a one-letter name too (short: "" for none).
func VarP(fs *pflag.FlagSet, d *time.Duration, name, short string, def time.Duration, usage string) {
	*d = def
	fs.VarP((*value)(d), name, short, usage)
}

// SecondsVarP defines a duration flag kept as a number of seconds.
func SecondsVarP(fs *pflag.FlagSet, s *float64, name, short string, def float64, usage string) {
	*s = def
	fs.VarP((*seconds)(s), name, short, usage)
}

type value time.Duration

func (d *value) Set(v string) error {
	x, err := Parse(v)
	if err == nil {
		*d = value(x)
	}
	return err
}

// Type names the value in help: DURATION.
func (d *value) Type() string { return "DURATION" }

// String is the value as help shows a default: "0" for none, which
// help leaves out.
func (d *value) String() string {
	if d == nil || *d == 0 {
		return "0"
	}
	return time.Duration(*d).String()
}

type seconds float64

func (s *seconds) Set(v string) error {
	x, err := Parse(v)
	if err == nil {
		*s = seconds(x.Seconds())
	}
	return err
}

func (s *seconds) Type() string { return "DURATION" }

func (s *seconds) String() string {
	if s == nil {
		return "0"
	}
	return strconv.FormatFloat(float64(*s), 'g', -1, 64)
}
