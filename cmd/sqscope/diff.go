package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/diff"
	"github.com/sqscope/sqscope/trace"
)

func diffCmd() *cobra.Command {
	var bf cli.BF
	var page cli.Page
	o := diff.Options{WriteJSON: func(w io.Writer, v any) error { return cli.WriteJSON(w, v, true) }}
	c := cli.Command("diff", "compare two recordings, before and after a change: per QP and in total", "diff BEFORE AFTER [flags]",
		"Compare two recordings: QPs matched by process name and QP order (or --match qpn);\nWRs per doorbell, inline and signaled shares, PCIe bytes per WR, peak against depth,\nENOMEMs, diagnoses that appeared or went, and the inferred settings that changed.",
		diff.Examples)
	fs := c.Flags()
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object instead of text")
	fs.StringVar((*string)(&o.Match), "match", string(diff.ByProcess), "pair QPs `BY` process (name and QP order) or qpn (QP number)")
	page.Register(fs, "the runs, the totals, every QP in a table and its figures as bars")
	bf.Register(fs)
	var quiet bool
	cli.RegisterQuiet(fs, &quiet)
	cli.Values(c, "match", string(diff.ByProcess)+"\tby process name and QP order", string(diff.ByQPN)+"\tby QP number")
	c.RunE = func(c *cobra.Command, files []string) error {
		stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
		if len(files) != 2 {
			return cli.UsageErr("diff: give two recordings, BEFORE and AFTER (got %d)", len(files))
		}
		if o.Match != diff.ByProcess && o.Match != diff.ByQPN {
			return cli.UsageErr("diff: --match %q: want %s or %s", o.Match, diff.ByProcess, diff.ByQPN)
		}
		out, err := page.Output("diff", o.JSON, files, stdout)
		if err != nil {
			return err
		}
		defer out.Discard()
		o.BF, o.HTML = func(fi trace.FileInfo) analyzer.BFConfig { return bf.Config(fs, fi) }, page.HTML
		rep, err := diff.Run(c.Context(), files[0], files[1], o, out, stderr)
		if err == nil {
			err = out.Commit()
		}
		if err != nil {
			return fmt.Errorf("diff: %w", err)
		}
		if out.IsFile() {
			fmt.Fprintf(cli.Notes(stderr, quiet), "sqscope: wrote %s: %d QPs matched\n", out.Name, len(rep.QPs))
		}
		return nil
	}
	return c
}
