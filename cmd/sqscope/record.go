package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/sqscope/sqscope/trace"
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
	s, err := startSession(&tf, fs.Args(), stderr, nil)
	if err != nil {
		return err
	}
	defer s.close()

	info := trace.HostInfo()
	info.StartMonoNS = monotonicNS()
	info.Version = version
	info.Target = s.target
	info.TargetPID = uint32(s.pid)
	info.ProbeMode = s.mode
	info.Env = providerEnv(s.env)
	w, err := trace.Create(out, info)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	var mu sync.Mutex
	var werr error
	s.addSink(func(ev trace.Event) {
		if err := w.Write(ev); err != nil {
			mu.Lock()
			if werr == nil {
				werr = err
			}
			mu.Unlock()
		}
	})
	runErr := s.run(ctx, stderr)
	cerr := w.Close()
	mu.Lock()
	defer mu.Unlock()
	switch {
	case runErr != nil:
		return runErr
	case werr != nil:
		return fmt.Errorf("record: writing %s: %w", out, werr)
	case cerr != nil:
		return fmt.Errorf("record: closing %s: %w", out, cerr)
	}
	snap := s.an.Snapshot()
	fmt.Fprintf(stderr, "sqscope: recorded %d events (%d bytes) of %d QP(s) to %s, %d lost\n",
		w.Events(), w.Bytes(), len(snap.QPs), out, snap.Lost)
	return nil
}

// providerEnv keeps the environment entries that change the HCA model.
func providerEnv(env []string) []string {
	var out []string
	for _, e := range env {
		if strings.HasPrefix(e, "MLX5_POST_SEND_PREFER_BF=") || strings.HasPrefix(e, "MLX5_SHUT_UP_BF=") {
			out = append(out, e)
		}
	}
	return out
}
