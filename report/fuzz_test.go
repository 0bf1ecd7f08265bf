package report

import (
	"io"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/streamtest"
)

// FuzzReport writes the reports of what the analyzer makes of arbitrary
// event values (analyzer.FuzzIngest's streams): whatever the snapshot
// holds, the text and the JSON are written without a panic.
func FuzzReport(f *testing.F) {
	for _, b := range streamtest.Seeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, _ := streamtest.FromBytes(data)
		a := analyzer.New(analyzer.Options{HistoryStepNS: 1000, HistoryLen: 64})
		a.IngestAll(evs)
		s := a.Snapshot()
		if err := WriteText(io.Discard, s); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(io.Discard, s); err != nil {
			t.Fatal(err)
		}
	})
}
