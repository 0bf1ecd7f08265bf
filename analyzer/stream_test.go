package analyzer

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// stream builds synthetic event streams for several QPs of process 7. QP n
// lives at address 0x1000+n and completes on its own send CQ 0x2000+n.
// Every event advances the clock by dt (100 ns unless set).
type stream struct {
	t, dt uint64
	evs   []trace.Event
	ids   map[uint32]uint64
}

const testPID = 7

func newStream() *stream { return &stream{t: 1000, dt: 100, ids: map[uint32]uint64{}} }

func qpAddr(qpn uint32) uint64 { return 0x1000 + uint64(qpn) }
func cqAddr(qpn uint32) uint64 { return 0x2000 + uint64(qpn) }

func (s *stream) hdr() trace.Header {
	s.t += s.dt
	return trace.Header{TimeNS: s.t, PID: testPID, TID: testPID}
}

// wait advances the clock without an event.
func (s *stream) wait(ns uint64) { s.t += ns }

func (s *stream) create(qpn uint32, typ trace.QPType, caps trace.Caps, sigAll bool) {
	s.evs = append(s.evs, &trace.QPCreate{Header: s.hdr(), QP: qpAddr(qpn), QPNum: qpn, Type: typ,
		SigAll: sigAll, SendCQ: cqAddr(qpn), RecvCQ: cqAddr(qpn), Caps: caps, Via: "sqsim_create_qp"})
}

// wrs returns n WRs of one shape with the QP's next wr_ids; every sigEvery-th
// WR of the QP (counting from 1) is signaled when sigEvery > 0.
func (s *stream) wrs(qpn uint32, n int, op uint8, flags uint32, sges, bytes uint32, sigEvery uint64) []trace.WR {
	out := make([]trace.WR, n)
	for i := range out {
		id := s.ids[qpn]
		s.ids[qpn]++
		f := flags
		if sigEvery > 0 && (id+1)%sigEvery == 0 {
			f |= ibv.SendSignaled
		}
		out[i] = trace.WR{ID: id, Opcode: op, Flags: f, NumSGE: sges, Bytes: bytes}
	}
	return out
}

// post posts wrs; ret and accepted as the provider returned them.
func (s *stream) post(qpn uint32, wrs []trace.WR, ret int32, accepted int) {
	h := s.hdr()
	p := &trace.Post{Header: h, QP: qpAddr(qpn), QPNum: qpn, WRs: wrs, Ret: ret,
		Accepted: uint32(accepted), EntryNS: h.TimeNS - 40}
	if ret != 0 {
		// a refused WR keeps its wr_id unused: give it back
		s.ids[qpn] -= uint64(len(wrs) - accepted)
	}
	s.evs = append(s.evs, p)
}

// send posts n SEND WRs of 32 bytes, one SGE, all accepted.
func (s *stream) send(qpn uint32, n int, flags uint32, sigEvery uint64) {
	s.post(qpn, s.wrs(qpn, n, ibv.WRSend, flags, 1, 32, sigEvery), 0, n)
}

// poll returns send completions of the given wr_ids of qpn.
func (s *stream) poll(qpn uint32, ids ...uint64) {
	h := s.hdr()
	p := &trace.Poll{Header: h, CQ: cqAddr(qpn), Max: 16, Ret: int32(len(ids)), EntryNS: h.TimeNS - 30}
	for _, id := range ids {
		p.WCs = append(p.WCs, trace.WC{ID: id, Opcode: 0, ByteLen: 32, QPNum: qpn})
	}
	s.evs = append(s.evs, p)
}

// emptyPolls reports n polls of qpn's CQ that returned nothing.
func (s *stream) emptyPolls(qpn uint32, n uint64) {
	s.evs = append(s.evs, &trace.EmptyPolls{Header: s.hdr(), CQ: cqAddr(qpn), Count: n})
}

// run feeds the stream to a new analyzer and returns its snapshot, whose
// invariants must hold.
func (s *stream) run(t testing.TB, opts Options) Snapshot {
	t.Helper()
	a := New(opts)
	a.IngestAll(s.evs)
	return checked(t, a)
}

// checked is a's snapshot, failing t on every invariant it breaks.
func checked(t testing.TB, a *Analyzer) Snapshot {
	t.Helper()
	s := a.Snapshot()
	for _, err := range s.Check() {
		t.Errorf("invariant: %v", err)
	}
	return s
}

func diagKinds(s Snapshot) []string {
	var out []string
	for _, d := range s.Diagnoses {
		out = append(out, d.Kind)
	}
	return out
}

// checkDiagnoses runs the stream build writes and fails t unless its
// diagnoses are of the kinds want, newest first; with a name, their text
// and JSON must match testdata/diag_NAME.golden.
func checkDiagnoses(t *testing.T, build func(s *stream), want []string, name string) {
	t.Helper()
	s := newStream()
	build(s)
	snap := s.run(t, Options{BF: DefaultBF})
	if got := diagKinds(snap); !slices.Equal(got, want) {
		t.Fatalf("diagnoses %q, want %q", got, want)
	}
	if name != "" {
		golden(t, "diag_"+name+".golden", diagGolden(t, snap))
	}
}

// checkEvidence fails t unless snap has a diagnosis of kind with count
// occurrences and exactly the evidence want.
func checkEvidence(t *testing.T, snap Snapshot, kind string, count uint64, want map[string]uint64) {
	t.Helper()
	var d *Diagnosis
	for i := range snap.Diagnoses {
		if snap.Diagnoses[i].Kind == kind {
			d = &snap.Diagnoses[i]
		}
	}
	if d == nil {
		t.Fatalf("no %s diagnosis in %q", kind, diagKinds(snap))
	}
	if d.Count != count {
		t.Errorf("count %d, want %d", d.Count, count)
	}
	for k, v := range want {
		if got, ok := d.Evidence[k]; !ok || got != v {
			t.Errorf("evidence %s = %d (present %v), want %d", k, got, ok, v)
		}
	}
	if len(d.Evidence) != len(want) {
		t.Errorf("evidence %v, want exactly %v", d.Evidence, want)
	}
}

// diagGolden is the text and the JSON of the diagnoses.
func diagGolden(t *testing.T, s Snapshot) []byte {
	t.Helper()
	var b bytes.Buffer
	WriteDiagnoses(&b, s)
	b.WriteString("\n")
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s.Diagnoses); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
