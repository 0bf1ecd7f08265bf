package export

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

type chromeDoc struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

// Failed posts of a QP fold into one slice per run: a run ends at a
// success, at another cause, or after a gap longer than the fold time.
func TestFoldFailures(t *testing.T) {
	var evs []trace.Event
	now := uint64(1_000_000)
	post := func(ret int32, bytes uint32, gap uint64) {
		now += gap
		evs = append(evs, &trace.Post{Header: trace.Header{TimeNS: now, PID: 1, TID: 1}, QPNum: 5, Ret: ret,
			WRs: []trace.WR{{ID: now, Opcode: ibv.WRSend, Flags: ibv.SendInline | ibv.SendSignaled, NumSGE: 1, Bytes: bytes}}, Accepted: map[bool]uint32{true: 1}[ret == 0]})
	}
	evs = append(evs, &trace.QPCreate{Header: trace.Header{TimeNS: now, PID: 1, TID: 1}, QPNum: 5, Type: trace.QPTypeRC,
		Caps: trace.Caps{MaxSendWR: 1024, MaxSendSGE: 1, MaxInlineData: 64}, Via: "sqsim_create_qp"})
	for range 100 { // a run of 100 inline-too-big failures, 1 µs apart
		post(ibv.ENOMEM, 512, 1000)
	}
	post(0, 16, 1000) // a success ends it
	for range 3 {     // three failures, each more than the fold time after the last
		post(ibv.ENOMEM, 512, uint64(40*time.Millisecond))
	}
	post(ibv.EINVAL, 16, 1000) // another cause: a run of its own
	var out bytes.Buffer
	x, err := New(&out, FormatChrome, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		x.Event(ev)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	var doc chromeDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var runs []string
	var rates []float64
	for _, ev := range doc.TraceEvents {
		switch {
		case ev.Ph == "b" || ev.Ph == "i" && strings.HasPrefix(ev.Name, "post failed"):
			runs = append(runs, ev.Name+" x"+strings.TrimSuffix(strings.TrimSuffix(
				strings.TrimPrefix(jsonNum(ev.Args["count"]), ""), ".0"), ""))
		case ev.Ph == "C" && strings.HasSuffix(ev.Name, "post failures/s"):
			rates = append(rates, ev.Args["failures_per_s"].(float64))
		}
	}
	want := []string{"post failed: ENOMEM (inline data too big) x100", "post failed: ENOMEM (inline data too big) x1",
		"post failed: ENOMEM (inline data too big) x1", "post failed: ENOMEM (inline data too big) x1", "post failed: EINVAL x1"}
	if strings.Join(runs, "|") != strings.Join(want, "|") {
		t.Errorf("runs:\n%q\nwant\n%q", runs, want)
	}
	// 102 failures in the first 100 ms window, 2 in the second (the last
	// window is sampled when the export ends)
	if len(rates) != 2 || rates[0] != 1020 || rates[1] != 20 {
		t.Errorf("failures/s samples %v, want 1020 and 20", rates)
	}
	if st := x.Stats(); st.Folded != 104 || st.Bursts != 5 {
		t.Errorf("stats %+v, want 104 failures folded into 5", st)
	}
}

func jsonNum(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	p := progress{w: &buf, start: time.Now(), offset: func() int64 { return 50 }, size: 200}
	p.report(10)
	if buf.Len() != 0 {
		t.Fatalf("a quick export printed %q", buf.String())
	}
	p.start = time.Now().Add(-2 * time.Second)
	p.report(1000)
	p.report(2000) // less than a second later: nothing
	p.done(3000)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "sqscope: export: 1000 events read in 2.0 s, 25% of the recording") ||
		!strings.HasPrefix(lines[1], "sqscope: export: 3000 events read in 2.0 s, done") {
		t.Errorf("progress lines %q", lines)
	}
}
