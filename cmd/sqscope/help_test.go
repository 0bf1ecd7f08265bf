package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var updateHelp = flag.Bool("update-help", false, "rewrite the goldens of every command's help and usage errors (testdata/help)")

// golden compares got with the golden file name under testdata/help, or
// rewrites it with -update-help.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenFile(t, filepath.Join("testdata", "help", name), got, *updateHelp, "go test ./cmd/sqscope -run "+t.Name()+" -update-help")
}

// Every command's help, and sqscope's own, is as its golden says: the
// usage line, what it does, every flag with its placeholder and default,
// the examples.
func TestHelpGoldens(t *testing.T) {
	names := []string{""}
	for _, c := range commands() {
		names = append(names, c.Name())
	}
	for _, name := range names {
		args, file := []string{name, "--help"}, name+".txt"
		if name == "" {
			args, file = []string{"--help"}, "sqscope.txt"
		}
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err != nil || errb.Len() > 0 {
			t.Errorf("%q: %v, stderr %q", args, err, errb.String())
			continue
		}
		golden(t, file, out.String())
	}
}

// usageErrors are command lines with a usage error each, at least one per
// command; nothing of them starts or writes anything.
var usageErrors = [][]string{
	{},
	{"nosuch"},
	{"--bogus"},
	{"help", "nosuch"},
	{"workload", "--turbo"},
	{"workload", "-D", "5x"},
	{"workload", "-q", "x"},
	{"workload", "-s", "-1"},
	{"workload", "extra"},
	{"workload", "-n", "5", "-D", "5"},
	{"trace"},
	{"trace", "-p", "1", "-c", "x"},
	{"trace", "--mode", "fast", "--workload"},
	{"trace", "-p"},
	{"trace", "-p", "one"},
	{"trace", "-Z"},
	{"record", "--workload"},
	{"record", "-o", "d", "--trigger", "enomem", "--workload"},
	{"top", "-i", "0"},
	{"demo", "extra"},
	{"demo", "-D", "10", "--fault-after", "20"},
	{"serve", "-a", "--listen", "nope"},
	{"serve", "-a", "--flight-dir", "d"},
	{"replay"},
	{"replay", "--speed", "0", "x.sqscope"},
	{"report"},
	{"report", "a.sqscope", "b.sqscope"},
	{"report", "--fail-on", "fatal", "a.sqscope"},
	{"diff", "a.sqscope"},
	{"diff", "--match", "name", "a.sqscope", "b.sqscope"},
	{"advise"},
	{"export"},
	{"export", "--from", "3", "--to", "2", "a.sqscope"},
	{"export", "--qp", "zz", "a.sqscope"},
	{"ps", "extra"},
	{"completion"},
	{"completion", "tcsh"},
}

// Each usage error is one line on stderr, labelled with its command, with
// exit status 2, as its golden says; stdout holds nothing.
func TestUsageErrorGoldens(t *testing.T) {
	var all strings.Builder
	covered := map[string]bool{}
	for _, args := range usageErrors {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, &out, &errb)
		code := exitCode(err)
		if code != 2 || out.Len() > 0 || err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: exit %d, %v, stdout %q; want exit 2, one line and no stdout", args, code, err, out.String())
		}
		if len(args) > 0 {
			covered[args[0]] = true
		}
		fmt.Fprintf(&all, "$ sqscope %s\nexit %d: sqscope: %v\n", strings.Join(args, " "), code, err)
	}
	for _, c := range commands() {
		if !covered[c.Name()] && c.Name() != "version" {
			t.Errorf("no usage error of %s is checked", c.Name())
		}
	}
	golden(t, "errors.txt", all.String())
}

// Every duration flag takes a bare number of seconds as its Go duration:
// -D 5 is -D 5s, in every command that has it.
func TestDurationsAlike(t *testing.T) {
	checked := 0
	for _, c := range commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "DURATION" { // --sample-every and --sample-for call durflag.Parse themselves
				return
			}
			checked++
			var got []string
			for _, v := range []string{"5", "5s", "0.5", "500ms"} {
				fresh := find(c.Name())
				fl := fresh.Flags().Lookup(f.Name)
				if err := fresh.ParseFlags([]string{"--" + f.Name, v}); err != nil {
					t.Errorf("%s --%s %s: %v", c.Name(), f.Name, v, err)
					return
				}
				got = append(got, fl.Value.String())
			}
			if got[0] != got[1] || got[2] != got[3] || got[0] == got[2] {
				t.Errorf("%s --%s: 5, 5s, 0.5 and 500ms give %q", c.Name(), f.Name, got)
			}
		})
	}
	t.Logf("%d duration flags of the commands checked", checked)
	if checked < 15 {
		t.Errorf("only %d duration flags found", checked)
	}
}

// find is a fresh command of that name.
func find(name string) *cobra.Command {
	for _, c := range commands() {
		if c.Name() == name {
			return c
		}
	}
	return nil
}
