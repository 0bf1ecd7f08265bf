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
  sqscope diff --html -o change.html before.sqscope after.sqscope
        one self-contained page: the runs, the totals, every QP's figures as bars
`

// Options are sqscope diff's.
type Options struct {
	JSON, HTML bool
	Match      Match
	// BF gives the BlueFlame settings to model each recording with.
	BF func(trace.FileInfo) analyzer.BFConfig
	// WriteJSON writes the report as the CLI writes its JSON documents.
	WriteJSON func(io.Writer, any) error
}

// Run compares the recordings before and after and writes the result
// to w (text, JSON or the HTML page), a warning for a recording cut short
// to stderr. It returns the comparison.
func Run(ctx context.Context, before, after string, o Options, w, stderr io.Writer) (*Report, error) {
	if o.Match != ByProcess && o.Match != ByQPN {
		return nil, fmt.Errorf("--match %q: want %s or %s", o.Match, ByProcess, ByQPN)
	}
	b, err := Load(ctx, before, o.BF)
	if err != nil {
		return nil, err
	}
	a, err := Load(ctx, after, o.BF)
	if err != nil {
		return nil, err
	}
	for _, s := range []*Side{b, a} {
		if warn := s.Result.Warning(s.File); warn != "" {
			fmt.Fprintln(stderr, "sqscope:", warn)
		}
	}
	rep := Compare(b, a, o.Match)
	switch {
	case o.JSON:
		err = o.WriteJSON(w, rep)
	case o.HTML:
		err = WriteHTML(w, rep, b, a)
	default:
		err = WriteText(w, rep)
	}
	if err != nil {
		return nil, fmt.Errorf("writing the comparison: %w", err)
	}
	return rep, nil
}
