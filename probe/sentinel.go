package probe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/probe/errsite"
	"github.com/sqscope/sqscope/trace"
)

// The sentinel mode (ModeSentinel): a healthy application takes no trap.
// Where events mode places its data-path probes, the sentinel places
// none; for post_send and wr_complete it asks probe/errsite where the
// provider's function fails and places the error_site program there
// (bpf/sentinel.bpf.h), one uprobe per site, whose cookie says where the
// QP and the WR are. A process's first failure opens an escalation
// window: the events mode's data-path probes, for Options.Escalate, then
// removed (the error-site probes stay).

// sentinel is what the sentinel mode keeps; its own lock, since learning
// runs on the reader and in the scans of running processes.
type sentinel struct {
	mu       sync.Mutex
	analyses map[siteKey]*siteAnalysis
	sites    []siteInfo                 // by the cookie's site index
	deferred map[uint32][]deferredProbe // per process: the data-path probes a window places
	windows  map[uint32]*window         // per process: the open escalation window
	// failed: processes whose failure opened a window (each is escalated
	// again only by a failure after its window closed)
	failed map[uint32]int
}

func newSentinel() sentinel {
	return sentinel{analyses: map[siteKey]*siteAnalysis{}, deferred: map[uint32][]deferredProbe{},
		windows: map[uint32]*window{}, failed: map[uint32]int{}}
}

// siteKey is one function of one file, as the analysis takes it.
type siteKey struct {
	file fileID
	off  uint64
	role errsite.Role
}

// siteAnalysis is errsite's report on one function, kept for every
// process that maps the file.
type siteAnalysis struct {
	report *errsite.Report
	err    error
	took   time.Duration
}

// siteInfo is what user space knows of a site a cookie names.
type siteInfo struct {
	fn     string // post_send, wr_complete
	offset uint64
	causes string
}

// deferredProbe is a data-path function the sentinel left unprobed.
type deferredProbe struct {
	r              role
	path, openPath string
	off            uint64
	how            string
}

// window is a process's escalation or sample window: the probes it
// placed and until when.
type window struct {
	sample        bool // a sample window (sample.go), until a failure escalates it
	until         time.Time
	entries, rets []link.Link
	keys          []attachKey
	fns           []deferredProbe
}

// sentinelRoles are the control-path functions the ops table reveals:
// the sentinel probes them as events mode does (they are rare calls).
var sentinelControl = map[string]bool{"create_qp_ex": true, "create_cq_ex": true, "modify_cq": true}

// sentinelDefers reports whether the sentinel leaves r unprobed while
// the target is healthy.
func (t *Tracer) sentinelDefers(r role) bool {
	return t.opts.Mode == ModeSentinel && r.probed() && !sentinelControl[r.name]
}

// errsiteRole is the analysis role of a function sqscope probes, if it
// has one.
func errsiteRole(name string) (errsite.Role, bool) {
	switch name {
	case "post_send":
		return errsite.PostSend, true
	case "wr_complete":
		return errsite.WRComplete, true
	}
	return 0, false
}

// deferDataPath is the sentinel's placement of a data-path function: it
// notes the function for the escalation windows of pid and places the
// error-site probes of post_send and wr_complete. It returns how many
// probes it placed.
func (t *Tracer) deferDataPath(pid uint32, r role, path, openPath string, off uint64, how string) int {
	d := deferredProbe{r: r, path: path, openPath: openPath, off: off, how: how}
	s := &t.sentinel
	s.mu.Lock()
	s.deferred[pid] = append(s.deferred[pid], d)
	s.mu.Unlock()
	er, ok := errsiteRole(r.name)
	if !ok {
		return 0
	}
	an, err := t.analyse(openPath, off, er)
	if err == nil {
		err = an.err
	}
	if err != nil {
		t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid}, Func: r.name, Path: path,
			Offset: off, How: trace.HowErrorSite, Err: fmt.Sprintf("no error site: %v; its failures are not seen", err)})
		return 0
	}
	if len(an.report.Sites) == 0 {
		t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid}, Func: r.name, Path: path,
			Offset: off, How: trace.HowErrorSite, Err: fmt.Sprintf("no error site found in the function (analysed in %v); its failures are not seen", an.took.Round(time.Millisecond))})
		return 0
	}
	placed := 0
	for _, site := range an.report.Sites {
		idx := s.site(siteInfo{fn: r.name, offset: site.Offset, causes: causeNames(site.Causes)})
		cookie, err := siteCookie(idx, site, er)
		if err != nil {
			t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid}, Func: r.name, Path: path,
				Offset: site.Offset, How: trace.HowErrorSite, Err: fmt.Sprintf("not traced: the %s site: %v", site.ErrnoName(), err)})
			continue
		}
		sr := role{name: r.name, fn: r.fn, entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.ErrorSite }}
		if a := t.attach(pid, sr, cookie, path, openPath, site.Offset, trace.HowErrorSite); a.Err == "" && a.Func != "" {
			placed++
		}
	}
	return placed
}

// analyse runs errsite on a function once per file and offset.
func (t *Tracer) analyse(openPath string, off uint64, r errsite.Role) (*siteAnalysis, error) {
	id, err := fileIDOf(openPath)
	if err != nil {
		return nil, err
	}
	k := siteKey{id, off, r}
	s := &t.sentinel
	s.mu.Lock()
	an := s.analyses[k]
	s.mu.Unlock()
	if an != nil {
		return an, nil
	}
	start := time.Now()
	rep, err := errsite.Analyze(openPath, errsite.Func{Start: off, Role: r})
	an = &siteAnalysis{report: rep, err: err, took: time.Since(start)}
	s.mu.Lock()
	s.analyses[k] = an
	s.mu.Unlock()
	return an, nil
}

// site returns the index of a site in the table the cookies name.
func (s *sentinel) site(si siteInfo) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.sites, si); i >= 0 {
		return i
	}
	s.sites = append(s.sites, si)
	return len(s.sites) - 1
}

// siteOf is the site a cookie names.
func (s *sentinel) siteOf(cookie uint64) (siteInfo, bool) {
	i := int(cookie>>bpf.SiteIndexShift) & (1<<bpf.SiteIndexBits - 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.sites) {
		return siteInfo{}, false
	}
	return s.sites[i], true
}

func causeNames(cs []errsite.Cause) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.String()
	}
	return strings.Join(names, ",")
}

// siteCookie encodes a site's locations (events.h, SQ_SITE_*): the QP
// in loc A, the WR (post_send) or the errno read at run time
// (wr_complete) in loc B.
func siteCookie(idx int, s errsite.Site, r errsite.Role) (uint64, error) {
	if idx >= 1<<bpf.SiteIndexBits {
		return 0, fmt.Errorf("more than %d error sites", 1<<bpf.SiteIndexBits)
	}
	if s.QP.Kind == errsite.Unknown {
		return 0, errors.New("where the QP is there is not known")
	}
	qp, err := locBits(s.QP, true)
	if err != nil {
		return 0, fmt.Errorf("the QP: %w", err)
	}
	var b uint64
	errno := uint64(s.Errno)
	switch {
	case errno > 0xff:
		return 0, fmt.Errorf("errno %d does not fit the cookie", s.Errno)
	case errno == 0:
		if s.ErrnoAt.Kind == errsite.Unknown || s.ErrnoAt.Adjust != 0 {
			return 0, errors.New("the errno is read at run time from where the analysis does not know")
		}
		if b, err = locBits(s.ErrnoAt, false); err != nil {
			return 0, fmt.Errorf("the errno: %w", err)
		}
	case r == errsite.PostSend && s.WR.Kind != errsite.Unknown && s.WR.Adjust == 0:
		if b, err = locBits(s.WR, false); err != nil {
			b = 0 // the WR is not read: the record says the QP and the errno
		}
	}
	return errno<<bpf.SiteErrnoShift | uint64(idx)<<bpf.SiteIndexShift |
		qp<<bpf.SiteLocAShift | b<<bpf.SiteLocBShift, nil
}

// locBits encodes a location: kind 2 bits, register 4, stack offset in
// 8-byte units, and (withAdjust) the adjust.
func locBits(l errsite.Loc, withAdjust bool) (uint64, error) {
	var kind, reg, off uint64
	switch l.Kind {
	case errsite.InReg:
		kind, reg = bpf.SiteLocReg, uint64(l.Reg)&15
	case errsite.InStack:
		lim := int64(1) << (bpf.SiteLocOffBits - 1)
		if l.Off%8 != 0 || l.Off/8 < -lim || l.Off/8 >= lim {
			return 0, fmt.Errorf("stack slot %#x out of the cookie's range", l.Off)
		}
		kind, off = bpf.SiteLocStack, uint64(l.Off/8)&(1<<bpf.SiteLocOffBits-1)
	default:
		return 0, nil
	}
	v := kind | reg<<2 | off<<6
	if !withAdjust {
		if l.Adjust != 0 {
			return 0, fmt.Errorf("a pointer moved by %#x", l.Adjust)
		}
		return v, nil
	}
	lim := int64(1) << (bpf.SiteAdjBits - 1)
	if l.Adjust < -lim || l.Adjust >= lim {
		return 0, fmt.Errorf("a pointer moved by %#x, out of the cookie's range", l.Adjust)
	}
	return v | (uint64(l.Adjust)&(1<<bpf.SiteAdjBits-1))<<(6+bpf.SiteLocOffBits), nil
}

// failEvent decodes a failure record and opens its process's escalation
// window, once per failure outside a window.
func (t *Tracer) failEvent(r *bpf.VerbsSqFailRec) *trace.PostFail {
	e := &trace.PostFail{Header: header(&r.Hdr), QP: r.Qp, QPNum: r.QpNum, Errno: r.Err, State: r.State, Traced: r.Traced != 0}
	if si, ok := t.sentinel.siteOf(r.Cookie); ok {
		e.Func, e.Site, e.SiteCauses = si.fn, si.offset, si.causes
	}
	if r.HasWr != 0 {
		e.HasWR = true
		e.WR = trace.WR{ID: r.WrId, Opcode: r.Opcode, Flags: r.SendFlags, NumSGE: r.NumSge, Bytes: r.Bytes, SGEsNotSummed: r.SgeOver}
	}
	t.escalate(r.Hdr.Pid)
	return e
}

// escalate opens pid's escalation window: the data-path probes events
// mode would have placed, until Options.Escalate from now. A sample
// window open on pid becomes the escalation window, its probes kept.
func (t *Tracer) escalate(pid uint32) {
	s := &t.sentinel
	s.mu.Lock()
	if w := s.windows[pid]; w != nil {
		escalated := w.sample
		if escalated {
			w.sample, w.until = false, time.Now().Add(t.opts.Escalate)
			s.failed[pid]++
		}
		s.mu.Unlock()
		if escalated {
			t.record(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid}, Func: "post_send",
				How: trace.HowEscalation, Err: trace.EscalationInSample})
		}
		return
	}
	s.mu.Unlock()
	t.openWindow(pid, false)
}

// Escalate opens an escalation window on pid, or on every process the
// sentinel traces when pid is 0 (a flight recorder's trigger): their
// data path is traced in full for Options.Escalate. Nothing in the other
// modes. It places probes: not for a caller that must not wait.
func (t *Tracer) Escalate(pid uint32) {
	if t.opts.Mode != ModeSentinel {
		return
	}
	pids := []uint32{pid}
	if pid == 0 {
		pids = t.sampledPIDs()
	}
	for _, p := range pids {
		t.escalate(p)
	}
}

// openWindow places pid's deferred data-path probes for an escalation
// (until Options.Escalate from now) or a sample window (closed by the
// sampler); false when pid already has a window open.
func (t *Tracer) openWindow(pid uint32, sample bool) bool {
	s := &t.sentinel
	s.mu.Lock()
	if s.windows[pid] != nil {
		s.mu.Unlock()
		return false
	}
	how, d := trace.HowEscalation, t.opts.Escalate
	if sample {
		how, d = trace.HowSample, t.opts.SampleFor
	}
	w := &window{sample: sample, until: time.Now().Add(d), fns: pollsFirst(s.deferred[pid])}
	s.windows[pid] = w
	if !sample {
		s.failed[pid]++
	}
	s.mu.Unlock()
	// the analyzer stops trusting the process's QPs from here: what the
	// probes see while they are placed is the window's edge
	t.mu.Lock()
	t.markWindow(pid, w, how, trace.WindowOpening)
	t.mu.Unlock()
	for _, d := range w.fns {
		a, links, key := t.attachPlaced(pid, d.r, d.r.cookie, d.path, d.openPath, d.off, how, "")
		if a.Err != "" || len(links) == 0 {
			continue
		}
		s.mu.Lock()
		w.keys = append(w.keys, key)
		if d.r.ret != nil { // placed first
			w.rets, links = append(w.rets, links[0]), links[1:]
		}
		w.entries = append(w.entries, links...)
		s.mu.Unlock()
	}
	return true
}

// closeWindows removes the probes of the windows past their time (and
// of every one when all is set), and says so.
func (t *Tracer) closeWindows(all bool) {
	t.closeWhere(func(w *window, now time.Time) bool { return all || (!w.sample && now.After(w.until)) })
}

// closeWhere removes the probes of the windows done says are over, and
// says so.
func (t *Tracer) closeWhere(done func(w *window, now time.Time) bool) {
	s := &t.sentinel
	now := time.Now()
	var over []*window
	var pids []uint32
	s.mu.Lock()
	for pid, w := range s.windows {
		if done(w, now) {
			over = append(over, w)
			pids = append(pids, pid)
			delete(s.windows, pid)
		}
	}
	s.mu.Unlock()
	// The analyzer stops trusting the windows' QPs from here: what is
	// seen while the probes go is the edge of the window, as after it.
	t.mu.Lock()
	for i, w := range over {
		how := trace.HowEscalation
		if w.sample {
			how = trace.HowSample
		}
		t.markWindow(pids[i], w, how, trace.WindowClosing)
	}
	var entries, rets []link.Link
	for _, w := range over {
		entries, rets = append(entries, w.entries...), append(rets, w.rets...)
		for _, k := range w.keys {
			delete(t.attached, k)
		}
	}
	t.links = slices.DeleteFunc(t.links, func(l link.Link) bool {
		return slices.Contains(entries, l) || slices.Contains(rets, l)
	})
	t.mu.Unlock()
	// Entry probes go first, so that a call entered meanwhile still finds
	// its return probe; each removal waits for an RCU grace period, so
	// the entries of every window go together, then the returns.
	closeAll(entries)
	closeAll(rets)
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, w := range over {
		how, ended := trace.HowEscalation, trace.EscalationEnded
		if w.sample {
			how, ended = trace.HowSample, trace.SampleEnded
		}
		for _, d := range w.fns { // in their time order: after the removal
			t.recordLocked(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pids[i]},
				Func: d.r.name, Path: d.path, Offset: d.off, How: how, Err: ended})
		}
	}
}

// markWindow records a window's opening or closing, as post_send's (or
// wr_complete's) attachment, whose records the analyzer follows; t.mu is
// held.
func (t *Tracer) markWindow(pid uint32, w *window, how, mark string) {
	for _, d := range w.fns {
		if d.r.name == "post_send" || d.r.name == "wr_complete" {
			t.recordLocked(trace.Attach{Header: trace.Header{TimeNS: trace.MonotonicNS(), PID: pid},
				Func: d.r.name, Path: d.path, Offset: d.off, How: how, Err: mark})
			return
		}
	}
}

// pollsFirst orders a window's functions so that the completions of
// every post it sees are seen: the polls' probes are placed before the
// posts'.
func pollsFirst(fns []deferredProbe) []deferredProbe {
	fns = slices.Clone(fns)
	slices.SortStableFunc(fns, func(a, b deferredProbe) int { return postLast(a.r, b.r) })
	return fns
}

// closeAll closes links in parallel: each removal waits for an RCU grace
// period, which they then share.
func closeAll(ls []link.Link) {
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Close()
		}()
	}
	wg.Wait()
}
