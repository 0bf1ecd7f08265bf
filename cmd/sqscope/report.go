package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

type reportFlags struct {
	json     bool
	preferBF bool
	shutUpBF bool
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

// bfFlags registers the flags that mirror the target's libmlx5 BlueFlame
// settings, which a recording does not carry.
func bfFlags(fs *flag.FlagSet, preferBF, shutUpBF *bool) {
	fs.BoolVar(preferBF, "mlx5-prefer-bf", true, "the target ran with MLX5_POST_SEND_PREFER_BF=1 (default: what the recording says, else libmlx5's default, on)")
	fs.BoolVar(shutUpBF, "mlx5-shut-up-bf", false, "the target ran with MLX5_SHUT_UP_BF=1, no BlueFlame writes (default: what the recording says, else off)")
}

// bfConfig is the target's BlueFlame setting: the flags when given, else
// what the recording says the target's environment held.
func bfConfig(fs *flag.FlagSet, preferBF, shutUpBF bool, fi trace.FileInfo) analyzer.BFConfig {
	bf := analyzer.BFFromEnv(fi.Env)
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "mlx5-prefer-bf":
			bf.PreferBF = preferBF
		case "mlx5-shut-up-bf":
			bf.ShutUpBF = shutUpBF
		}
	})
	return bf
}

func newReportFlags(stderr io.Writer) (*flag.FlagSet, *reportFlags) {
	f := &reportFlags{}
	fs := commandFlags("report", "report FILE [flags]",
		"Rebuild every send queue of a recording and print what happened: occupancy,\ndoorbells and BlueFlame writes, PCIe savings, and diagnoses with their fixes.\nA truncated recording is reported up to the cut, with a warning.",
		reportExamples, stderr)
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of text")
	bfFlags(fs, &f.preferBF, &f.shutUpBF)
	return fs, f
}

// parseArgs parses flags given before or after the positional arguments
// (the flag package stops at the first one); everything after "--" is
// positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// oneFile parses the flags of a command that takes exactly one recording.
func oneFile(fs *flag.FlagSet, name string, args []string) (string, error) {
	var pos []string
	err := parseQuiet(fs, fs.Output(), func() (err error) {
		pos, err = parseArgs(fs, args)
		return err
	})
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", err
		}
		return "", usageErr("%s: %v", name, err)
	}
	switch len(pos) {
	case 0:
		return "", usageErr("%s: no recording given (usage: sqscope %s FILE)", name, name)
	case 1:
		return pos[0], nil
	}
	return "", usageErr("%s: one recording at a time, got %d (%s)", name, len(pos), strings.Join(pos, " "))
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newReportFlags(stderr)
	path, err := oneFile(fs, "report", args)
	if err != nil {
		return err
	}
	r, err := session.OpenRecording(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer r.Close()
	a := analyzer.New(analyzer.Options{BF: bfConfig(fs, f.preferBF, f.shutUpBF, r.Info())})
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
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(struct {
			Recording session.RecordingInfo `json:"recording"`
			analyzer.Snapshot
		}{rec, snap}); err != nil {
			return fmt.Errorf("report: writing JSON: %w", err)
		}
	} else {
		fmt.Fprintln(stdout, rec.TextHeader())
		analyzer.WriteText(stdout, snap)
	}
	if err := res.Err(path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
