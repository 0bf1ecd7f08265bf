package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	var out string
	fs := commandFlags("record", "record -o FILE (-p PID | -c CMD | --workload -- FLAGS) [flags]",
		"Trace like 'sqscope trace' and write every event to FILE for 'sqscope report',\n'sqscope replay' and 'sqscope export'. Ctrl-C or SIGTERM stops and leaves a\ncomplete file.",
		recordExamples, stderr)
	tf.register(fs)
	fs.StringVar(&out, "o", "", "recording file to write (mode 0600)")
	if err := parseCommand(fs, args, stderr); err != nil {
		return err
	}
	if out == "" {
		return usageErr("record: -o FILE is required")
	}
	if err := tf.check(fs.Args()); err != nil {
		return usageErr("record: %v", err)
	}
	s, err := tf.start(fs.Args(), stderr, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	rec, err := s.Record(out, version)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	runErr := s.Run(ctx) // however it ends, the file holds what was seen and why it ended
	if cerr := rec.Close(); cerr != nil {
		return errors.Join(runErr, fmt.Errorf("record: %w", cerr))
	}
	snap := s.Analyzer().Snapshot()
	fmt.Fprintf(stderr, "sqscope: recorded %d events (%d bytes) of %d QP(s) to %s, %d lost; %s\n",
		rec.Events(), rec.Bytes(), len(snap.QPs), out, snap.Lost, snap.Ended)
	return runErr
}
