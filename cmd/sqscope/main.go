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

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/probe"
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
		{"serve", "trace as a service: send-queue metrics on /metrics for Prometheus", runServe},
		{"replay", "show a recording in the live view, with pause, speed and seek", runReplay},
		{"report", "summarize a recording: send queues, PCIe savings, diagnoses (text, JSON or an HTML page)", runReport},
		{"diff", "compare two recordings, before and after a change: per QP and in total", runDiff},
		{"advise", "replay a recording under other inline, signaling, batching and depth settings; print the best", runAdvise},
		{"export", "convert a recording to a timeline: Perfetto protobuf or Chrome trace-event JSON", runExport},
		{"ps", "list the processes that use verbs, their QPs as the kernel lists them, and how each would be traced", runPS},
		{"completion", "print a shell completion script: completion bash|zsh|fish", func(_ context.Context, args []string, stdout, _ io.Writer) error {
			var names []string
			for _, c := range commands() {
				names = append(names, c.name)
			}
			return cli.CompletionCommand(args, stdout, "sqscope", names)
		}},
		{"version", "print the version", func(_ context.Context, _ []string, stdout, _ io.Writer) error {
			fmt.Fprintln(stdout, "sqscope", version)
			return nil
		}},
	}
}

func topUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: sqscope COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sqscope help COMMAND' (or 'sqscope COMMAND --help') for a command's flags and examples.")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		topUsage(stderr)
		return &cli.ExitError{Code: 2, Err: errors.New("no command given")}
	}
	name := args[0]
	switch {
	case name == "help" && len(args) > 1: // help TOPIC is TOPIC --help
		return run(ctx, []string{args[1], "--help"}, stdout, stderr)
	case name == "-h" || name == "--help" || name == "help":
		topUsage(stdout)
		return nil
	case name == "-V" || name == "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	return cli.UsageErr("unknown command %q (run 'sqscope --help')", name)
}

func main() {
	if probe.RunHoldWatchdog() { // started by a tracer of ours to outlive it
		return
	}
	probe.EnableHoldWatchdog()
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
	var ee *cli.ExitError
	if errors.As(err, &ee) {
		code = ee.Code
	}
	var ue *workload.UsageError
	if errors.As(err, &ue) {
		code = 2
	}
	fmt.Fprintln(os.Stderr, "sqscope:", err)
	os.Exit(code)
}
