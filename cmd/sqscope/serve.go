package main

import (
	"cmp"
	"context"
	"io"

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/serve"
	"github.com/sqscope/sqscope/session"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var tf cli.Target
	var o serve.Options
	var ff cli.FlightFlags
	var flightDir string
	fs := cli.CommandFlags("serve", serve.Usage, serve.About, serve.Examples, stdout)
	tf.Register(fs)
	o.Register(fs)
	ff.Register(fs)
	fs.StringVar(&flightDir, "flight-dir", "", "with --flight: the directory of the flight recorder's recordings (made 0700)")
	// the mode whose metrics the shipped alerts need, at the least cost
	tf.Mode, fs.Lookup("mode").DefValue = session.ModeSentinel, session.ModeSentinel
	if err := cli.ParseCommand(fs, args, stdout); err != nil {
		return err
	}
	if err := cmp.Or(tf.Check(fs.Args()), o.Check()); err != nil {
		return cli.UsageErr("serve: %v", err)
	}
	if (flightDir != "") != ff.On() {
		return cli.UsageErr("serve: --flight-dir DIR and --flight DURATION go together")
	}
	if err := ff.Apply(&tf, flightDir, fs); err != nil {
		return cli.UsageErr("serve: %v", err)
	}
	return serve.Run(ctx, o, func() (*session.Session, error) { return tf.Start(ctx, fs.Args(), stderr, nil, version) }, stderr)
}
