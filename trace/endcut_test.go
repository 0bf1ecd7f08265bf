package trace

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// An End that says where the trace was cut keeps the record of an End
// without a cut as its prefix: old readers read it as before (no cut), new
// readers read old ones (CutNS 0), and what a later writer appends is
// skipped.
func TestEndCutAppended(t *testing.T) {
	h := Header{TimeNS: 9_000_000_000, PID: 4242}
	tests := []struct {
		name string
		ev   *End
	}{
		{"cut, all back", &End{Header: h, Reason: "interrupt signal received", CutNS: 8_999_000_000}},
		{"cut, posts unseen", &End{Header: h, Reason: "the time limit was reached", CutNS: 1, InFlightUnseen: 3}},
		{"cut on an error", &End{Header: h, Reason: "x", Err: true, CutNS: 1 << 62, InFlightUnseen: 1 << 40}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := readAll(writeRecording(t, []Event{tc.ev}, 0))
			if err != io.EOF {
				t.Fatalf("reading: %v", err)
			}
			assertEvents(t, got, []Event{tc.ev})

			old := *tc.ev
			old.CutNS, old.InFlightUnseen = 0, 0
			body, oldBody := recordBody(t, tc.ev), recordBody(t, &old)
			if !bytes.HasPrefix(body, oldBody) || len(body) == len(oldBody) {
				t.Fatalf("record body\n%x\ndoes not extend the body without a cut\n%x", body, oldBody)
			}
			for _, c := range []struct {
				body []byte
				want Event
			}{{oldBody, &old}, {append(bytes.Clone(body), "later fields"...), tc.ev}} {
				rec := append([]byte{byte(KindEnd)}, binary.AppendUvarint(nil, uint64(len(c.body)))...)
				var d decoder
				ev, _, err := d.nextRecord(append(rec, c.body...))
				if err != nil {
					t.Fatal(err)
				}
				assertEvents(t, []Event{ev}, []Event{c.want})
			}
		})
	}
}
