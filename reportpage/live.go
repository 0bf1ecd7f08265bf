package reportpage

import (
	"io"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/session"
)

// Live is the page of a live trace: its session's last snapshot, each
// QP's occupancy the history the session's analyzer kept of it, joined
// to the page's buckets, and the failed posts counted as they came
// (report.NewLiveSeries).
type Live struct {
	s      *session.Session
	series *report.Series
}

// NewLive adds to s, before Run, what the page needs of its events.
func NewLive(s *session.Session) *Live {
	l := &Live{s: s, series: report.NewLiveSeries(s.Analyzer())}
	s.AddSink(l.series.Event)
	return l
}

// Write writes the page of the trace, which has ended, to w; noAdvice
// says why it holds no advice. It returns the snapshot it shows.
func (l *Live) Write(w io.Writer, noAdvice string) (analyzer.Snapshot, error) {
	snap := l.s.Analyzer().Snapshot()
	l.series.TakeLive(snap)
	info := l.s.Describe()
	return snap, report.WriteHTML(w, report.Page{Title: l.s.Target(), Header: info.TextHeader(), Snap: snap, Series: l.series,
		Advice: &report.Advice{Absent: noAdvice}})
}
