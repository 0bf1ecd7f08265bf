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
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 0, 0, 2, 0, 1})
	f.Add([]byte{0, 0, 1, 1, 0, 0, 255, 255, 255, 1, 0, 1, 1, 0, 0, 250, 12, 250, 0, 3, 2, 0, 0, 0, 254, 255})
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
