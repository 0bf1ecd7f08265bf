package cli

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// testCommand is a command with --json, -s/--size and its arguments
// kept, run on args.
func testCommand(args ...string) (pos []string, json bool, size uint32, out string, err error) {
	c := Command("report", "summary", "report FILE", "About.", "\nEXAMPLES\n  report x\n")
	c.Flags().BoolVar(&json, "json", false, "print JSON")
	UintVarP(c.Flags(), &size, "size", "s", 64, "payload bytes per WR")
	c.RunE = func(_ *cobra.Command, args []string) error {
		pos = args
		return nil
	}
	var b bytes.Buffer
	c.SetOut(&b)
	c.SetErr(&b)
	c.SetArgs(args)
	err = c.Execute()
	return pos, json, size, b.String(), err
}

func TestArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		pos  []string
		json bool
	}{
		{"flag first", []string{"--json", "a"}, []string{"a"}, true},
		{"flag after an argument", []string{"a", "--json", "b"}, []string{"a", "b"}, true},
		{"after -- everything is an argument", []string{"a", "--", "--json"}, []string{"a", "--json"}, false},
		{"none", nil, []string{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pos, j, _, _, err := testCommand(tc.args...)
			if err != nil || !reflect.DeepEqual(pos, tc.pos) || j != tc.json {
				t.Fatalf("%q: %q, json %v, %v; want %q, json %v", tc.args, pos, j, err, tc.pos, tc.json)
			}
		})
	}
}

// A bad flag is one line naming the command and the flag, exit status 2.
func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "report: unknown flag: --nope"},
		{[]string{"-z"}, "report: unknown shorthand flag: 'z' in -z"},
		{[]string{"-s", "x"}, `report: invalid value "x" for -s/--size: want a non-negative integer`},
		{[]string{"--size"}, "report: -s/--size needs a value (N)"},
	} {
		_, _, _, _, err := testCommand(tc.args...)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 2 || err.Error() != tc.want {
			t.Errorf("%q: %v, want %q with exit status 2", tc.args, err, tc.want)
		}
	}
}

func TestOneFile(t *testing.T) {
	tests := []struct {
		args []string
		file string
		code int
		err  string
	}{
		{[]string{"r.sq"}, "r.sq", 0, ""},
		{nil, "", 2, "report: no recording given (usage: sqscope report FILE)"},
		{[]string{"a", "b"}, "", 2, "report: one recording at a time, got 2 (a b)"},
	}
	for _, tc := range tests {
		file, err := OneFile("report", tc.args)
		var ee *ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.Code
		}
		if file != tc.file || code != tc.code || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("OneFile(%q) = %q, %v (code %d); want %q, %q (code %d)", tc.args, file, err, code, tc.file, tc.err, tc.code)
		}
	}
}

func TestUintVar(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want uint32
		err  string
	}{
		{"64", 64, ""}, {"0", 0, ""}, {"010", 10, ""}, {"-1", 7, "want a non-negative integer"}, {"99999999999", 7, "more than this flag takes (at most 4294967295)"}, {"x", 7, "want a non-negative integer"},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		var v uint32
		UintVarP(fs, &v, "size", "s", 7, "size")
		err := fs.Parse([]string{"-s", tc.arg})
		if v != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("-s %s: %d, %v; want %d, %q", tc.arg, v, err, tc.want, tc.err)
		}
		if fs.Changed("size") != (err == nil) || fs.Changed("t") {
			t.Errorf("-s %s: Changed wrong", tc.arg)
		}
	}
}

// --help gives the usage line, what the command does, its flags the GNU
// way with their placeholders and defaults, and its examples.
func TestHelp(t *testing.T) {
	_, _, _, out, err := testCommand("--help")
	want := "usage: sqscope report FILE\n\nAbout.\n\nFLAGS\n" +
		"  -h, --help     help for report\n" +
		"      --json     print JSON\n" +
		"  -s, --size N   payload bytes per WR (default 64)\n" +
		"\nEXAMPLES\n  report x\n"
	if err != nil || out != want {
		t.Errorf("help (%v):\n%s\nwant:\n%s", err, out, want)
	}
}
