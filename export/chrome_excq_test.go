package export

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// An extended poll session is drawn as one slice, and the occupancy of
// the QPs of its CQ follows it although its completions name no QP.
func TestChromeExtendedPoll(t *testing.T) {
	var out bytes.Buffer
	x := NewChrome(&out, ChromeOptions{Recording: "r.sqscope"})
	h := trace.Header{TimeNS: 1000, PID: 7, TID: 7}
	x.Event(&trace.QPCreate{Header: h, QP: 1, QPNum: 0x10, Type: trace.QPType(ibv.QPTRC), SendCQ: 0x500,
		Caps: trace.Caps{MaxSendWR: 64, MaxSendSGE: 1}})
	h.TimeNS = 2000
	x.Event(&trace.Post{Header: h, QP: 1, QPNum: 0x10, Accepted: 2, WRs: []trace.WR{
		{ID: 1, Opcode: ibv.WRAtomicFetchAndAdd, NumSGE: 1, Bytes: 8},
		{ID: 2, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled, NumSGE: 1, Bytes: 64}}})
	h.TimeNS = 3000
	x.Event(&trace.Poll{Header: h, CQ: 0x500, Ret: 1, Ex: true, WCs: []trace.WC{{ID: 2}}})
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ts   json.Number    `json:"ts"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	var slices int
	var occ []float64
	for _, ev := range doc.TraceEvents {
		switch ev.Name {
		case "ibv_start_poll..ibv_end_poll":
			slices++
		case "SQ occupancy QP 0x10":
			occ = append(occ, ev.Args["outstanding"].(float64))
		}
	}
	if slices != 1 || len(occ) != 3 || occ[1] != 2 || occ[2] != 0 {
		t.Errorf("%d poll slices, occupancy %v; want 1 slice and 0, 2, 0\n%s", slices, occ, out.String())
	}
}
