package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/sqscope/sqscope/internal/cli"
)

const recordExamples = `
EXAMPLES
  sqscope record -o run.sqscope --workload -- -s 64 -I 64 -Q 16 -n 100000
        record the built-in workload
  sqscope record -o perf.sqscope -c "ib_send_bw -d rxe0 -x 1 -s 64 -Q 16 -n 5000 127.0.0.1"
        record perftest's client
  sqscope report run.sqscope
        read it back later, or on another machine
`

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var tf targetFlags
	fs := cli.CommandFlags("record", "record -o FILE (-p PID | -c CMD | -a | --workload -- FLAGS | -- CMD ARGS...) [flags]",
		"Trace like 'sqscope trace' and write every event to FILE for 'sqscope report',\n'sqscope replay' and 'sqscope export'. Ctrl-C or SIGTERM stops and leaves a\ncomplete file.",
		recordExamples, stdout)
	tf.register(fs)
	fs.StringVar(&tf.recordTo, "o", "", "recording file to write (mode 0600), - for standard output (the target's output then goes to stderr)")
	fs.BoolVar(&tf.force, "force", false, "replace an existing recording (kept as it was until the new one is complete)")
	if err := cli.ParseCommand(fs, args, stdout); err != nil {
		return err
	}
	if tf.recordTo == "" {
		return cli.UsageErr("record: -o FILE is required")
	}
	if err := tf.check(fs.Args()); err != nil {
		return cli.UsageErr("record: %v", err)
	}
	s, err := tf.start(fs.Args(), stderr, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	rec := s.Recorder()
	runErr := s.Run(ctx) // however it ends, the file holds what was seen and why it ended
	if cerr := rec.Close(); cerr != nil {
		return errors.Join(runErr, fmt.Errorf("record: %w", cerr))
	}
	snap := s.Analyzer().Snapshot()
	fmt.Fprintf(stderr, "sqscope: recorded %d events (%d bytes) of %d QP(s) to %s, %d lost; %s\n",
		rec.Events(), rec.Bytes(), len(snap.QPs), tf.recordTo, snap.Lost, snap.Ended)
	if runErr == nil {
		runErr = tf.status(snap)
	}
	return runErr
}
