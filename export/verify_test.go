package export

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sqscope/sqscope/analyzer"
	pb "github.com/sqscope/sqscope/export/perfetto"
	"github.com/sqscope/sqscope/trace"
)

// recordings are the real recordings of the repository: one per fault,
// and the format's golden files.
func recordings(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, glob := range []string{"../cmd/sqscope/testdata/faults/*.sqscope", "../trace/testdata/*.sqscope"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 5 {
		t.Fatalf("found %d recordings", len(out))
	}
	return out
}

func readEvents(t *testing.T, path string) ([]trace.Event, trace.FileInfo) {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var evs []trace.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs, r.Info()
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, ev)
	}
}

func exportEvents(t *testing.T, f Format, o Options, evs []trace.Event) ([]byte, Stats, error) {
	t.Helper()
	var out bytes.Buffer
	x, err := New(&out, f, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		x.Event(ev)
	}
	err = x.Close()
	return out.Bytes(), x.Stats(), err
}

// sample is one counter value as the trace holds it.
type sample struct {
	track string // "pid 7 QP 0x11 outstanding WRs"
	ts    uint64
	v     float64
}

// decoded is what a Perfetto export says, checked on the way.
type decoded struct {
	packets  int
	samples  []sample
	events   []string // "ts track type name" of every slice end and instant, for comparisons
	trackPID map[string]uint32
}

var qpTrack = regexp.MustCompile(`^QP 0x([0-9a-f]+) (.*)$`)

// decodePerfetto decodes b with the generated types and checks that the
// first packet clears the sequence, every track and interned id is
// defined before it is used, and slices are balanced on each track.
func decodePerfetto(t *testing.T, b []byte) decoded {
	t.Helper()
	var tr pb.Trace
	if err := proto.Unmarshal(b, &tr); err != nil {
		t.Fatalf("Go's protobuf decoder: %v", err)
	}
	d := decoded{packets: len(tr.Packet), trackPID: map[string]uint32{}}
	tracks := map[uint64]string{}
	pids := map[uint64]uint32{}
	interned := map[string]map[uint64]string{"name": {}, "cat": {}, "ann": {}, "val": {}}
	depth := map[uint64]int{}
	for i, p := range tr.Packet {
		if p.GetTrustedPacketSequenceId() != seqID {
			t.Fatalf("packet %d: sequence %d", i, p.GetTrustedPacketSequenceId())
		}
		if i == 0 && p.GetSequenceFlags()&seqCleared == 0 {
			t.Fatalf("the first packet does not clear the sequence's state")
		}
		if id := p.GetInternedData(); id != nil {
			for _, n := range id.EventNames {
				interned["name"][n.GetIid()] = n.GetName()
			}
			for _, n := range id.EventCategories {
				interned["cat"][n.GetIid()] = n.GetName()
			}
			for _, n := range id.DebugAnnotationNames {
				interned["ann"][n.GetIid()] = n.GetName()
			}
			for _, n := range id.DebugAnnotationStringValues {
				interned["val"][n.GetIid()] = string(n.GetStr())
			}
		}
		if td := p.GetTrackDescriptor(); td != nil {
			u := td.GetUuid()
			if _, dup := tracks[u]; dup {
				t.Fatalf("packet %d: track %d defined twice", i, u)
			}
			name := td.GetName()
			var pid uint32
			switch {
			case td.Process != nil:
				pid = uint32(td.Process.GetPid())
				name = fmt.Sprintf("pid %d", pid)
			case td.Thread != nil:
				pid = uint32(td.Thread.GetPid())
				name = fmt.Sprintf("pid %d tid %d", pid, td.Thread.GetTid())
			}
			if pu := td.GetParentUuid(); pu != 0 {
				if _, ok := tracks[pu]; !ok {
					t.Fatalf("packet %d: track %q has parent %d, not defined before it", i, name, pu)
				}
				if pid == 0 {
					pid = pids[pu]
					name = fmt.Sprintf("pid %d %s", pid, name)
				}
			}
			tracks[u], pids[u] = name, pid
			d.trackPID[name] = pid
			continue
		}
		te := p.GetTrackEvent()
		if te == nil {
			continue
		}
		if p.GetSequenceFlags()&seqNeeds == 0 {
			t.Fatalf("packet %d: a track event that does not say it needs the interned state", i)
		}
		track, ok := tracks[te.GetTrackUuid()]
		if !ok {
			t.Fatalf("packet %d: event on track %d, not defined before it", i, te.GetTrackUuid())
		}
		lookup := func(table string, iid uint64) string {
			s, ok := interned[table][iid]
			if !ok {
				t.Fatalf("packet %d: %s id %d not interned before it", i, table, iid)
			}
			return s
		}
		name := ""
		if te.GetNameIid() != 0 {
			name = lookup("name", te.GetNameIid())
		}
		for _, c := range te.CategoryIids {
			lookup("cat", c)
		}
		var args []string
		for _, a := range te.DebugAnnotations {
			var v string
			switch x := a.GetValue().(type) {
			case *pb.DebugAnnotation_UintValue:
				v = strconv.FormatUint(x.UintValue, 10)
			case *pb.DebugAnnotation_IntValue:
				v = strconv.FormatInt(x.IntValue, 10)
			case *pb.DebugAnnotation_PointerValue:
				v = "0x" + strconv.FormatUint(x.PointerValue, 16)
			case *pb.DebugAnnotation_BoolValue:
				v = strconv.FormatBool(x.BoolValue)
			case *pb.DebugAnnotation_StringValue:
				v = x.StringValue
			case *pb.DebugAnnotation_StringValueIid:
				v = lookup("val", x.StringValueIid)
			default:
				t.Fatalf("packet %d: annotation value %T", i, x)
			}
			args = append(args, lookup("ann", a.GetNameIid())+"="+v)
		}
		ts := p.GetTimestamp()
		switch te.GetType() {
		case pb.TrackEvent_TYPE_COUNTER:
			v := float64(te.GetCounterValue())
			if _, ok := te.GetCounterValueField().(*pb.TrackEvent_DoubleCounterValue); ok {
				v = te.GetDoubleCounterValue()
			}
			d.samples = append(d.samples, sample{track, ts, v})
		case pb.TrackEvent_TYPE_SLICE_BEGIN:
			depth[te.GetTrackUuid()]++
			d.events = append(d.events, fmt.Sprintf("%d %s B %s %s", ts, track, name, strings.Join(args, " ")))
		case pb.TrackEvent_TYPE_SLICE_END:
			if depth[te.GetTrackUuid()]--; depth[te.GetTrackUuid()] < 0 {
				t.Fatalf("packet %d: a slice ends on %q where none began", i, track)
			}
			d.events = append(d.events, fmt.Sprintf("%d %s E", ts, track))
		case pb.TrackEvent_TYPE_INSTANT:
			d.events = append(d.events, fmt.Sprintf("%d %s I %s %s", ts, track, name, strings.Join(args, " ")))
		default:
			t.Fatalf("packet %d: event type %v", i, te.GetType())
		}
		if len(te.ExtraCounterTrackUuids) != len(te.ExtraCounterValues) {
			t.Fatalf("packet %d: %d extra counter tracks, %d values", i, len(te.ExtraCounterTrackUuids), len(te.ExtraCounterValues))
		}
		for j, u := range te.ExtraCounterTrackUuids {
			ct, ok := tracks[u]
			if !ok {
				t.Fatalf("packet %d: extra counter on track %d, not defined before it", i, u)
			}
			d.samples = append(d.samples, sample{ct, ts, float64(te.ExtraCounterValues[j])})
		}
	}
	for u, n := range depth {
		if n != 0 {
			t.Errorf("track %q: %d slices never end", tracks[u], n)
		}
	}
	return d
}

// protocDecode decodes b with protoc and the vendored schema, and returns
// how many packets it found.
func protocDecode(t *testing.T, b []byte) int {
	t.Helper()
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" || os.Getenv("CI") != "" {
			t.Fatal("protoc not found: `make deps` installs Debian's protobuf-compiler")
		}
		t.Skip("protoc not found (Debian's protobuf-compiler; `make deps` installs it)")
	}
	cmd := exec.Command(protoc, "--decode=perfetto.protos.Trace", "-I", "perfetto/proto", "sqscope/trace_subset.proto")
	cmd.Stdin = bytes.NewReader(b)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("protoc --decode: %v\n%s", err, errb.String())
	}
	if errb.Len() > 0 {
		t.Fatalf("protoc --decode says: %s", errb.String())
	}
	return bytes.Count(out.Bytes(), []byte("\npacket {")) + bytes.Count(out.Bytes()[:min(out.Len(), 8)], []byte("packet {"))
}

// checkCounters replays the events into an analyzer and requires each
// occupancy sample to equal its value once every event up to the sample's
// time is in, and each doorbells/s sample to be the doorbells the analyzer
// counted over the window before it.
func checkCounters(t *testing.T, what string, evs []trace.Event, o Options, d decoded) {
	t.Helper()
	type key struct {
		track string
		ts    uint64
	}
	last := map[key]float64{} // the last sample at each time wins
	var order []key
	for _, s := range d.samples {
		k := key{s.track, s.ts}
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = s.v
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].ts < order[j].ts })
	a := analyzer.New(o.Model)
	step := uint64(o.RateStep)
	if step == 0 {
		step = uint64(DefaultRateStep)
	}
	prevDoorbells := map[string]uint64{}
	seenRate := map[string]bool{}
	i, checked := 0, 0
	check := func(k key, before bool) {
		m := qpTrack.FindStringSubmatch(strings.TrimPrefix(k.track, fmt.Sprintf("pid %d ", d.trackPID[k.track])))
		if m == nil {
			t.Fatalf("%s: counter track %q", what, k.track)
		}
		qpn, _ := strconv.ParseUint(m[1], 16, 32)
		pid := d.trackPID[k.track]
		switch m[2] {
		case "outstanding WRs":
			if before {
				return
			}
			want, _ := a.Outstanding(pid, uint32(qpn))
			if last[k] != float64(want) {
				t.Errorf("%s: %s at %d: %v, the analyzer says %d", what, k.track, k.ts, last[k], want)
			}
			checked++
		case "doorbells/s":
			if !before {
				return
			}
			c, _ := a.QPCounters(pid, uint32(qpn))
			if seenRate[k.track] {
				want := float64(c.Doorbells-prevDoorbells[k.track]) * 1e9 / float64(step)
				if d := last[k] - want; d > 1e-6 || d < -1e-6 {
					t.Errorf("%s: %s at %d: %v, the analyzer counted %v", what, k.track, k.ts, last[k], want)
				}
				checked++
			}
			seenRate[k.track], prevDoorbells[k.track] = true, c.Doorbells
		}
	}
	for _, k := range order {
		// rates are of the window before their time: events before it
		for i < len(evs) && evs[i].Hdr().TimeNS < k.ts {
			a.Ingest(evs[i])
			i++
		}
		check(k, true)
		for i < len(evs) && evs[i].Hdr().TimeNS <= k.ts {
			a.Ingest(evs[i])
			i++
		}
		check(k, false)
	}
	if checked == 0 && len(d.samples) > 0 {
		t.Errorf("%s: no counter sample checked", what)
	}
}

// synthetic is a stream the recordings do not have: call times, two
// processes, runs of failures of two causes, an error CQE and lost events.
func synthetic() []trace.Event {
	var evs []trace.Event
	t := uint64(5_000_000_000)
	h := func(pid, tid uint32) trace.Header { t += 700; return trace.Header{TimeNS: t, PID: pid, TID: tid} }
	for _, q := range []struct{ pid, qpn, depth uint32 }{{100, 0x10, 32}, {100, 0x11, 8}, {200, 0x20, 16}} {
		evs = append(evs, &trace.QPCreate{Header: h(q.pid, q.pid), QP: uint64(q.qpn) << 8, QPNum: q.qpn, Type: trace.QPTypeRC,
			SendCQ: uint64(q.qpn) << 12, Caps: trace.Caps{MaxSendWR: q.depth, MaxSendSGE: 2, MaxInlineData: 64}, Via: "sqsim_create_qp"})
	}
	id := uint64(0)
	wr := func(inline bool, sig bool) trace.WR {
		id++
		w := trace.WR{ID: id, NumSGE: 1, Bytes: 32}
		if inline {
			w.Flags |= 8
		}
		if sig {
			w.Flags |= 2
		}
		return w
	}
	for round := 0; round < 400; round++ {
		hh := h(100, 101)
		evs = append(evs, &trace.Post{Header: hh, QPNum: 0x10, WRs: []trace.WR{wr(round%2 == 0, round%4 == 3)}, Accepted: 1, EntryNS: hh.TimeNS - 300})
		if round%4 == 3 {
			hh = h(100, 101)
			evs = append(evs, &trace.Poll{Header: hh, CQ: 0x10 << 12, Max: 16, Ret: 1, EntryNS: hh.TimeNS - 100,
				WCs: []trace.WC{{ID: id, QPNum: 0x10}}})
		}
		hh = h(100, 102) // QP 0x11 never signals: it fills, then fails
		evs = append(evs, &trace.Post{Header: hh, QPNum: 0x11, WRs: []trace.WR{wr(false, false)}, Accepted: 1, EntryNS: hh.TimeNS - 200})
		if round > 8 {
			p := evs[len(evs)-1].(*trace.Post)
			p.Ret, p.Accepted = 12, 0
		}
		hh = h(200, 201) // QP 0x20 asks for too much inline data every 50th round
		w := wr(true, true)
		p := &trace.Post{Header: hh, QPNum: 0x20, WRs: []trace.WR{w}, Accepted: 1}
		if round%50 == 7 {
			p.WRs[0].Bytes, p.Ret, p.Accepted = 4096, 12, 0
		}
		evs = append(evs, p)
		if p.Accepted == 1 {
			evs = append(evs, &trace.Poll{Header: h(200, 201), CQ: 0x20 << 12, Max: 4, Ret: 1, WCs: []trace.WC{{ID: w.ID, QPNum: 0x20}}})
		}
		if round == 200 {
			evs = append(evs, &trace.Lost{Header: h(0, 0), Count: 5})
			evs = append(evs, &trace.Poll{Header: h(100, 101), CQ: 0x10 << 12, Max: 16, Ret: 1,
				WCs: []trace.WC{{ID: 99999, QPNum: 0x10, Status: 5}}})
		}
		t += 2_000_000 // 2 ms a round: the rate windows see several rounds
	}
	return evs
}

type exportCase struct {
	name   string
	evs    []trace.Event
	info   trace.FileInfo
	filter Filter
}

// TestPerfettoExportDecodes exports every recording of the repository and
// a synthetic stream, whole and through each filter, decodes every file
// with the vendored schema (Go's decoder and protoc), checks that every
// track and interned string is defined before it is used, that the
// counters are the analyzer's values, and that each filter selects
// exactly what it names.
func TestPerfettoExportDecodes(t *testing.T) {
	var cases []exportCase
	for _, path := range recordings(t) {
		evs, info := readEvents(t, path)
		cases = append(cases, exportCase{name: filepath.Base(path), evs: evs, info: info})
	}
	cases = append(cases, exportCase{name: "synthetic", evs: synthetic()})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Recording: c.name, Info: c.info, Rates: true, RateStep: 5_000_000,
				Model: analyzer.Options{BF: analyzer.BFFromEnv(c.info.Env)}}
			b, st, err := exportEvents(t, FormatPerfetto, o, c.evs)
			if err != nil {
				t.Fatal(err)
			}
			whole := decodePerfetto(t, b)
			if n := protocDecode(t, b); n != whole.packets {
				t.Errorf("protoc decoded %d packets, Go %d", n, whole.packets)
			}
			if st.Events() == 0 || len(whole.samples) == 0 {
				// counters mode: the kernel's totals, no per-call events
				t.Logf("nothing to draw: %+v", st)
				return
			}
			checkCounters(t, "whole", c.evs, o, whole)
			for _, f := range filters(t, c, whole) {
				t.Run(f.name, func(t *testing.T) {
					fo := o
					fo.Filter = f.filter
					b, _, err := exportEvents(t, FormatPerfetto, fo, c.evs)
					if errors.Is(err, ErrNothingSelected) && f.name == "window" {
						for _, s := range whole.samples {
							if s.ts >= f.from && s.ts <= f.to {
								t.Fatalf("%v, but the whole export has a sample at %d", err, s.ts)
							}
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					part := decodePerfetto(t, b)
					if n := protocDecode(t, b); n != part.packets {
						t.Errorf("protoc decoded %d packets, Go %d", n, part.packets)
					}
					checkCounters(t, f.name, c.evs, fo, part)
					f.check(t, whole, part)
				})
			}
		})
	}
}

type filterCase struct {
	name     string
	filter   Filter
	check    func(t *testing.T, whole, part decoded)
	from, to uint64 // the window's bounds on the trace clock
}

func sampleLines(d decoded, keep func(s sample) bool) []string {
	var out []string
	for _, s := range d.samples {
		if keep(s) {
			out = append(out, fmt.Sprintf("%d %s %v", s.ts, s.track, s.v))
		}
	}
	sort.Strings(out)
	return out
}

func eventLines(d decoded, keep func(e string) bool) []string {
	var out []string
	for _, e := range d.events {
		if keep(e) {
			out = append(out, e)
		}
	}
	sort.Strings(out)
	return out
}

func sameLines(t *testing.T, what string, whole, part []string) {
	t.Helper()
	if strings.Join(whole, "\n") != strings.Join(part, "\n") {
		t.Errorf("%s: the filtered export has %d, the whole one %d of them:\nfiltered: %.600q\nwhole:    %.600q",
			what, len(part), len(whole), part, whole)
	}
}

func eventTS(e string) uint64 {
	ts, _ := strconv.ParseUint(e[:strings.IndexByte(e, ' ')], 10, 64)
	return ts
}

// filters are the filter cases of a recording: its first QP, its first
// process, and the time of its middle third of events.
func filters(t *testing.T, c exportCase, whole decoded) []filterCase {
	t.Helper()
	var qpn uint64
	var pid uint32
	for _, s := range whole.samples {
		p := whole.trackPID[s.track]
		if m := qpTrack.FindStringSubmatch(strings.TrimPrefix(s.track, fmt.Sprintf("pid %d ", p))); m != nil {
			qpn, _ = strconv.ParseUint(m[1], 16, 32)
			pid = p
			break
		}
	}
	first, last := c.evs[0].Hdr().TimeNS, c.evs[len(c.evs)-1].Hdr().TimeNS
	start := c.info.StartMonoNS
	if start == 0 || start > first {
		start = first
	}
	from, to := c.evs[len(c.evs)/3].Hdr().TimeNS, c.evs[2*len(c.evs)/3].Hdr().TimeNS
	_ = last
	rel := func(ns uint64) Time {
		return Time{Given: true, FromStartNS: ns - start, Source: fmt.Sprintf("%.9f", float64(ns-start)/1e9)}
	}
	qpName := fmt.Sprintf("QP 0x%x ", qpn)
	qpArg := fmt.Sprintf("qp_num=0x%x", qpn)
	mentionsQP := func(e string) bool {
		return strings.Contains(e, qpName) || strings.Contains(e, qpArg+" ") || strings.HasSuffix(e, qpArg)
	}
	pidPrefix := fmt.Sprintf("pid %d ", pid)
	cases := []filterCase{
		{name: "qp", filter: Filter{QPs: Numbers{uint32(qpn)}}, check: func(t *testing.T, whole, part decoded) {
			for _, s := range part.samples {
				if !strings.Contains(s.track, qpName) {
					t.Errorf("--qp %#x: a sample on %q", qpn, s.track)
				}
			}
			for _, e := range part.events {
				if !mentionsQP(e) && !strings.Contains(e, "ibv_poll_cq") && !strings.Contains(e, " E") {
					t.Errorf("--qp %#x: event %q", qpn, e)
				}
			}
			inQP := func(s sample) bool { return strings.Contains(s.track, qpName) }
			sameLines(t, "samples of the QP", sampleLines(whole, inQP), sampleLines(part, func(sample) bool { return true }))
			sameLines(t, "events of the QP", eventLines(whole, mentionsQP), eventLines(part, mentionsQP))
		}},
		{name: "pid", filter: Filter{PIDs: Numbers{pid}}, check: func(t *testing.T, whole, part decoded) {
			for tr, p := range part.trackPID {
				if p != pid && tr != "sqscope" {
					t.Errorf("--pid %d: track %q of pid %d", pid, tr, p)
				}
			}
			inPID := func(s sample) bool { return whole.trackPID[s.track] == pid }
			sameLines(t, "samples of the process", sampleLines(whole, inPID), sampleLines(part, func(sample) bool { return true }))
			onPID := func(e string) bool { return strings.Contains(e, " "+pidPrefix) }
			sameLines(t, "events of the process", eventLines(whole, onPID), eventLines(part, func(string) bool { return true }))
		}},
		{name: "window", filter: Filter{From: rel(from), To: rel(to)}, from: from, to: to, check: func(t *testing.T, whole, part decoded) {
			for _, s := range part.samples {
				if s.ts < from || s.ts > to {
					t.Errorf("--from/--to: sample at %d outside [%d, %d]", s.ts, from, to)
				}
			}
			for _, e := range part.events {
				if ts := eventTS(e); ts < from || ts > to {
					t.Errorf("--from/--to: event %q outside [%d, %d]", e, from, to)
				}
			}
			occInside := func(s sample) bool {
				return s.ts > from && s.ts <= to && strings.HasSuffix(s.track, "outstanding WRs")
			}
			sameLines(t, "occupancy in the window", sampleLines(whole, occInside), sampleLines(part, occInside))
			inside := func(e string) bool {
				ts := eventTS(e)
				// slice ends left out: a call that began before the window
				// is not in it
				return ts > from && ts <= to && !strings.Contains(e, "failed posts") && !strings.HasSuffix(e, " E")
			}
			sameLines(t, "events in the window", eventLines(whole, inside), eventLines(part, inside))
		}},
	}
	if from < start || to < from { // a recording whose times go back (the format's golden file)
		cases = cases[:2]
	}
	return cases
}

// A filter that selects nothing is an error that says what the
// recording holds.
func TestFilterSelectsNothing(t *testing.T) {
	evs := synthetic()
	for _, f := range []Filter{{QPs: Numbers{0x99}}, {PIDs: Numbers{4242}}} {
		_, _, err := exportEvents(t, FormatPerfetto, Options{Filter: f}, evs)
		if !errors.Is(err, ErrNothingSelected) || !strings.Contains(err.Error(), "QPs 0x10 (pid 100), 0x11 (pid 100), 0x20 (pid 200)") {
			t.Errorf("%s: %v", f.describe(), err)
		}
	}
	from, _ := ParseTime("3600")
	if _, _, err := exportEvents(t, FormatChrome, Options{Filter: Filter{From: from}}, evs); !errors.Is(err, ErrNothingSelected) {
		t.Errorf("--from past the end: %v", err)
	}
}
