package diff

import (
	"context"
	"fmt"
	"io"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

// Examples are the EXAMPLES of sqscope diff --help.
const Examples = `
EXAMPLES
  sqscope diff before.sqscope after.sqscope
        what a change did: per QP and in total, before -> after
  sqscope diff --json --match qpn a.sqscope b.sqscope | jq '.total'
        QPs paired by number; one JSON object
`

// Options are sqscope diff's.
type Options struct {
	JSON  bool
	Match Match
	// BF gives the BlueFlame settings to model each recording with.
	BF func(trace.FileInfo) analyzer.BFConfig
	// WriteJSON writes the report as the CLI writes its JSON documents.
	WriteJSON func(io.Writer, any) error
}

// Run compares the recordings before and after and writes the result.
func Run(ctx context.Context, before, after string, o Options, stdout io.Writer) error {
	if o.Match != ByProcess && o.Match != ByQPN {
		return fmt.Errorf("--match %q: want %s or %s", o.Match, ByProcess, ByQPN)
	}
	b, err := Load(ctx, before, o.BF)
	if err != nil {
		return err
	}
	a, err := Load(ctx, after, o.BF)
	if err != nil {
		return err
	}
	rep := Compare(b, a, o.Match)
	if o.JSON {
		err = o.WriteJSON(stdout, rep)
	} else {
		err = WriteText(stdout, rep)
	}
	if err != nil {
		return fmt.Errorf("writing the comparison: %w", err)
	}
	return nil
}
