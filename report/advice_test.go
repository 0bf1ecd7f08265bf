package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

// The advice section lays out advise's words as given: each QP's text
// under its label, the rest folded, what was advised on; or why there is
// none; and no section at all when none was asked for. The QPs featured
// (those advised on) are the diagnosed first.
func TestHTMLAdvice(t *testing.T) {
	s := streamtest.New()
	s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
	s.Create(2, trace.QPTypeRC, streamtest.RCCaps(16, 60, 1), false)
	for i := range uint64(8) { // the busier, healthy
		s.Send(1, 4, 0, 4)
		s.Poll(1, 4*i+3)
	}
	s.LazyPoll(2, 16, ibv.WRSend)
	s.Post(2, s.WRs(2, 1, ibv.WRSend, 0, 1, 32, 1), ibv.ENOMEM, 0)
	a := analyzer.New(withBF)
	a.IngestAll(s.Events)
	snap := a.Snapshot()
	overflow := 1
	if snap.QPs[overflow].QPNum != 2 || len(snap.Diagnoses) == 0 {
		t.Fatalf("QP 2 is not second or not diagnosed: %+v", snap.QPs)
	}
	if got := Featured(&snap, 4); len(got) != 2 || got[0] != overflow {
		t.Fatalf("featured %v, want the diagnosed QP %d first, then the other", got, overflow)
	}
	if got := Featured(&snap, 1); len(got) != 1 || got[0] != overflow {
		t.Fatalf("the first featured %v, want %d", got, overflow)
	}

	page := func(adv *Advice) parsedPage {
		var b bytes.Buffer
		if err := WriteHTML(&b, Page{Title: "t", Snap: snap, Advice: adv}); err != nil {
			t.Fatal(err)
		}
		p := checkPage(t, snap, b.Bytes())
		if strings.Contains(b.String(), `id="advice"`) != (adv != nil) {
			t.Fatalf("advice section on the page: %v, want %v", adv == nil, adv != nil)
		}
		return p
	}
	qpText := "QP 0x2 (pid 1, RC): 17 WRs recorded\n  #1 inline <= 32 B & signal 1/16 <ok>:\n"
	p := page(&Advice{Note: "Advised on 1 of 2 QPs.", QPs: []AdviceQP{{PID: streamtest.PID, QPNum: 2, Text: qpText}}, Rest: "model: simulated HCA"})
	for _, want := range []string{p.data.QPs[overflow].Label + "\n" + qpText, "model: simulated HCA", "Advised on 1 of 2 QPs."} {
		if !strings.Contains(p.Text, want) {
			t.Errorf("the page's text lacks %q", want)
		}
	}
	p = page(&Advice{Absent: "the recording has no per-WR detail"})
	if !strings.Contains(p.Text, "No advice: the recording has no per-WR detail") || strings.Contains(p.Text, "model:") {
		t.Error("the page does not say why there is no advice, or says more")
	}
	page(nil)
}
