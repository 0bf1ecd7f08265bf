package durflag

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// Every duration flag takes a Go duration or a bare number of seconds,
// and refuses anything else with the value it was given.
func TestDurations(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"5", 5 * time.Second, false},
		{"5s", 5 * time.Second, false},
		{"0.25", 250 * time.Millisecond, false},
		{"1m30s", 90 * time.Second, false},
		{"200ms", 200 * time.Millisecond, false},
		{"0", 0, false},
		{"-1", 0, true},
		{"-2s", 0, true},
		{"5 s", 0, true},
		{"NaN", 0, true},
		{"1e7", 0, true},
		{"soon", 0, true},
	} {
		t.Run(c.in, func(t *testing.T) {
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var d time.Duration
			var s float64
			VarP(fs, &d, "duration", "D", time.Minute, "for `DURATION`")
			SecondsVarP(fs, &s, "interval", "i", 1, "every `DURATION`")
			err := fs.Parse([]string{"-D", c.in, "--interval", c.in})
			switch {
			case c.bad && (err == nil || !strings.Contains(err.Error(), c.in)):
				t.Errorf("%q: error %v, want one naming the value", c.in, err)
			case !c.bad && (err != nil || d != c.want || s != c.want.Seconds()):
				t.Errorf("%q: %v and %v s (error %v), want %v", c.in, d, s, err, c.want)
			}
		})
	}
}

// The defaults stand until a flag is given, and help shows them with the
// usage's placeholder.
func TestDefaults(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var d time.Duration
	var s float64
	VarP(fs, &d, "duration", "D", 10*time.Second, "stop after `DURATION`")
	SecondsVarP(fs, &s, "interval", "i", 0.1, "every `DURATION`")
	help := fs.FlagUsages()
	if d != 10*time.Second || s != 0.1 {
		t.Errorf("defaults %v and %v", d, s)
	}
	for _, want := range []string{"-D, --duration DURATION", "(default 10s)", "-i, --interval DURATION", "(default 0.1)"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
}
