package cli

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		pos  []string
		json bool
	}{
		{"flag first", []string{"--json", "a"}, []string{"a"}, true},
		{"flag after a positional", []string{"a", "--json", "b"}, []string{"a", "b"}, true},
		{"after -- everything is positional", []string{"a", "--", "--json"}, []string{"a", "--json"}, false},
		{"none", nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			j := fs.Bool("json", false, "")
			pos, err := ParseArgs(fs, tc.args)
			if err != nil || !reflect.DeepEqual(pos, tc.pos) || *j != tc.json {
				t.Fatalf("ParseArgs(%q) = %q, json %v, %v; want %q, json %v", tc.args, pos, *j, err, tc.pos, tc.json)
			}
		})
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
		{[]string{"a", "--nope"}, "", 2, "report: flag provided but not defined: -nope"},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		fs := CommandFlags("report", "report FILE", "About.", "", &out)
		file, err := OneFile(fs, "report", tc.args)
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

func TestUintVarAndFlagGiven(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want uint32
		err  string
	}{
		{"64", 64, ""}, {"0", 0, ""}, {"-1", 7, "want a non-negative integer"}, {"99999999999", 7, "more than this flag takes (at most 4294967295)"}, {"x", 7, "want a non-negative integer"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		var v uint32
		UintVar(fs, &v, "s", 7, "size")
		err := fs.Parse([]string{"-s", tc.arg})
		if v != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("-s %s: %d, %v; want %d, %q", tc.arg, v, err, tc.want, tc.err)
		}
		if FlagGiven(fs, "s") != (err == nil) || FlagGiven(fs, "t") {
			t.Errorf("-s %s: FlagGiven wrong", tc.arg)
		}
	}
}

// The listing puts a flag's names together, GNU style, and gives its
// default once.
func TestPrintFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var size uint32
	var d string
	for _, n := range []string{"s", "size"} {
		UintVar(fs, &size, n, 64, "payload bytes per WR")
	}
	for _, n := range []string{"d", "ib-dev"} {
		fs.StringVar(&d, n, "sim", "the device")
	}
	fs.Bool("json", false, "print JSON")
	var b bytes.Buffer
	PrintFlags(&b, fs)
	want := "  -d, --ib-dev string\n    \tthe device (default \"sim\")\n" +
		"  --json\n    \tprint JSON\n" +
		"  -s, --size N\n    \tpayload bytes per WR (default 64)\n"
	if b.String() != want {
		t.Errorf("listing:\n%s\nwant:\n%s", b.String(), want)
	}
}
