package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

type reportFlags struct {
	json bool
	page cli.Page
	bf   cli.BF
}

func newReportFlags(help io.Writer) (*flag.FlagSet, *reportFlags) {
	f := &reportFlags{}
	fs := cli.CommandFlags("report", "report FILE [flags]",
		"Rebuild every send queue of a recording and print what happened: occupancy,\ndoorbells and BlueFlame writes, PCIe savings, and diagnoses with their fixes.\nA truncated recording is reported up to the cut, with a warning.",
		cli.ReportExamples, help)
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of text")
	f.page.Register(fs, "plots, every QP, the diagnoses")
	f.bf.Register(fs)
	return fs, f
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newReportFlags(stdout)
	path, err := cli.OneFile(fs, "report", args)
	if err != nil {
		return err
	}
	out, err := f.page.Output("report", f.json, []string{path}, stdout)
	if err != nil {
		return err
	}
	defer out.Discard()
	r, err := session.OpenRecording(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer r.Close()
	opts := analyzer.Options{BF: f.bf.Config(fs, r.Info()), Clock: r.Info().Anchor(), Mode: r.Info().ProbeMode}
	a := analyzer.New(opts)
	res, err := session.ReadAll(ctx, r, a.Ingest)
	if err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if w := res.Warning(path); w != "" {
		fmt.Fprintln(stderr, "sqscope:", w)
	}
	rec := session.Describe(path, r, &res)
	snap := a.Snapshot()
	switch {
	case f.json:
		err = cli.WriteJSON(stdout, struct {
			Recording session.RecordingInfo `json:"recording"`
			analyzer.Snapshot
		}{rec, snap}, true)
	case f.page.HTML:
		err = writeReportHTML(ctx, path, opts, &rec, snap, out, &res)
	default:
		fmt.Fprintln(stdout, rec.TextHeader())
		err = report.WriteText(stdout, snap)
	}
	if err != nil {
		return fmt.Errorf("report: writing the report: %w", err)
	}
	if err := res.Err(path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if out.IsFile() {
		fmt.Fprintf(stderr, "sqscope: wrote %s: %d QPs, %d diagnoses\n", out.Name, len(snap.QPs), len(snap.Diagnoses))
	}
	return nil
}

// writeReportHTML writes the HTML page of snap, each QP's occupancy over
// the run read from a second pass over the recording, and commits it.
func writeReportHTML(ctx context.Context, path string, opts analyzer.Options, rec *session.RecordingInfo, snap analyzer.Snapshot, out *cli.Output, res *session.ReadResult) error {
	series, err := report.SeriesFrom(opts, &snap, func(fn func(trace.Event)) error { return session.ReadFile(ctx, path, fn) })
	if err != nil {
		return err
	}
	if err := report.WriteHTML(out, report.Page{Title: filepath.Base(path), Header: rec.TextHeader(), Snap: snap, Series: series}); err != nil {
		return err
	}
	if res.Corrupt != nil && out.Replaces() {
		return fmt.Errorf("%w; %s is left as it was", res.Err(path), out.Name)
	}
	return out.Commit()
}
