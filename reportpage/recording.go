// Package reportpage builds the HTML report page (report.WriteHTML) from
// where sqscope has a run: a recording, read through twice (its snapshot,
// then each QP's occupancy over the run) with what sqscope advise says of
// the QPs the page features, or a live trace's session, whose analyzer
// kept each QP's latest occupancy. report --html, trace --html and
// record --html write it. See docs/design.md, The HTML report.
package reportpage

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sqscope/sqscope/advise"
	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/report"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/verbs/nicmodel"
)

// Recording is a recording read through the analyzer once: what report
// prints, and what the HTML page of report --html and record --html is
// built on.
type Recording struct {
	Path string
	Opts analyzer.Options
	Info session.RecordingInfo
	Snap analyzer.Snapshot
	Res  session.ReadResult
}

// Read reads the recording at path; bf gives the target's BlueFlame
// settings from its header. A truncated or damaged file is read up to
// where it stops (Res says where).
func Read(ctx context.Context, path string, bf func(trace.FileInfo) analyzer.BFConfig) (*Recording, error) {
	r, err := session.OpenRecording(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	fi := r.Info()
	opts := analyzer.Options{BF: bf(fi), Clock: fi.Anchor(), Mode: fi.ProbeMode}
	a := analyzer.New(opts)
	r.Reuse() // the analyzer keeps nothing of an event
	res, err := session.ReadBatches(ctx, r, a.IngestAll)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Recording{Path: path, Opts: opts, Info: session.Describe(path, r, &res), Snap: a.Snapshot(), Res: res}, nil
}

// Output is where a page goes: Commit puts it in place once complete,
// Replaces says it would replace an existing file (cli.Output).
type Output interface {
	io.Writer
	Commit() error
	Replaces() bool
}

// WritePage writes the recording's HTML page to out and commits it: the
// snapshot, each QP's occupancy over the run from a second pass
// (report.SeriesFrom), and what sqscope advise says of the QPs the page
// features, on the NIC model nic. The page of a damaged recording never
// replaces a file; name is out's, for the error that says so.
func (rc *Recording) WritePage(ctx context.Context, out Output, name string, nic nicmodel.Model) error {
	series, err := report.SeriesFrom(rc.Opts, &rc.Snap, func(fn func(trace.Event)) error { return session.ReadFile(ctx, rc.Path, fn) })
	if err != nil {
		return err
	}
	page := report.Page{Title: filepath.Base(rc.Path), Header: rc.Info.TextHeader(), Snap: rc.Snap, Series: series,
		Advice: adviceOf(ctx, rc.Path, advise.Model{NIC: nic, BF: rc.Opts.BF}, &rc.Snap)}
	if err := ctx.Err(); err != nil { // interrupted: no page, nothing replaced
		return err
	}
	if err := report.WriteHTML(out, page); err != nil {
		return err
	}
	if rc.Res.Corrupt != nil && out.Replaces() {
		return fmt.Errorf("%w; %s is left as it was", rc.Res.Err(rc.Path), name)
	}
	return out.Commit()
}

// A page advises on pageAdvised QPs at most, each of a stream of at most
// pageAdviseWRs WRs: advise replays a QP in about a second (ScreenWRs of
// each of some hundreds of candidates, then the best in full) and holds
// its stream, and the page of thousands of QPs or of a long recording is
// written in seconds all the same.
const (
	pageAdvised   = 4
	pageAdviseWRs = 1 << 20
)

// adviceOf is what sqscope advise says on the model m of the QPs the
// page of the recording at path features (report.Featured), in its own
// text; or why it cannot advise (advise's error: a counters-mode
// recording, QPs on a provider its model does not apply to, no create
// seen).
func adviceOf(ctx context.Context, path string, m advise.Model, snap *analyzer.Snapshot) *report.Advice {
	type key struct{ pid, qpNum uint32 }
	keep, all := map[key]bool{}, map[key]bool{}
	for _, i := range report.Featured(snap, pageAdvised) {
		keep[key{snap.QPs[i].PID, snap.QPs[i].QPNum}] = true
	}
	for i := range snap.QPs {
		all[key{snap.QPs[i].PID, snap.QPs[i].QPNum}] = true
	}
	r, err := session.OpenRecording(path)
	if err != nil {
		return &report.Advice{Absent: err.Error()}
	}
	defer r.Close()
	sel := advise.Select{Keep: func(pid, qpNum uint32) bool { return keep[key{pid, qpNum}] }, MaxWRs: pageAdviseWRs}
	streams, not, _, err := advise.LoadSome(ctx, r, m.BF, sel)
	if err != nil {
		return &report.Advice{Absent: err.Error()}
	}
	adv := &report.Advice{}
	if len(all) > len(keep) {
		adv.Note = fmt.Sprintf("Here the %d QP(s) plotted first of the %d; sqscope advise on the recording advises on every one, and --nic sets the NIC model.", len(keep), len(all))
	}
	ads, err := advise.Advise(ctx, streams, m)
	if err != nil {
		return &report.Advice{Absent: err.Error()}
	}
	for i := range ads { // a strings.Builder takes every write
		var b strings.Builder
		advise.WriteQPText(&b, &ads[i])
		adv.QPs = append(adv.QPs, report.AdviceQP{PID: ads[i].PID, QPNum: ads[i].QPNum, Text: b.String()})
	}
	var b strings.Builder
	advise.WriteRestText(&b, m, not)
	adv.Rest = b.String()
	return adv
}

// WriteText writes the recording's header line and its report as text
// (report.Text), as report prints it.
func (rc *Recording) WriteText(w io.Writer, t report.Text) error {
	if _, err := fmt.Fprintln(w, rc.Info.TextHeader()); err != nil {
		return err
	}
	return t.Write(w, rc.Snap)
}

// Document is the recording's report as one JSON object: what was read
// of the file, and the snapshot.
func (rc *Recording) Document() any {
	return struct {
		Recording session.RecordingInfo `json:"recording"`
		analyzer.Snapshot
	}{rc.Info, rc.Snap}
}
