package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/export"
	"github.com/sqscope/sqscope/internal/durflag"
	"github.com/sqscope/sqscope/session"
)

type exportFlags struct {
	format, out  string
	force, quiet bool
	o            export.Options
	bf           cli.BF
}

func exportCmd() *cobra.Command {
	f := &exportFlags{}
	c := cli.Command("export", "convert a recording to a timeline: Perfetto protobuf or Chrome trace-event JSON",
		"export [--format chrome|perfetto] [filters] FILE -o OUT",
		"Convert a recording to a timeline. Timestamps are the trace's CLOCK_MONOTONIC\ntime; pid and tid are the traced process's and thread's. Failed posts of a QP\nwith one cause fold into one slice with their count.",
		cli.ExportExamples)
	fs := c.Flags()
	fs.StringVar(&f.format, "format", "chrome", "output `FORMAT`: perfetto (protobuf, smaller) or chrome (trace-event JSON)")
	fs.StringVarP(&f.out, "output", "o", "-", "output `FILE` (- for stdout); an existing file keeps its mode, a new one is 0600")
	fs.BoolVar(&f.force, "force", false, "let -o replace an existing recording")
	fs.Var(&f.o.Filter.From, "from", "start of the window: seconds from the start, a date and time (RFC 3339) or a time of day")
	fs.Var(&f.o.Filter.To, "to", "end of the window, like --from")
	fs.Var(&f.o.Filter.QPs, "qp", "only these QP numbers (comma-separated; repeatable)")
	fs.Var(&f.o.Filter.PIDs, "pid", "only these processes (comma-separated; repeatable)")
	fs.BoolVar(&f.o.Instants, "instants", false, "draw posts and polls recorded without --call-times as instants (default: by the counters they move)")
	fs.BoolVar(&f.o.Rates, "rates", false, "add per-QP counter tracks of doorbells/s, inline share and PCIe bytes saved/s")
	durflag.Var(fs, &f.o.RateStep, "rate-step", export.DefaultRateStep, "period of the rate counter tracks, a `DURATION`")
	durflag.Var(fs, &f.o.Fold, "fold", export.DefaultFold, "fold failed posts of a QP less than this `DURATION` apart into one slice")
	f.bf.Register(fs)
	cli.RegisterQuiet(fs, &f.quiet)
	cli.Values(c, "format", "chrome\ttrace-event JSON (chrome://tracing, Perfetto)", "perfetto\tPerfetto's protobuf trace, smaller")
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stdout, stderr := c.Context(), c.OutOrStdout(), c.ErrOrStderr()
		path, err := cli.OneFile("export", args)
		if err != nil {
			return err
		}
		if err := f.o.Filter.Check(); err != nil {
			return cli.UsageErr("export: %v", err)
		}
		r, err := session.OpenRecording(path)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		defer r.Close()
		// Perfetto's trace is binary: refused on a terminal, as a page is
		out, err := cli.CreateOutput("export", f.out, []string{path}, f.force, export.Format(f.format) != export.FormatPerfetto, stdout)
		if err != nil {
			return err
		}
		defer out.Discard()
		fi := r.Info()
		o := &f.o
		o.Recording, o.Version, o.Info, o.Progress, o.Offset = path, version, fi, stderr, r.Offset
		o.Model = analyzer.Options{BF: f.bf.Config(fs, fi), Clock: fi.Anchor(), Mode: fi.ProbeMode}
		x, err := export.New(out, export.Format(f.format), *o)
		if err != nil {
			return cli.UsageErr("export: %v", err)
		}
		res, err := session.ReadAll(ctx, r, x.Event)
		if err != nil {
			return fmt.Errorf("export: %s: %w", path, err)
		}
		if err := x.Close(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if res.Corrupt != nil && out.Replaces() {
			return fmt.Errorf("export: %w; %s is left as it was", res.Err(path), f.out)
		}
		if err := out.Commit(); err != nil {
			return fmt.Errorf("export: writing %s: %w", f.out, err)
		}
		if w := res.Warning(path); w != "" {
			fmt.Fprintln(stderr, "sqscope:", w)
		}
		if n := r.Skipped(); n > 0 {
			fmt.Fprintf(stderr, "sqscope: warning: %s: %d records of kinds this sqscope does not know were skipped\n", path, n)
		}
		if err := res.Err(path); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if out.IsFile() {
			c := x.Stats()
			fmt.Fprintf(cli.Notes(stderr, f.quiet), "sqscope: wrote %s: %d trace events (%d counter samples, %d slices, %d instants; %d failed posts folded into %d) from %d recorded events\n",
				f.out, c.Events(), c.Counters, c.Slices, c.Instants, c.Folded, c.Bursts, res.Events)
		}
		return nil
	}
	return c
}
