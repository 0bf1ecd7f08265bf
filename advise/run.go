package advise

import (
	"context"
	"fmt"
	"io"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

// Examples are the command's usage examples.
const Examples = `
EXAMPLES
  sqscope advise run.sqscope
        the best inline, signaling, post-list and depth settings for a recording
  sqscope advise --workload -- -s 256 -Q 1 -n 20000
        record the built-in workload first, then advise
  sqscope advise --json --nic link-gbps=0.25,rtt-ns=20000 run.sqscope
        every candidate as JSON, on a NIC model matching the run's
`

// Options are the command's choices.
type Options struct {
	JSON  bool
	Model Model
	// BF gives the target's BlueFlame settings from the recording's
	// header (and the command's flags).
	BF func(trace.FileInfo) analyzer.BFConfig
}

// Run advises on the recording at path. With JSON, stdout holds one JSON
// document however it ends: the advice, the QPs it cannot advise on and
// why, and the error that ends it ("error"), which Run returns too.
func Run(ctx context.Context, path string, o Options, stdout, stderr io.Writer) error {
	m := o.Model
	rep := Report{Model: m, ModelError: MeasuredError, Limits: Limits, QPs: []Advice{}}
	fail := func(err error) error {
		if o.JSON {
			rep.Error = err.Error()
			if werr := WriteJSON(stdout, rep); werr != nil {
				return fmt.Errorf("%w (writing the JSON: %v)", err, werr)
			}
		}
		return err
	}
	r, err := session.OpenRecording(path)
	if err != nil {
		return fail(fmt.Errorf("advise: %w", err))
	}
	defer r.Close()
	m.BF = o.BF(r.Info())
	rep.Model = m
	streams, not, res, err := Load(ctx, r, m.BF)
	rep.NotAdvised = not
	switch {
	case err != nil && res.Corrupt != nil: // the damage, not what it left
		return fail(fmt.Errorf("advise: %w; %v", res.Err(path), err))
	case err != nil && res.Truncated != nil:
		return fail(fmt.Errorf("advise: %s stops early: %v; %v before the cut", path, res.Truncated, err))
	case err != nil:
		return fail(fmt.Errorf("advise: %s: %w", path, err))
	}
	if w := res.Warning(path); w != "" {
		fmt.Fprintln(stderr, "sqscope:", w)
	}
	ads, err := Advise(ctx, streams, m)
	if err != nil {
		return fail(fmt.Errorf("advise: %s: %w", path, err))
	}
	damaged := res.Err(path)
	if o.JSON {
		rep.QPs = ads
		if damaged != nil {
			rep.Error = damaged.Error()
		}
		err = WriteJSON(stdout, rep)
	} else {
		err = WriteText(stdout, m, ads, not)
	}
	if err != nil {
		return fmt.Errorf("advise: writing: %w", err)
	}
	return damaged
}
