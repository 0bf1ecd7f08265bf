// Package diff compares two recordings, before and after a change: their
// QPs matched by process name and order (or by QP number), and per QP and
// in total what the reports give of each (WRs per doorbell, inline and
// signaled shares, PCIe bytes per WR, the peak against the depth,
// ENOMEMs), the diagnoses that appeared or went, and the settings advise
// infers that changed (sqscope diff). Every figure is the analyzer's of
// one recording or a ratio of two of its counts; a figure a recording's
// mode or provider model does not give is absent (null in JSON, with why),
// not 0.
package diff

import (
	"context"
	"fmt"
	"slices"

	"github.com/sqscope/sqscope/advise"
	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/session"
	"github.com/sqscope/sqscope/trace"
)

// Side is one recording as diff reads it: the report's snapshot, and the
// settings advise infers of each QP it can replay.
type Side struct {
	File     string
	Snap     analyzer.Snapshot
	settings map[qpKey]advise.Settings
	// why the settings of a QP were not inferred (by QP, or for all)
	notInferred map[qpKey]string
	noSettings  string
	Result      session.ReadResult
	Info        session.RecordingInfo // what was read of the file
}

type qpKey struct{ pid, qpNum uint32 }

// Load reads the recording at path: its snapshot with the BlueFlame
// settings bf gives for it, then (a second pass) the settings advise
// infers.
func Load(ctx context.Context, path string, bf func(trace.FileInfo) analyzer.BFConfig) (*Side, error) {
	r, err := session.OpenRecording(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cfg := bf(r.Info())
	a := analyzer.New(analyzer.Options{BF: cfg, Clock: r.Info().Anchor(), Mode: r.Info().ProbeMode})
	res, err := session.ReadAll(ctx, r, a.Ingest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := res.Err(path); err != nil {
		return nil, err
	}
	s := &Side{File: path, Snap: a.Snapshot(), Result: res, Info: session.Describe(path, r, &res), settings: map[qpKey]advise.Settings{}, notInferred: map[qpKey]string{}}
	r2, err := session.OpenRecording(path)
	if err != nil {
		return nil, err
	}
	defer r2.Close()
	streams, not, _, err := advise.Load(ctx, r2, cfg)
	if err != nil {
		s.noSettings = err.Error()
	}
	for _, st := range streams {
		s.settings[qpKey{st.PID, st.QPNum}] = st.Current
	}
	for _, n := range not {
		s.notInferred[qpKey{n.PID, n.QPNum}] = n.Why
	}
	return s, nil
}

// Match is how QPs of the two recordings are paired.
type Match string

const (
	// ByProcess pairs the n-th QP of a process name with the n-th of
	// that name in the other recording (pids differ from run to run).
	ByProcess Match = "process"
	// ByQPN pairs QPs of the same number.
	ByQPN Match = "qpn"
)

// Figures are what diff compares of a QP, or of a recording in total.
type Figures struct {
	WRs            uint64   `json:"wrs"`
	WRsPerDoorbell *float64 `json:"wrs_per_doorbell"`
	InlinePct      *float64 `json:"inline_pct"`
	SignaledPct    *float64 `json:"signaled_pct"`
	PCIeBytesPerWR *float64 `json:"pcie_bytes_per_wr"`
	// Peak is the most WRs outstanding (in total: of the QP fullest
	// against its depth), Depth its max_send_wr; nil when not measured
	// or not known.
	Peak      *uint64  `json:"peak_outstanding"`
	Depth     *uint64  `json:"depth"`
	ENOMEM    uint64   `json:"enomem"`
	Diagnoses []string `json:"diagnoses"` // kinds, each once, sorted
	// Absent says why each figure not given is absent, by its JSON name.
	Absent map[string]string `json:"absent,omitempty"`
}

// QPSide is one QP of one recording.
type QPSide struct {
	PID   uint32 `json:"pid"`
	Comm  string `json:"comm,omitempty"`
	QPNum uint32 `json:"qp_num"`
	Figures
	// Settings are those advise infers; SettingsNot says why there are
	// none.
	Settings    *advise.Settings `json:"settings"`
	SettingsNot string           `json:"settings_not_inferred,omitempty"`
}

// Change is a setting that changed.
type Change struct {
	Setting string `json:"setting"`
	Before  string `json:"before"`
	After   string `json:"after"`
}

// QP is a matched pair (or a QP of one recording only: the other side is
// nil).
type QP struct {
	Match    string   `json:"match"`
	Before   *QPSide  `json:"before"`
	After    *QPSide  `json:"after"`
	Appeared []string `json:"diagnoses_appeared"`
	Went     []string `json:"diagnoses_went"`
	Changed  []Change `json:"settings_changed"`
}

// Report is the comparison.
type Report struct {
	Before string `json:"before"`
	After  string `json:"after"`
	Match  Match  `json:"match"`
	QPs    []QP   `json:"qps"`
	Total  struct {
		Before   Figures  `json:"before"`
		After    Figures  `json:"after"`
		Appeared []string `json:"diagnoses_appeared"`
		Went     []string `json:"diagnoses_went"`
	} `json:"total"`
}

// Compare matches the QPs of before and after by m and compares them.
func Compare(before, after *Side, m Match) *Report {
	rep := &Report{Before: before.File, After: after.File, Match: m, QPs: []QP{}}
	bk, ak := keys(before, m), keys(after, m)
	used := map[string]bool{}
	add := func(k string) {
		if used[k] {
			return
		}
		used[k] = true
		q := QP{Match: k, Before: bk[k], After: ak[k]}
		var bd, ad []string
		if q.Before != nil {
			bd = q.Before.Diagnoses
		}
		if q.After != nil {
			ad = q.After.Diagnoses
		}
		q.Appeared, q.Went = minus(ad, bd), minus(bd, ad)
		q.Changed = changes(q.Before, q.After)
		rep.QPs = append(rep.QPs, q)
	}
	for _, k := range matchKeys(before, m) {
		add(k)
	}
	for _, k := range matchKeys(after, m) {
		add(k)
	}
	rep.Total.Before, rep.Total.After = total(before), total(after)
	rep.Total.Appeared = minus(rep.Total.After.Diagnoses, rep.Total.Before.Diagnoses)
	rep.Total.Went = minus(rep.Total.Before.Diagnoses, rep.Total.After.Diagnoses)
	return rep
}

// matchKeys name each QP of s (in the snapshot's order) for matching.
func matchKeys(s *Side, m Match) []string {
	out := make([]string, len(s.Snap.QPs))
	seen := map[string]int{}
	for i := range s.Snap.QPs {
		q := &s.Snap.QPs[i]
		if m == ByQPN {
			out[i] = fmt.Sprintf("QP %#x", q.QPNum)
			if n := seen[out[i]]; n > 0 { // a number used again (another process, another generation)
				out[i] = fmt.Sprintf("QP %#x #%d", q.QPNum, n+1)
			}
			seen[fmt.Sprintf("QP %#x", q.QPNum)]++
			continue
		}
		name := q.Comm
		if name == "" {
			name = "(process name unknown)"
		}
		seen[name]++
		out[i] = fmt.Sprintf("%s #%d", name, seen[name])
	}
	return out
}

func keys(s *Side, m Match) map[string]*QPSide {
	out := map[string]*QPSide{}
	for i, k := range matchKeys(s, m) {
		out[k] = side(s, &s.Snap.QPs[i])
	}
	return out
}

func side(s *Side, q *analyzer.QP) *QPSide {
	qs := &QPSide{PID: q.PID, Comm: q.Comm, QPNum: q.QPNum, Figures: figures([]*analyzer.QP{q}, s.Snap.Diagnoses)}
	k := qpKey{q.PID, q.QPNum}
	if st, ok := s.settings[k]; ok {
		qs.Settings = &st
	} else if why := s.notInferred[k]; why != "" {
		qs.SettingsNot = why
	} else if s.noSettings != "" {
		qs.SettingsNot = s.noSettings
	} else {
		qs.SettingsNot = "it posted no WR"
	}
	return qs
}

func total(s *Side) Figures {
	qs := make([]*analyzer.QP, len(s.Snap.QPs))
	for i := range s.Snap.QPs {
		qs[i] = &s.Snap.QPs[i]
	}
	return figures(qs, s.Snap.Diagnoses)
}

// figures are the Figures of the QPs together: counts summed, each ratio
// over the QPs whose mode and model give its numerator.
func figures(qs []*analyzer.QP, diags []analyzer.Diagnosis) Figures {
	var f Figures
	var inl, sig, dbWRs, db, pWRs, pBytes uint64
	var haveDB, haveP bool
	// why the first QP that does not give a figure leaves it out
	noDB, noP, noPeak := "no QP in the recording", "no QP in the recording", "no QP in the recording"
	var fullest float64 = -1
	for i, q := range qs {
		f.WRs += q.WRs
		f.ENOMEM += q.ENOMEM
		inl += q.Inline
		sig += q.Signaled
		if q.Reported("doorbells") {
			haveDB, dbWRs, db = true, dbWRs+q.WRs, db+q.Doorbells
		} else if i == 0 {
			noDB = whyNot(q, "doorbells")
		}
		if q.Reported("actual") {
			haveP, pWRs, pBytes = true, pWRs+q.WRs, pBytes+q.PCIe.Actual.Bytes
		} else if i == 0 {
			noP = whyNot(q, "actual")
		}
		if q.Reported("peak_outstanding") && !q.CompletionsNotTraced {
			share := float64(q.PeakOutstanding)
			if q.Occupancy.Depth > 0 {
				share /= float64(q.Occupancy.Depth)
			}
			if share > fullest {
				fullest = share
				p := q.PeakOutstanding
				f.Peak, f.Depth = &p, nil
				if q.Occupancy.Depth > 0 {
					d := q.Occupancy.Depth
					f.Depth = &d
				}
			}
		} else if i == 0 {
			noPeak = "no poll function was traced, so no completion was seen: outstanding WRs unknown"
			if !q.CompletionsNotTraced {
				noPeak = whyNot(q, "peak_outstanding")
			}
		}
		for _, g := range diags {
			if g.PID == q.PID && g.QPNum == q.QPNum && !slices.Contains(f.Diagnoses, g.Kind) {
				f.Diagnoses = append(f.Diagnoses, g.Kind)
			}
		}
	}
	slices.Sort(f.Diagnoses)
	if f.Diagnoses == nil {
		f.Diagnoses = []string{}
	}
	f.InlinePct, f.SignaledPct = pctOf(inl, f.WRs), pctOf(sig, f.WRs)
	if haveDB {
		f.WRsPerDoorbell, noDB = ratio(dbWRs, db), "no doorbell was rung"
	}
	if haveP {
		f.PCIeBytesPerWR, noP = ratio(pBytes, pWRs), "no WR was posted"
	}
	noDepth := noPeak
	if f.Peak != nil {
		noDepth = "max_send_wr unknown: the QP's create was not traced"
	}
	f.absent("wrs_per_doorbell", f.WRsPerDoorbell, noDB)
	f.absent("inline_pct", f.InlinePct, "no WR was posted")
	f.absent("signaled_pct", f.SignaledPct, "no WR was posted")
	f.absent("pcie_bytes_per_wr", f.PCIeBytesPerWR, noP)
	if f.Peak == nil {
		f.absent("peak_outstanding", nil, noPeak)
	}
	if f.Depth == nil {
		f.absent("depth", nil, noDepth)
	}
	return f
}

// absent notes why the figure key is not given, when v is nil.
func (f *Figures) absent(key string, v *float64, why string) {
	if v != nil {
		return
	}
	if f.Absent == nil {
		f.Absent = map[string]string{}
	}
	f.Absent[key] = why
}

// whyNot says why a QP's report leaves out the figure key: its mode does
// not measure it, or its provider's model does not give it.
func whyNot(q *analyzer.QP, key string) string {
	switch {
	case !q.Measured(key):
		return "not measured in counters mode (needs --mode events)"
	case q.Model == "":
		return fmt.Sprintf("no HCA model applies to provider %s", q.Provider)
	}
	return fmt.Sprintf("the %s does not give it", q.Model)
}

func ratio(a, b uint64) *float64 {
	if b == 0 {
		return nil
	}
	v := float64(a) / float64(b)
	return &v
}

func pctOf(a, b uint64) *float64 {
	v := ratio(a, b)
	if v != nil {
		*v *= 100
	}
	return v
}

// minus is what a holds that b does not.
func minus(a, b []string) []string {
	out := []string{}
	for _, k := range a {
		if !slices.Contains(b, k) {
			out = append(out, k)
		}
	}
	return out
}

// changes are the inferred settings that differ between the sides.
func changes(b, a *QPSide) []Change {
	out := []Change{}
	if b == nil || a == nil || b.Settings == nil || a.Settings == nil {
		return out
	}
	bs, as := b.Settings, a.Settings
	for _, c := range []struct {
		name   string
		bv, av uint32
		unit   func(uint32) string
	}{
		{"inline threshold", bs.InlineUpTo, as.InlineUpTo, func(v uint32) string {
			if v == 0 {
				return "none inline"
			}
			return fmt.Sprintf("up to %d B", v)
		}},
		{"signal interval", bs.SignalEvery, as.SignalEvery, func(v uint32) string {
			if v == 0 {
				return "none signaled"
			}
			return fmt.Sprintf("every %d WRs", v)
		}},
		{"post list", bs.PostList, as.PostList, func(v uint32) string { return fmt.Sprintf("%d WRs per call", v) }},
		{"depth", bs.MaxSendWR, as.MaxSendWR, func(v uint32) string { return fmt.Sprintf("max_send_wr %d", v) }},
	} {
		if c.bv != c.av {
			out = append(out, Change{c.name, c.unit(c.bv), c.unit(c.av)})
		}
	}
	return out
}
