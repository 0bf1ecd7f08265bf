package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/internal/cli"
	"github.com/sqscope/sqscope/session"
)

const traceExamples = `
EXAMPLES
  sqscope trace --workload -- -s 64 -I 64 -Q 16 -n 100000
        trace the built-in workload on the simulated HCA
  sqscope trace -c "ib_write_bw -d rxe0 -x 1 -s 64 -Q 16 127.0.0.1"
        start perftest and trace it
  sqscope trace -p 4242 -i 1
        trace a running process, a summary every second
  sqscope trace --json --workload -- --fault never-signal -n 10000
        the per-QP summary as JSON
`

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var tf targetFlags
	var interval float64
	var asJSON bool
	fs := cli.CommandFlags("trace", "trace (-p PID | -c CMD | --workload -- FLAGS) [flags]",
		"Trace every post and poll of a verbs application and print, per send queue,\nwhat it did, when the target exits or on Ctrl-C.",
		traceExamples, stdout)
	tf.register(fs)
	fs.Float64Var(&interval, "i", 0, "also print the summary every SECONDS")
	fs.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	if err := cli.ParseCommand(fs, args, stdout); err != nil {
		return err
	}
	if err := tf.check(fs.Args()); err != nil {
		return cli.UsageErr("trace: %v", err)
	}
	if interval < 0 {
		return cli.UsageErr("trace: -i must be positive")
	}
	s, err := tf.start(fs.Args(), stderr, nil)
	if err != nil {
		return err
	}
	defer s.Close()

	print := func() error {
		snap := s.Analyzer().Snapshot()
		cost := s.Cost(snap.Events)
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(struct {
				analyzer.Snapshot
				Self session.SelfCost `json:"sqscope_cpu"`
			}{snap, cost})
		}
		if err := analyzer.WriteText(stdout, snap); err != nil {
			return fmt.Errorf("trace: writing the summary: %w", err)
		}
		_, err := fmt.Fprintln(stdout, cost)
		return err
	}
	// however the trace ended, what was seen is printed (it says why)
	err = s.RunEvery(ctx, time.Duration(interval*float64(time.Second)), func() { print() })
	if perr := print(); err == nil {
		err = perr
	}
	return err
}
