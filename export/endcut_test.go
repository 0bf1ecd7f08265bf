package export

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// A trace cut while its target ran on shows the cut as a mark for the whole
// timeline, where it was; one that ended otherwise, or whose cut is outside
// the exported window, shows none.
func TestExportShowsTheCut(t *testing.T) {
	tests := []struct {
		name     string
		cutNS    uint64
		from, to uint64 // the window, in ns of the trace's clock (0: open)
		want     string // the mark's ts in µs, "" for none
	}{
		{"cut", 3500, 0, 0, "3.500"},
		{"not cut", 0, 0, 0, ""},
		{"cut outside the window", 3500, 0, 3000, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			o := Options{Info: trace.FileInfo{Target: "t"}, Instants: true}
			if tc.to != 0 {
				o.Filter.To = Time{Given: true, FromStartNS: tc.to - 1000} // from the first event
			}
			x, err := New(&out, FormatChrome, o)
			if err != nil {
				t.Fatal(err)
			}
			h := trace.Header{TimeNS: 1000, PID: 7, TID: 7}
			x.Event(&trace.QPCreate{Header: h, QP: 1, QPNum: 0x10, Type: trace.QPType(ibv.QPTRC), SendCQ: 2,
				Caps: trace.Caps{MaxSendWR: 128, MaxSendSGE: 1}})
			h.TimeNS = 2000
			x.Event(&trace.Post{Header: h, QP: 1, QPNum: 0x10, Accepted: 1,
				WRs: []trace.WR{{ID: 1, Opcode: ibv.WRSend, Flags: ibv.SendSignaled, NumSGE: 1, Bytes: 64}}})
			h.TimeNS = 3000
			x.Event(&trace.Poll{Header: h, CQ: 2, Max: 16, Ret: 1, WCs: []trace.WC{{ID: 1, QPNum: 0x10}}})
			h.TimeNS = 4000
			x.Event(&trace.End{Header: h, Reason: "interrupt signal received", CutNS: tc.cutNS, InFlightUnseen: 2})
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				TraceEvents []struct {
					Name  string          `json:"name"`
					Scope string          `json:"s"`
					TS    json.RawMessage `json:"ts"`
					Args  map[string]any  `json:"args"`
				} `json:"traceEvents"`
			}
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out.String())
			}
			got := ""
			for _, ev := range doc.TraceEvents {
				if ev.Name != "trace cut: every probe stopped here" {
					continue
				}
				if got != "" {
					t.Fatalf("two cut marks:\n%s", out.String())
				}
				got = string(ev.TS)
				if ev.Scope != "g" || ev.Args["posts_in_flight_unseen"] != float64(2) {
					t.Errorf("cut mark scope %q args %v, want g and posts_in_flight_unseen 2", ev.Scope, ev.Args)
				}
			}
			if got != tc.want {
				t.Errorf("cut mark at %q µs, want %q:\n%s", got, tc.want, out.String())
			}
		})
	}
}
