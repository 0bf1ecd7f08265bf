package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/ibv"
)

// rdmaQP is one QP of `rdma -j res show qp` (iproute2).
type rdmaQP struct {
	IfName string `json:"ifname"`
	Port   uint32 `json:"port"`
	LQPN   uint32 `json:"lqpn"`
	Type   string `json:"type"`
	State  string `json:"state"`
	PID    uint32 `json:"pid"`
	Comm   string `json:"comm"`
}

// scanJSON is a memory scan as the report gives it.
type scanJSON struct {
	PID         uint32
	Bytes       uint64
	Contexts    uint64
	QPs         uint64
	StopNS      uint64
	Err         string
	KernelCheck string
}

// perftestAttached starts a perftest bw client in duration mode, waits
// until the kernel lists its QP in RTS, and then traces it with `sqscope
// trace -p` for traceSecs while it runs: its QP must be found in its
// memory through the stripped librxe (no symbol names its data path),
// match what `rdma res show qp` lists (number, type, state, pid), and the
// WRs traced must come -l per post, signaled every -Q, with never more
// than -t outstanding.
func perftestAttached(tool, args string, traceSecs int) guestCmd {
	return perftestAttachedRate(tool, args, traceSecs, false)
}

// perftestAttachedRate is perftestAttached; with untracedFirst the same
// client runs once untraced before, and the traced run's message rate
// must stay within what the untraced one had (a tracer that attaches
// must not stall its target).
func perftestAttachedRate(tool, args string, traceSecs int, untracedFirst bool) guestCmd {
	a, err := parsePerftestArgs(args)
	name := "attach-" + tool + strings.NewReplacer(" --", "-", " -", "-", " ", "").Replace(" "+args)
	if untracedFirst {
		name += "-rate"
	}
	if err != nil {
		return guestCmd{name: name, sh: "true", check: func(t *testing.T, _ cmdResult) {
			t.Fatalf("perftest args %q: %v", args, err)
		}}
	}
	first := ""
	if untracedFirst {
		first = `$T $A > server0.log 2>&1 &
s=$!
i=0
until ss -Hltn 'sport = :18515' | grep -q .; do
	i=$((i + 1))
	[ $i -gt 400 ] && { echo "server not listening after 20 s"; cat server0.log; kill $s; exit 1; }
	sleep 0.05
done
$T $A 127.0.0.1 > client0.log 2>&1 || { echo "untraced client failed"; cat client0.log; kill $s; exit 1; }
wait $s
sleep 0.5
`
	}
	// The client's -D stretches with the guest's slowness: on a loaded
	// host the attach alone took 17 s, and a client that ends during it
	// makes perf refuse the uprobe (ESRCH).
	dur := regexp.MustCompile(`(^| )-D [0-9]+`)
	sh := fmt.Sprintf(`D=$(awk -v s="$SLOW" 'BEGIN { printf "%%d", %d * s + 0.5 }')
echo $D > duration
echo "$SLOW" > slowness
T=%s A=%q
`+first+`$T $A > server.log 2>&1 &
s=$!
i=0
until ss -Hltn 'sport = :18515' | grep -q .; do
	i=$((i + 1))
	[ $i -gt 400 ] && { echo "server not listening after 20 s"; cat server.log; kill $s; exit 1; }
	sleep 0.05
done
$T $A 127.0.0.1 > client.log 2>&1 &
c=$!
echo "$(cut -d' ' -f1 /proc/uptime) client $c started"
i=0
until rdma res show qp | grep -q "state RTS .*pid $c "; do
	kill -0 $c 2>/dev/null || { echo "client exited before its QP was in RTS"; cat client.log; kill $s; exit 1; }
	i=$((i + 1))
	[ $i -gt 400 ] && { echo "no RTS QP of the client after 20 s"; rdma res show qp; kill $c $s; exit 1; }
	sleep 0.05
done
sleep 0.5
echo $c > client.pid
rdma -j res show qp > rdma.json
# ps beside the trace, not before it: in a loaded guest a ps alone took
# long enough for the client to end before the trace began
( sqscope ps --json > ps.json || echo "sqscope ps exit $?"; echo "$(cut -d' ' -f1 /proc/uptime)" > ps.done ) &
p=$!
( while kill -0 $c 2>/dev/null; do echo "$(cut -d' ' -f1 /proc/uptime) $(cut -d' ' -f3,14,15 /proc/$c/stat 2>/dev/null)"; sleep 0.5; done ) > states.txt 2>/dev/null &
tt=$(cut -d' ' -f1 /proc/uptime)
echo "$tt trace -p $c"
sqscope trace -p $c --json -D %ds > report.json
r=$?
te=$(cut -d' ' -f1 /proc/uptime)
echo "$te trace exit $r"
wait $p
pt=$(cat ps.done)
wait $c
cv=$?
ce=$(cut -d' ' -f1 /proc/uptime)
wait $s
sv=$?
echo "--- client, exit $cv"
cat client.log
echo "--- server, exit $sv"
cat server.log
echo "trace exit $r, client exit $cv, server exit $sv"
echo "uptime: trace -p $tt, trace exit $te, ps done $pt, client reaped $ce, client last seen running $(tail -n 1 states.txt | cut -d' ' -f1)"
echo "$tt $te" > traced.txt
[ $r -eq 0 ] && [ $cv -eq 0 ] && [ $sv -eq 0 ]`, a.duration, tool, perftestBase+dur.ReplaceAllString(args, "$1-D $$D"), traceSecs)
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: map[bool]time.Duration{false: 60 * time.Second, true: 150 * time.Second}[untracedFirst],
		check: func(t *testing.T, r cmdResult) {
			requireExit(t, r, 0)
			checkAttached(t, r, a)
			if untracedFirst {
				checkRate(t, r, traceSecs, a)
			}
		},
	}
}

// checkRate compares the client's message rate traced (for traceSecs of
// its run) with its untraced run's, and requires that the tracer never
// kept it stopped: its state, sampled every half second while it runs,
// is never T twice in a row (a hold is bounded by the attach's stop, far
// less). Under TCG the guest's two CPUs are the host's, and sqscope's
// loading, verifying and attaching and its reading take CPU the client
// then does not get, so the traced stretch is slower; the bound is on the
// rest of the run: the client must have kept at least minUntracedShare of
// its untraced rate over the part of its -D the tracer was not running
// (a client stalled by the attach, as once seen, falls to 0 there).
func checkRate(t *testing.T, r cmdResult, traceSecs int, a perftestArgs) {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(r.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	rate := func(name string) float64 {
		b := read(name)
		v, ok := perftestMsgRate(b)
		if !ok {
			t.Fatalf("%s: no message rate in the client's output:\n%s", name, b)
		}
		return v
	}
	var dur, t0, t1 float64
	if _, err := fmt.Sscan(read("duration"), &dur); err != nil || dur <= 0 {
		t.Fatalf("the client's -D: %q %v", read("duration"), err)
	}
	if _, err := fmt.Sscan(read("traced.txt"), &t0, &t1); err != nil {
		t.Fatalf("traced.txt: %v", err)
	}
	untraced, traced := rate("client0.log"), rate("client.log")
	tracedFor := t1 - t0
	// the least rate over the whole -D for a client that kept
	// minUntracedShare of its rate while not traced and did nothing while
	// traced (attach included)
	least := minUntracedShare * untraced * max(0, dur-tracedFor) / dur
	t.Logf("message rate: untraced %.4f Mpps; traced for %d s of its %.0f s -D, the trace running %.1f s with its attach: %.4f Mpps (%.0f%%); at least %.4f Mpps wanted",
		untraced, traceSecs, dur, tracedFor, traced, 100*traced/untraced, least)
	switch {
	case tracedFor >= dur*0.8:
		t.Errorf("the trace ran %.1f s of the client's %.0f s: too little of the run was untraced to bound its rate (the guest is %s× slower than a quiet host's)", tracedFor, dur, strings.TrimSpace(read("slowness")))
	case traced < least:
		t.Errorf("the client's rate %.4f Mpps is below %.4f: %.0f%% of its untraced rate over the %.1f s it was not traced; was it stalled?",
			traced, least, 100*minUntracedShare, dur-tracedFor)
	}
	b := read("states.txt")
	stopped := 0
	for _, l := range strings.Split(strings.TrimSpace(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[1] == "T" {
			if stopped++; stopped >= 2 {
				t.Fatalf("the client was found stopped twice in a row while traced:\n%s", b)
			}
		} else {
			stopped = 0
		}
	}
}

// minUntracedShare is the share of its untraced message rate a client must
// keep while not traced: the untraced run comes first, and a busy host's
// load between the two moves it by up to about a quarter.
const minUntracedShare = 0.6

// perftestMsgRate is the MsgRate[Mpps] of a perftest bw client's result
// line: the last number of the line after its header.
func perftestMsgRate(out string) (float64, bool) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "MsgRate") || i+1 >= len(lines) {
			continue
		}
		f := strings.Fields(lines[i+1])
		if len(f) == 0 {
			return 0, false
		}
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err != nil {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

func checkAttached(t *testing.T, r cmdResult, a perftestArgs) {
	t.Helper()
	read := func(name string, v any) {
		b, err := os.ReadFile(filepath.Join(r.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
	}
	var pid uint32
	var kernel []rdmaQP
	var rep struct {
		snapshot
		Scans []scanJSON `json:"memory_scans"`
	}
	read("client.pid", &pid)
	read("rdma.json", &kernel)
	read("report.json", &rep)
	s := &rep.snapshot
	if s.Lost != 0 {
		t.Errorf("%d events lost", s.Lost)
	}

	// the kernel's QPs of the client against those found in its memory
	want := map[uint32]rdmaQP{}
	for _, k := range kernel {
		if k.PID == pid {
			want[k.LQPN] = k
		}
	}
	if len(want) == 0 {
		t.Fatalf("rdma res show qp lists no QP of the client %d: %+v", pid, kernel)
	}
	checkPS(t, r, pid, want)
	found := 0
	var sender map[string]any
	for _, q := range s.QPs {
		if uint32(num(q, "pid")) != pid || q["found"] != "memory" {
			continue
		}
		found++
		n := uint32(num(q, "qp_num"))
		k, ok := want[n]
		switch {
		case !ok:
			t.Errorf("QP %#x found in memory is not among the client's in rdma res show qp: %+v", n, want)
		case q["qp_type"] != k.Type || q["state_found"] != k.State:
			t.Errorf("QP %#x: %v %v in memory, %s %s in rdma res show qp", n, q["qp_type"], q["state_found"], k.Type, k.State)
		}
		if q["provider"] != "rxe" {
			t.Errorf("QP %#x: provider %v, want rxe", n, q["provider"])
		}
		if num(q, "wrs") > 0 {
			sender = q
		}
	}
	if found != len(want) {
		t.Errorf("%d QP(s) of the client found in memory, rdma res show qp lists %d: %+v", found, len(want), want)
	}
	var scan *scanJSON
	for i := range rep.Scans {
		if rep.Scans[i].PID == pid {
			scan = &rep.Scans[i]
		}
	}
	if scan == nil || scan.Err != "" || scan.Contexts == 0 || scan.QPs != uint64(len(want)) {
		t.Fatalf("memory scan of the client: %+v", scan)
	}
	for _, k := range want {
		d := fmt.Sprintf("%#x %s %s on %s port %d", k.LQPN, k.Type, k.State, k.IfName, k.Port)
		if !strings.Contains(scan.KernelCheck, "agrees") || !strings.Contains(scan.KernelCheck, d) {
			t.Errorf("the scan's check with the kernel says %q, want it to agree on %s", scan.KernelCheck, d)
		}
	}

	// the data path came from memory: librxe is stripped
	post := []string{"post_send"}
	if strings.Contains(r.stdout, "ibv_wr* API     : ON") {
		post = []string{"wr_start", "wr_complete"}
	}
	for _, f := range append(post, "poll_cq") {
		ok := false
		for _, p := range s.Probes {
			ok = ok || (p.Func == f && p.How == "memory" && p.Err == "" && strings.Contains(filepath.Base(p.Path), "rxe"))
		}
		if !ok {
			t.Errorf("no %s probe found in memory inside librxe", f)
		}
	}
	for _, p := range s.Probes {
		if slices.Contains(dataPathFuncs, p.Func) && p.How == "symbol" {
			t.Errorf("data-path probe %s placed by symbol: librxe is stripped", p.Func)
		}
	}
	logProbes(t, s)

	if sender == nil {
		t.Fatalf("no QP of the client posted while traced: %v", s.QPs)
	}
	wrs, posts := num(sender, "wrs"), num(sender, "post_calls")
	occ, _ := sender["occupancy"].(map[string]any)
	p99, _ := occ["p99_after_post_le"].(float64)
	depth := a.txDepth
	switch {
	case posts < 10 || wrs != a.postList*posts:
		t.Errorf("%d WRs in %d posts, want %d per post", wrs, posts, a.postList)
	case num(sender, "signal_interval_typical") != a.cqMod:
		t.Errorf("signal interval %d, want -Q %d", num(sender, "signal_interval_typical"), a.cqMod)
	}
	if num(sender, "peak_outstanding") > depth || uint64(p99) > depth || num(sender, "outstanding") > depth {
		t.Errorf("outstanding peak %d, p99 %v, now %d: more than -t %d", num(sender, "peak_outstanding"), p99, num(sender, "outstanding"), depth)
	}
	// Exact once a completion of a WR posted since the attach is told
	// apart from older ones; where the WRs share wr_ids none can be, and
	// the figures stay lower bounds. Either way every completion is
	// accounted for: of a WR seen posted, or of one posted before.
	exact := sender["outstanding_lower_bound"] == false && sender["exact_since_ns"] != nil
	guessed := sender["outstanding_lower_bound"] == true && sender["wr_ids_repeat"] == true
	if !exact && !guessed {
		t.Errorf("occupancy a lower bound (exact since %v) while the wr_ids are unique", sender["exact_since_ns"])
	}
	if n := num(sender, "unmatched_cqes"); n != 0 {
		t.Errorf("%d completions matched no WR (pre-attach completions: %d)", n, num(sender, "pre_attach_cqes"))
	}
	t.Logf("client %d: QP %#x %v %v found in memory (scan %d KiB in %d contexts, stopped %.3f ms), kernel: %s; traced %d WRs in %d posts (%d per post), signal interval %d, peak outstanding %d, p99 %v of -t %d; exact %v, wr_ids repeat %v, %d completions of pre-attach WRs",
		pid, num(sender, "qp_num"), sender["qp_type"], sender["state_found"], scan.Bytes>>10, scan.Contexts, float64(scan.StopNS)/1e6,
		scan.KernelCheck, wrs, posts, wrs/max(posts, 1), num(sender, "signal_interval_typical"), num(sender, "peak_outstanding"), p99, depth,
		exact, sender["wr_ids_repeat"], num(sender, "pre_attach_cqes"))
	if t.Failed() {
		t.Logf("sender: %s\nclient output:\n%s", excerpt(sender, "outstanding", "exact_since_ns", "outstanding_lower_bound", "wr_ids_repeat", "pre_attach_cqes"), tail(r.stdout, 40))
	}
}

// The message rate is read from the result line under perftest's header,
// and its absence is said.
func TestPerftestMsgRate(t *testing.T) {
	out := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 16         123456           0.00               1.88                 0.123456\n"
	if v, ok := perftestMsgRate(out); !ok || v != 0.123456 {
		t.Errorf("rate %v (%v), want 0.123456", v, ok)
	}
	if _, ok := perftestMsgRate("Couldn't connect to 127.0.0.1:18515\n"); ok {
		t.Error("a rate read from an output without one")
	}
}

// checkPS holds what `sqscope ps --json` listed of the client to what the
// kernel lists (`rdma res show qp`): its QPs, each with its number, type,
// state and device, the device open, librxe mapped, and its stripped data
// path to be found by the memory scan.
func checkPS(t *testing.T, r cmdResult, pid uint32, want map[uint32]rdmaQP) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "ps.json"))
	if err != nil {
		t.Fatalf("ps.json: %v", err)
	}
	var procs []struct {
		PID       uint32   `json:"pid"`
		Devices   []string `json:"devices"`
		Providers []string `json:"providers"`
		QPs       []struct {
			Device string `json:"device"`
			QPNum  uint32 `json:"qp_num"`
			Type   uint8  `json:"type"`
			State  uint8  `json:"state"`
		} `json:"qps"`
		DataPath map[string]string `json:"data_path"`
	}
	if err := json.Unmarshal(b, &procs); err != nil {
		t.Fatalf("sqscope ps --json: %v\n%s", err, b)
	}
	for _, p := range procs {
		if p.PID != pid {
			continue
		}
		got := map[uint32]rdmaQP{}
		for _, q := range p.QPs {
			got[q.QPNum] = rdmaQP{IfName: q.Device, LQPN: q.QPNum, Type: ibv.QPTypeName(q.Type), State: ibv.QPStateName(int32(q.State)), PID: pid}
		}
		for n, k := range want {
			g, ok := got[n]
			if !ok || g.IfName != k.IfName || g.Type != k.Type || g.State != k.State {
				t.Errorf("sqscope ps: QP %#x of the client is %+v, rdma res show qp lists %+v", n, g, k)
			}
		}
		if len(got) != len(want) || !slices.Contains(p.Devices, "rxe0") || !slices.ContainsFunc(p.Providers, func(f string) bool { return strings.Contains(f, "librxe") }) ||
			p.DataPath["post_send"] != "memory scan" {
			t.Errorf("sqscope ps lists the client as %+v; the kernel lists %d QP(s)", p, len(want))
		}
		return
	}
	t.Errorf("sqscope ps does not list the client %d:\n%s", pid, b)
}
