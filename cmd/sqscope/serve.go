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
	fs := cli.CommandFlags("serve", serve.Usage, serve.About, serve.Examples, stdout)
	tf.Register(fs)
	o.Register(fs)
	tf.Mode, fs.Lookup("mode").DefValue = session.ModeCounters, session.ModeCounters
	if err := cli.ParseCommand(fs, args, stdout); err != nil {
		return err
	}
	if err := cmp.Or(tf.Check(fs.Args()), o.Check()); err != nil {
		return cli.UsageErr("serve: %v", err)
	}
	return serve.Run(ctx, o, func() (*session.Session, error) { return tf.Start(ctx, fs.Args(), stderr, nil, version) }, stderr)
}
