package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/reportpage"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/verbs"
)

type reportFlags struct {
	json    bool
	page    cli.Page
	bf      cli.BF
	failOn  cli.FailOn
	verbose bool
	quiet   bool
}

func reportCmd() *cobra.Command {
	f := &reportFlags{}
	c := cli.Command("report", "summarize a recording: send queues, PCIe savings, diagnoses (text, JSON or an HTML page)", "report FILE [flags]",
		"Rebuild every send queue of a recording and print what happened: occupancy,\ndoorbells and BlueFlame writes, PCIe savings, and diagnoses with their fixes.\nA truncated recording is reported up to the cut, with a warning.",
		cli.ReportExamples)
	fs := c.Flags()
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of text")
	f.page.Register(fs, "plots, every QP, the diagnoses")
	f.bf.Register(fs)
	f.failOn.Register(fs)
	cli.RegisterVerbose(fs, &f.verbose)
	cli.RegisterQuiet(fs, &f.quiet)
	cli.CompleteFailOn(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		path, err := cli.OneFile("report", args)
		if err != nil {
			return err
		}
		return f.write(c.Context(), "report", fs, path, c.OutOrStdout(), c.ErrOrStderr())
	}
	return c
}

// write reports the recording at path as the flags say; cmd labels its
// errors (report, or replay without a terminal), fs holds the flags the
// BlueFlame settings are read from.
func (f *reportFlags) write(ctx context.Context, cmd string, fs *pflag.FlagSet, path string, stdout, stderr io.Writer) error {
	if err := f.failOn.Check(); err != nil {
		return cli.UsageErr("%s: %v", cmd, err)
	}
	out, err := f.page.Output(cmd, f.json, []string{path}, stdout)
	if err != nil {
		return err
	}
	defer out.Discard()
	rc, err := reportpage.Read(ctx, path, func(fi trace.FileInfo) analyzer.BFConfig { return f.bf.Config(fs, fi) })
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	if w := rc.Res.Warning(path); w != "" {
		fmt.Fprintln(stderr, "sqscope:", w)
	}
	switch {
	case f.json:
		err = cli.WriteJSON(stdout, rc.Document(), true)
	case f.page.HTML:
		err = rc.WritePage(ctx, out, out.Name, verbs.DefaultNICModel())
	default:
		err = rc.WriteText(stdout, report.Text{Verbose: f.verbose})
	}
	if err != nil {
		return fmt.Errorf("%s: writing the report: %w", cmd, err)
	}
	if err := rc.Res.Err(path); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	if out.IsFile() {
		fmt.Fprintf(cli.Notes(stderr, f.quiet), "sqscope: wrote %s: %d QPs, %d diagnoses\n", out.Name, len(rc.Snap.QPs), len(rc.Snap.Diagnoses))
	}
	if err := f.failOn.Status(rc.Snap.Diagnoses); err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}
