package export

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// exPollEvents: a QP of send CQ 0x500 posts two WRs, and one extended poll
// session of the CQ returns the signaled one's completion, which names no
// QP.
func exPollEvents() []trace.Event {
	h := trace.Header{TimeNS: 1000, PID: 7, TID: 7}
	evs := []trace.Event{&trace.QPCreate{Header: h, QP: 1, QPNum: 0x10, Type: trace.QPType(ibv.QPTRC), SendCQ: 0x500,
		Caps: trace.Caps{MaxSendWR: 64, MaxSendSGE: 1}, Via: "sqsim_create_qp"}}
	h.TimeNS = 2000
	evs = append(evs, &trace.Post{Header: h, QP: 1, QPNum: 0x10, Accepted: 2, WRs: []trace.WR{
		{ID: 1, Opcode: ibv.WRAtomicFetchAndAdd, NumSGE: 1, Bytes: 8},
		{ID: 2, Opcode: ibv.WRRDMARead, Flags: ibv.SendSignaled, NumSGE: 1, Bytes: 64}}})
	h.TimeNS = 3000
	return append(evs, &trace.Poll{Header: h, CQ: 0x500, Ret: 1, Ex: true, WCs: []trace.WC{{ID: 2}}})
}

func exportOf(t *testing.T, f Format, evs []trace.Event) []byte {
	t.Helper()
	var out bytes.Buffer
	x, err := New(&out, f, Options{Recording: "r.sqscope", Instants: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		x.Event(ev)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// An extended poll session is drawn as one slice, and the occupancy of
// the QPs of its CQ follows it although its completions name no QP.
func TestChromeExtendedPoll(t *testing.T) {
	out := exportOf(t, FormatChrome, exPollEvents())
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ts   json.Number    `json:"ts"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
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
		t.Errorf("%d poll slices, occupancy %v; want 1 slice and 0, 2, 0\n%s", slices, occ, out)
	}
}

// The same in Perfetto's format.
func TestPerfettoExtendedPoll(t *testing.T) {
	d := decodePerfetto(t, exportOf(t, FormatPerfetto, exPollEvents()))
	var slices int
	for _, e := range d.events {
		if strings.Contains(e, " ibv_start_poll..ibv_end_poll ") {
			slices++
		}
	}
	var occ []float64
	for _, s := range d.samples {
		if strings.HasSuffix(s.track, "QP 0x10 outstanding WRs") {
			occ = append(occ, s.v)
		}
	}
	if slices != 1 || len(occ) != 3 || occ[1] != 2 || occ[2] != 0 {
		t.Errorf("%d poll slices, occupancy %v; want 1 slice and 0, 2, 0\nevents %q", slices, occ, d.events)
	}
}
