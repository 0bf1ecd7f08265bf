package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/advise"
	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/verbs"
	"github.com/sqscope/sqscope/verbs/nicmodel"
)

func adviseCmd() *cobra.Command {
	var tf cli.Target
	var bf cli.BF
	o := advise.Options{Model: advise.Model{NIC: verbs.DefaultNICModel()}}
	c := cli.Command("advise", "replay a recording under other inline, signaling, batching and depth settings; print the best",
		"advise FILE | advise (-c CMD | --workload -- FLAGS) [flags]",
		"Replay each QP's recorded WR stream under other inline, signaling, post-list and\ndepth settings through the simulated HCA's NIC timing and mlx5 models, and print\nthe best with the changes that give them. With -c or --workload, record first.",
		advise.Examples)
	fs := c.Flags()
	tf.Register(fs)
	bf.Register(fs)
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object, every candidate included")
	fs.Func("nic", "`NIC` timing to predict WR/s with (default "+o.Model.NIC.String()+")", func(s string) (err error) {
		o.Model.NIC, err = nicmodel.Parse(s, o.Model.NIC)
		return err
	})
	tf.Complete(c)
	c.RunE = func(c *cobra.Command, pos []string) error {
		ctx, stdout, stderr := c.Context(), c.OutOrStdout(), c.ErrOrStderr()
		if tf.Cmd != "" || tf.Workload || tf.PID != 0 || tf.All {
			if err := tf.Check(pos); err != nil {
				return cli.UsageErr("advise: %v", err)
			}
			dir, err := os.MkdirTemp("", "sqscope-advise")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			tf.RecordTo = filepath.Join(dir, "run.sqscope")
			if err := cli.Record(ctx, &tf, nil, pos, stderr, stderr, version, o.Model.NIC); err != nil {
				return err
			}
			pos = []string{tf.RecordTo}
		}
		if len(pos) != 1 {
			return cli.UsageErr("advise: give one recording, or -c CMD or --workload -- FLAGS to record one")
		}
		o.BF = func(fi trace.FileInfo) analyzer.BFConfig { return bf.Config(fs, fi) }
		return advise.Run(ctx, pos[0], o, stdout, stderr)
	}
	return c
}
