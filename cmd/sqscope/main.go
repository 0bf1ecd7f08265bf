// Command sqscope watches RDMA send queues from the outside: how full they
// are, how many doorbells were rung, and how much PCIe DMA inline sends,
// unsignaled completions and doorbell batching saved.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sqscope/sqscope/workload"
)

// version is set by the build (-ldflags -X main.version=...).
var version = "dev"

// command is one sqscope subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"workload", "drive inline/unsignaled send traffic on the simulated HCA or a verbs device", runWorkload},
		{"trace", "trace a verbs application's send queues and print a per-QP summary", runTrace},
		{"record", "trace like 'trace' and write every event to a recording file", runRecord},
		{"top", "watch a verbs application's send queues live in the terminal", runTop},
		{"demo", "watch the built-in workload run healthy, then overflow an SQ (simulated HCA)", runDemo},
		{"replay", "show a recording in the live view, with pause, speed and seek", runReplay},
		{"report", "summarize a recording: send queues, PCIe savings, diagnoses (text or JSON)", runReport},
		{"export", "convert a recording to Chrome trace-event JSON for Perfetto", runExport},
		{"version", "print the version", func(_ context.Context, _ []string, stdout, _ io.Writer) error {
			fmt.Fprintln(stdout, "sqscope", version)
			return nil
		}},
	}
}

// exitError carries an exit status other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, a...)}
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: sqscope COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sqscope COMMAND --help' for a command's flags and examples.")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		topUsage(stderr)
		return &exitError{code: 2, err: errors.New("no command given")}
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "help" {
		topUsage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	return usageErr("unknown command %q (run 'sqscope --help')", name)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err == nil {
		return
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	var ue *workload.UsageError
	if errors.As(err, &ue) {
		code = 2
	}
	fmt.Fprintln(os.Stderr, "sqscope:", err)
	os.Exit(code)
}

// parseQuiet runs parse (a FlagSet's Parse, or a loop around it) so that a
// bad flag yields only the one-line error the caller returns, and -h/--help
// prints the full usage to w.
func parseQuiet(fs *flag.FlagSet, w io.Writer, parse func() error) error {
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

// commandFlags makes a command's FlagSet whose usage text is the usage
// line, what the command does, its flags and its examples.
func commandFlags(name, usage, about, examples string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sqscope %s\n\n%s\n\nFLAGS\n", usage, about)
		fs.PrintDefaults()
		fmt.Fprint(stderr, examples)
	}
	return fs
}

// parseCommand parses a command's arguments: -h prints the usage, a bad
// flag is a usage error (exit status 2) naming the command.
func parseCommand(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	err := parseQuiet(fs, stderr, func() error { return fs.Parse(args) })
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageErr("%s: %v", fs.Name(), err)
}
