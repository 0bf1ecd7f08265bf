package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/internal/outfile"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

type reportFlags struct {
	json, html, force bool
	out               string
	bf                cli.BF
}

const reportExamples = `
EXAMPLES
  sqscope report run.sqscope
        per-QP summary, PCIe savings and diagnoses of a recording
  sqscope report run.sqscope --json | jq '.qps[] | {qp_num, wrs, doorbells, bf_writes}'
        the same as one JSON object; counters use the workload's names
  sqscope report --html -o run.html run.sqscope
        one self-contained page (no network) with every QP, plots and diagnoses
  sqscope report --mlx5-shut-up-bf run.sqscope
        model a target that ran with MLX5_SHUT_UP_BF=1 (no BlueFlame)
`

func newReportFlags(help io.Writer) (*flag.FlagSet, *reportFlags) {
	f := &reportFlags{}
	fs := cli.CommandFlags("report", "report FILE [flags]",
		"Rebuild every send queue of a recording and print what happened: occupancy,\ndoorbells and BlueFlame writes, PCIe savings, and diagnoses with their fixes.\nA truncated recording is reported up to the cut, with a warning.",
		reportExamples, help)
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of text")
	fs.BoolVar(&f.html, "html", false, "write one self-contained HTML page (plots, every QP, the diagnoses) to -o")
	fs.StringVar(&f.out, "o", "-", "with --html: output file (- for stdout, not a terminal); an existing file keeps its mode, a new one is 0600")
	fs.BoolVar(&f.force, "force", false, "let -o replace an existing recording")
	f.bf.Register(fs)
	return fs, f
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newReportFlags(stdout)
	path, err := cli.OneFile(fs, "report", args)
	if err != nil {
		return err
	}
	if f.html && f.json {
		return cli.UsageErr("report: --html and --json are two outputs: give one")
	}
	if !f.html && f.out != outfile.Stdout {
		return cli.UsageErr("report: -o is the file of --html (text and JSON go to standard output)")
	}
	if f.html {
		return runReportHTML(ctx, fs, f, path, stdout, stderr)
	}
	r, err := session.OpenRecording(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer r.Close()
	a := analyzer.New(analyzer.Options{BF: f.bf.Config(fs, r.Info()), Clock: r.Info().Anchor()})
	res, err := session.ReadAll(ctx, r, a.Ingest)
	if err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if w := res.Warning(path); w != "" {
		fmt.Fprintln(stderr, "sqscope:", w)
	}
	rec := session.Describe(path, r, &res)
	snap := a.Snapshot()
	if f.json {
		if err := cli.WriteJSON(stdout, struct {
			Recording session.RecordingInfo `json:"recording"`
			analyzer.Snapshot
		}{rec, snap}, true); err != nil {
			return fmt.Errorf("report: writing JSON: %w", err)
		}
	} else {
		fmt.Fprintln(stdout, rec.TextHeader())
		if err := report.WriteText(stdout, snap); err != nil {
			return fmt.Errorf("report: writing the report: %w", err)
		}
	}
	if err := res.Err(path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// runReportHTML writes the HTML report: the report's snapshot from one
// pass over the recording, each QP's occupancy over the whole run from a
// second (report.Series), then the page, through outfile.
func runReportHTML(ctx context.Context, fs *flag.FlagSet, f *reportFlags, path string, stdout, stderr io.Writer) error {
	if f.out == "" {
		return cli.UsageErr("report: -o needs a file name (or - for stdout)")
	}
	if f.out == outfile.Stdout && isTerminal(stdout) {
		return cli.UsageErr("report: --html writes a page, not text for a terminal: give -o FILE.html (or redirect standard output)")
	}
	if _, err := outfile.Check(f.out, []string{path}, f.force); err != nil {
		return fmt.Errorf("report: creating output: %w", err)
	}
	r, err := session.OpenRecording(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer r.Close()
	opts := analyzer.Options{BF: f.bf.Config(fs, r.Info()), Clock: r.Info().Anchor()}
	a := analyzer.New(opts)
	res, err := session.ReadAll(ctx, r, a.Ingest)
	if err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	rec := session.Describe(path, r, &res)
	snap := a.Snapshot()
	series, err := reportSeries(ctx, path, opts, &snap)
	if err != nil {
		return err
	}
	var w io.Writer = stdout
	var out *outfile.File
	if f.out != outfile.Stdout {
		if out, err = outfile.Create(f.out, 0o600, []string{path}, f.force, true); err != nil {
			return fmt.Errorf("report: creating output: %w", err)
		}
		defer out.Discard()
		w = out
	}
	page := report.Page{Title: filepath.Base(path), Header: rec.TextHeader(), Snap: snap, Series: series}
	if err := report.WriteHTML(w, page); err != nil {
		return fmt.Errorf("report: writing the page: %w", err)
	}
	if res.Corrupt != nil && out != nil && out.Replaces() {
		return fmt.Errorf("report: %w; %s is left as it was", res.Err(path), f.out)
	}
	if out != nil {
		if err := out.Commit(); err != nil {
			return fmt.Errorf("report: writing %s: %w", f.out, err)
		}
	}
	if w := res.Warning(path); w != "" {
		fmt.Fprintln(stderr, "sqscope:", w)
	}
	if err := res.Err(path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if out != nil {
		fmt.Fprintf(stderr, "sqscope: wrote %s: %d QPs, %d diagnoses\n", f.out, len(snap.QPs), len(snap.Diagnoses))
	}
	return nil
}

// reportSeries reads the recording again into an analyzer whose
// histories span the whole run (report.SeriesOptions), counting failed
// posts as they pass: memory bounded by the QPs, not the recording.
func reportSeries(ctx context.Context, path string, opts analyzer.Options, snap *analyzer.Snapshot) (*report.Series, error) {
	r, err := session.OpenRecording(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	defer r.Close()
	so := report.SeriesOptions(opts, snap.FirstNS, snap.LastNS, len(snap.QPs))
	a := analyzer.New(so)
	s := report.NewSeries(so.HistoryStepNS)
	if _, err := session.ReadAll(ctx, r, func(ev trace.Event) {
		a.Ingest(ev)
		s.Event(ev)
	}); err != nil {
		return nil, fmt.Errorf("report: %s: %w", path, err)
	}
	s.Take(a.Snapshot())
	return s, nil
}
