package report

import (
	"bytes"
	"io"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

// FuzzReport writes the reports of what the analyzer makes of arbitrary
// event values (analyzer.FuzzIngest's streams): whatever the snapshot
// holds, the text and the JSON are written without a panic, and the HTML
// page parses whole with its data.
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
		series, err := SeriesFrom(analyzer.Options{}, &s, func(fn func(trace.Event)) error {
			for _, ev := range evs {
				fn(ev)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var page bytes.Buffer
		if err := WriteHTML(&page, Page{Title: "fuzz", Snap: s, Series: series}); err != nil {
			t.Fatal(err)
		}
		if p := parsePage(t, page.Bytes()); len(p.Rows) != len(s.QPs) {
			t.Fatalf("%d rows for %d QPs", len(p.Rows), len(s.QPs))
		}
	})
}
