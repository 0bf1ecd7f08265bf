// Command sqscope watches RDMA send queues from the outside: how full they
// are, how many doorbells were rung, and how much PCIe DMA inline sends,
// unsignaled completions and doorbell batching saved.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/probe"
	"github.com/sqscope/sqscope/workload"
)

// version is set by the build (-ldflags -X main.version=...).
var version = "dev"

// commands are sqscope's commands, in the order help lists them.
func commands() []*cobra.Command {
	return []*cobra.Command{
		workloadCmd(), traceCmd(), recordCmd(), topCmd(), demoCmd(), serveCmd(), replayCmd(),
		reportCmd(), diffCmd(), adviseCmd(), exportCmd(), psCmd(), cli.CompletionCommand(),
		cli.VersionCommand(version),
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.Run(ctx, cli.Root(version, commands()), args, stdout, stderr)
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
