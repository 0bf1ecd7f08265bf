package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/export"
	"github.com/sqscope/sqscope/internal/cli"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/session"
)

type exportFlags struct {
	format   string
	out      string
	force    bool
	preferBF bool
	shutUpBF bool
}

const exportExamples = `
EXAMPLES
  sqscope export --format chrome run.sqscope -o run.json
        Chrome trace-event JSON: open run.json in Perfetto (ui.perfetto.dev)
        or chrome://tracing; one SQ occupancy counter track per QP, a slice
        per post call and per non-empty poll, instants for errors and
        diagnoses
  sqscope export run.sqscope -o - | gzip > run.json.gz
        write to stdout
`

func newExportFlags(help io.Writer) (*flag.FlagSet, *exportFlags) {
	f := &exportFlags{}
	fs := cli.CommandFlags("export", "export [--format chrome] FILE -o OUT.json",
		"Convert a recording to a timeline. Timestamps are the trace's CLOCK_MONOTONIC\ntime in microseconds; pid and tid are the traced process's and thread's.",
		exportExamples, help)
	fs.StringVar(&f.format, "format", "chrome", "output format: chrome (Chrome trace-event JSON, opens in Perfetto)")
	fs.StringVar(&f.out, "o", "-", "output file (- for stdout); an existing file keeps its mode, a new one is 0600")
	fs.BoolVar(&f.force, "force", false, "let -o replace an existing recording")
	bfFlags(fs, &f.preferBF, &f.shutUpBF)
	return fs, f
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newExportFlags(stdout)
	path, err := cli.OneFile(fs, "export", args)
	if err != nil {
		return err
	}
	if f.format != "chrome" {
		return cli.UsageErr("export: unknown --format %q (want chrome)", f.format)
	}
	if f.out == "" {
		return cli.UsageErr("export: -o needs a file name (or - for stdout)")
	}
	r, err := session.OpenRecording(path)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer r.Close()

	var w io.Writer = stdout
	var out *outfile.File
	if f.out != outfile.Stdout {
		if out, err = outfile.Create(f.out, 0o600, []string{path}, f.force, true); err != nil {
			return fmt.Errorf("export: creating output: %w", err)
		}
		defer out.Discard()
		w = out
	}
	fi := r.Info()
	x := export.NewChrome(w, export.ChromeOptions{Recording: path, Version: version, Info: fi,
		Model: analyzer.Options{BF: bfConfig(fs, f.preferBF, f.shutUpBF, fi)}})
	res, err := session.ReadAll(ctx, r, x.Event)
	if err != nil {
		return fmt.Errorf("export: %s: %w", path, err)
	}
	if err := x.Close(); err != nil {
		return fmt.Errorf("export: writing %s: %w", f.out, err)
	}
	if res.Corrupt != nil && out != nil && out.Replaces() {
		return fmt.Errorf("export: %w; %s is left as it was", res.Err(path), f.out)
	}
	if out != nil {
		if err := out.Commit(); err != nil {
			return fmt.Errorf("export: writing %s: %w", f.out, err)
		}
	}
	if w := res.Warning(path); w != "" {
		fmt.Fprintln(stderr, "sqscope:", w)
	}
	if err := res.Err(path); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if out != nil {
		c := x.Stats()
		fmt.Fprintf(stderr, "sqscope: wrote %s: %d trace events (%d counter samples, %d slices, %d instants) from %d recorded events\n",
			f.out, c.Events, c.Counters, c.Slices, c.Instants, res.Events)
	}
	return nil
}
