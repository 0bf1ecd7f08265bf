package analyzer

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// smallRecording is two QPs of one process: 0x1c0 posts inline batches of 4,
// signals every 8th WR and polls; 0x1c1 never signals and overflows.
func smallRecording() []trace.Event {
	s := streamtest.New()
	s.Add(
		&trace.Attach{Header: s.Header(), Func: "post_send", Path: "/usr/bin/app", Offset: 0x1234, How: "symbol"},
		&trace.Attach{Header: s.Header(), Func: "poll_cq", Path: "/usr/bin/app", Offset: 0x2345, How: "symbol"})
	s.Create(0x1c0, trace.QPTypeRC, streamtest.RCCaps(64, 124, 1), false)
	s.Create(0x1c1, trace.QPTypeRC, streamtest.RCCaps(8, 124, 1), false)
	for i := range 8 {
		s.Post(0x1c0, s.WRs(0x1c0, 4, ibv.WRSend, ibv.SendInline, 1, 64, 8), 0, 4)
		if i%2 == 1 {
			s.EmptyPolls(0x1c0, 2)
			s.Poll(0x1c0, s.IDs[0x1c0]-1)
		}
	}
	for range 8 {
		s.Post(0x1c1, s.WRs(0x1c1, 1, ibv.WRRDMAWrite, 0, 1, 4096, 0), 0, 1)
	}
	s.Post(0x1c1, s.WRs(0x1c1, 1, ibv.WRRDMAWrite, 0, 1, 4096, 0), ibv.ENOMEM, 0)
	s.Add(&trace.Exit{Header: s.Header(), Code: 1})
	return s.Events
}

func TestReportOfRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.sqscope")
	w, err := trace.Create(path, trace.FileInfo{Hostname: "host", Kernel: "6.8.0", Version: "test",
		StartWall: time.Unix(1700000000, 0), Target: "app", TargetPID: streamtest.PID, ProbeMode: "symbol"})
	if err != nil {
		t.Fatal(err)
	}
	evs := smallRecording()
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := New(Options{BF: DefaultBF})
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Ingest(ev)
	}
	s := checked(t, a)
	if s.Events != uint64(len(evs)) || len(s.QPs) != 2 || s.QPs[0].WRs != 32 || s.QPs[1].ENOMEMSQFull != 1 {
		t.Fatalf("events %d, QPs %d; want %d events, 2 QPs, 32 WRs and 1 overflow", s.Events, len(s.QPs), len(evs))
	}
	var text, js bytes.Buffer
	WriteText(&text, s)
	if err := WriteJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	golden(t, "report_small.txt.golden", text.Bytes())
	golden(t, "report_small.json.golden", js.Bytes())
}

func TestReportEmpty(t *testing.T) {
	var b bytes.Buffer
	WriteText(&b, checked(t, New(Options{})))
	want := "sqscope: 0 events over 0.000 s, 0 QP(s), 0 lost events\n  no send queue activity seen\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
