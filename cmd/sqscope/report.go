package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sqscope/sqscope/analyzer"
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
	bf := bfFromEnv(fi.Env)
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
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.json, "json", false, "print one JSON object instead of text")
	bfFlags(fs, &f.preferBF, &f.shutUpBF)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sqscope report FILE [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Rebuild every send queue of a recording and print what happened: occupancy,")
		fmt.Fprintln(stderr, "doorbells and BlueFlame writes, PCIe savings, and diagnoses with their fixes.")
		fmt.Fprintln(stderr, "A truncated recording is reported up to the cut, with a warning.")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "FLAGS")
		fs.PrintDefaults()
		fmt.Fprint(stderr, reportExamples)
	}
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

// replayResult says how reading a recording ended.
type replayResult struct {
	events    int64
	truncated *trace.TruncatedError // the file stops before its end
	corrupt   *trace.CorruptError   // damaged: events before it were read
}

// warning is the one line that says where a truncated file stopped.
func (r *replayResult) warning(path string) string {
	if r.truncated == nil {
		return ""
	}
	return fmt.Sprintf("warning: %s stops early: %v; used the %d events before the cut", path, r.truncated, r.events)
}

// err is the error for a damaged recording, after its events were used.
func (r *replayResult) err(path string) error {
	if r.corrupt == nil {
		return nil
	}
	return fmt.Errorf("%s: %w (used the %d events before it)", path, r.corrupt, r.events)
}

// replay streams every event of r to fn. A truncated or damaged file is not
// an error here: the result says where it stopped.
func replay(ctx context.Context, r *trace.Reader, fn func(trace.Event)) (replayResult, error) {
	var res replayResult
	for {
		ev, err := r.Next()
		if err != nil {
			var te *trace.TruncatedError
			var ce *trace.CorruptError
			switch {
			case errors.Is(err, io.EOF):
				return res, nil
			case errors.As(err, &te):
				res.truncated = te
				return res, nil
			case errors.As(err, &ce):
				res.corrupt = ce
				return res, nil
			}
			return res, err
		}
		fn(ev)
		res.events++
		if res.events%65536 == 0 && ctx.Err() != nil {
			return res, fmt.Errorf("interrupted after %d events", res.events)
		}
	}
}

// openRecording opens a recording for reading; its errors (not a
// recording, another version, cut inside the header) are one line each.
func openRecording(path string) (*trace.Reader, error) {
	r, err := trace.Open(path)
	if err != nil {
		var te *trace.TruncatedError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%w: no events to read", err)
		}
		return nil, err
	}
	return r, nil
}

// recordingJSON is what a JSON report says about the file it read.
type recordingJSON struct {
	File          string `json:"file"`
	FormatVersion int    `json:"format_version"`
	Hostname      string `json:"hostname,omitempty"`
	Kernel        string `json:"kernel,omitempty"`
	Version       string `json:"sqscope_version,omitempty"`
	StartWall     string `json:"start_wall,omitempty"`
	StartMonoNS   uint64 `json:"start_mono_ns,omitempty"`
	Target        string `json:"target,omitempty"`
	TargetPID     uint32 `json:"target_pid,omitempty"`
	ProbeMode     string `json:"probe_mode,omitempty"`
	Complete      bool   `json:"complete"`
	// Where a truncated file stops: the end of its last whole record.
	TruncatedAt   *int64 `json:"truncated_at,omitempty"`
	LeftoverBytes int64  `json:"leftover_bytes,omitempty"`
	// Records of kinds this version does not know, skipped.
	SkippedRecords int64 `json:"skipped_records,omitempty"`
}

func describeRecording(path string, r *trace.Reader, res *replayResult) recordingJSON {
	fi := r.Info()
	rec := recordingJSON{File: path, FormatVersion: trace.FormatVersion, Hostname: fi.Hostname, Kernel: fi.Kernel,
		Version: fi.Version, StartMonoNS: fi.StartMonoNS, Target: fi.Target, TargetPID: fi.TargetPID,
		ProbeMode: fi.ProbeMode, Complete: res.truncated == nil && res.corrupt == nil, SkippedRecords: r.Skipped()}
	if !fi.StartWall.IsZero() {
		rec.StartWall = fi.StartWall.UTC().Format(time.RFC3339Nano)
	}
	if te := res.truncated; te != nil {
		rec.TruncatedAt, rec.LeftoverBytes = &te.Offset, te.Leftover
	}
	return rec
}

// textHeader is the line above a text report saying what was read.
func (rec *recordingJSON) textHeader() string {
	parts := []string{"recording " + rec.File + ":"}
	if rec.Target != "" {
		t := rec.Target
		if rec.TargetPID != 0 && !strings.Contains(t, fmt.Sprint(rec.TargetPID)) {
			t += fmt.Sprintf(" (pid %d)", rec.TargetPID)
		}
		parts = append(parts, t)
	}
	if rec.Hostname != "" {
		parts = append(parts, "on "+rec.Hostname)
	}
	if rec.Kernel != "" {
		parts = append(parts, "kernel "+rec.Kernel)
	}
	if rec.StartWall != "" {
		parts = append(parts, "started "+rec.StartWall)
	}
	if rec.ProbeMode != "" {
		parts = append(parts, "probes "+rec.ProbeMode)
	}
	if rec.Version != "" {
		parts = append(parts, "sqscope "+rec.Version)
	}
	if !rec.Complete {
		parts = append(parts, "INCOMPLETE")
	}
	return strings.Join(parts, " ")
}

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newReportFlags(stderr)
	path, err := oneFile(fs, "report", args)
	if err != nil {
		return err
	}
	r, err := openRecording(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer r.Close()
	a := analyzer.New(analyzer.Options{BF: bfConfig(fs, f.preferBF, f.shutUpBF, r.Info())})
	res, err := replay(ctx, r, a.Ingest)
	if err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if w := res.warning(path); w != "" {
		fmt.Fprintln(stderr, "sqscope:", w)
	}
	rec := describeRecording(path, r, &res)
	snap := a.Snapshot()
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(struct {
			Recording recordingJSON `json:"recording"`
			analyzer.Snapshot
		}{rec, snap}); err != nil {
			return fmt.Errorf("report: writing JSON: %w", err)
		}
	} else {
		fmt.Fprintln(stdout, rec.textHeader())
		analyzer.WriteText(stdout, snap)
	}
	if err := res.err(path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
