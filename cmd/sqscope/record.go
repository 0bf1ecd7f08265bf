package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/verbs"
)

func recordCmd() *cobra.Command {
	var tf cli.Target
	var ff cli.FlightFlags
	var page cli.TracePage
	c := cli.Command("record", "trace like 'trace' and write every event to a recording file",
		"record -o FILE (-p PID | -c CMD | -a | --workload -- FLAGS | -- CMD ARGS...) [flags]",
		"Trace like 'sqscope trace' and write every event to FILE for 'sqscope report',\n'sqscope replay' and 'sqscope export'. Ctrl-C or SIGTERM stops and leaves a\ncomplete file. With --flight, keep the last seconds in memory and write\nthem to a new file in the directory -o names on each --trigger.",
		cli.RecordExamples)
	fs := c.Flags()
	fs.SetInterspersed(false) // a command's own flags follow it
	tf.Register(fs)
	ff.Register(fs)
	fs.StringVarP(&tf.RecordTo, "output", "o", "", "recording `FILE` to write (mode 0600), - for standard output (the target's output then goes to stderr); with --flight the directory of the recordings (made 0700)")
	fs.BoolVar(&tf.Force, "force", false, "replace an existing recording (kept as it was until the new one is complete)")
	page.Register(fs)
	tf.Complete(c)
	ff.Complete(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
		if tf.RecordTo == "" {
			return cli.UsageErr("record: -o FILE is required")
		}
		if err := tf.Check(args); err != nil {
			return cli.UsageErr("record: %v", err)
		}
		if err := ff.Apply(&tf, tf.RecordTo, fs); err != nil {
			return cli.UsageErr("record: %v", err)
		}
		onStdout := ""
		if tf.RecordTo == "-" {
			if onStdout = "the recording"; cli.IsTerminal(stdout) {
				return cli.UsageErr("record: standard output is a terminal: give -o FILE (or redirect standard output)")
			}
		}
		if err := page.Open("record", &tf, nil, onStdout, stdout); err != nil {
			return err
		}
		defer page.Discard()
		var childOut io.Writer
		if page.ToStdout() {
			childOut = stderr
		}
		return cli.Record(c.Context(), &tf, &page, args, stderr, childOut, version, verbs.DefaultNICModel())
	}
	return c
}
