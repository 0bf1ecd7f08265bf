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

// Run advises on the recording at path.
func Run(ctx context.Context, path string, o Options, stdout, stderr io.Writer) error {
	r, err := session.OpenRecording(path)
	if err != nil {
		return fmt.Errorf("advise: %w", err)
	}
	defer r.Close()
	m := o.Model
	m.BF = o.BF(r.Info())
	streams, res, err := Load(ctx, r, m.BF)
	if err != nil {
		return fmt.Errorf("advise: %s: %w", path, err)
	}
	if w := res.Warning(path); w != "" {
		fmt.Fprintln(stderr, "sqscope:", w)
	}
	ads := Advise(streams, m)
	if o.JSON {
		err = WriteJSON(stdout, m, ads)
	} else {
		err = WriteText(stdout, m, ads)
	}
	if err != nil {
		return fmt.Errorf("advise: writing: %w", err)
	}
	return res.Err(path)
}
