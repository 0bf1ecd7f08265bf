package main

import (
	"cmp"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/serve"
	"github.com/sqscope/sqscope/session"
)

func serveCmd() *cobra.Command {
	var tf cli.Target
	var o serve.Options
	var ff cli.FlightFlags
	var flightDir string
	c := cli.Command("serve", "trace as a service: send-queue metrics on /metrics for Prometheus", serve.Usage, serve.About, serve.Examples)
	fs := c.Flags()
	fs.SetInterspersed(false) // a command's own flags follow it
	tf.Register(fs)
	o.Register(fs)
	ff.Register(fs)
	fs.StringVar(&flightDir, "flight-dir", "", "with --flight: the `DIR` of the flight recorder's recordings (made 0700)")
	// the mode whose metrics the shipped alerts need, at the least cost
	tf.Mode, fs.Lookup("mode").DefValue = session.ModeSentinel, session.ModeSentinel
	tf.Complete(c)
	ff.Complete(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		if err := cmp.Or(tf.Check(args), o.Check()); err != nil {
			return cli.UsageErr("serve: %v", err)
		}
		if (flightDir != "") != ff.On() {
			return cli.UsageErr("serve: --flight-dir DIR and --flight DURATION go together")
		}
		if err := ff.Apply(&tf, flightDir, fs); err != nil {
			return cli.UsageErr("serve: %v", err)
		}
		ctx := c.Context()
		return serve.Run(ctx, o, func() (*session.Session, error) { return tf.Start(ctx, args, c.ErrOrStderr(), nil, version) }, tf.Notes(c.ErrOrStderr()))
	}
	return c
}
