package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/cmd/internal/cli"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/session"
)

type reportFlags struct {
	json bool
	bf   cli.BF
}

const reportExamples = `
EXAMPLES
  sqscope report run.sqscope
        per-QP summary, PCIe savings and diagnoses of a recording
  sqscope report run.sqscope --json | jq '.qps[] | {qp_num, wrs, doorbells, bf_writes}'
        the same as one JSON object; counters use the workload's names
  sqscope report --mlx5-shut-up-bf run.sqscope
        model a target that ran with MLX5_SHUT_UP_BF=1 (no BlueFlame)
`

func newReportFlags(help io.Writer) (*flag.FlagSet, *reportFlags) {
	f := &reportFlags{}
	fs := cli.CommandFlags("report", "report FILE [flags]",
		"Rebuild every send queue of a recording and print what happened: occupancy,\ndoorbells and BlueFlame writes, PCIe savings, and diagnoses with their fixes.\nA truncated recording is reported up to the cut, with a warning.",
		reportExamples, help)
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of text")
	f.bf.Register(fs)
	return fs, f
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newReportFlags(stdout)
	path, err := cli.OneFile(fs, "report", args)
	if err != nil {
		return err
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
