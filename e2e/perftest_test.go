package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// perftestArgs are the perftest flags a traced run must be recovered from.
type perftestArgs struct {
	size, cqMod, txDepth, postList, iters uint64
	duration                              uint64 // -D, seconds: a duration run
	oldPostSend                           bool
}

// parsePerftestArgs reads -s -Q -t -l, -n or -D, and --use_old_post_send;
// every one of the numbers must be given (the checks do not guess
// perftest's defaults).
func parsePerftestArgs(args string) (perftestArgs, error) {
	var a perftestArgs
	f := strings.Fields(args)
	given := map[string]bool{}
	for i := 0; i < len(f); i++ {
		var p *uint64
		switch f[i] {
		case "-s":
			p = &a.size
		case "-Q":
			p = &a.cqMod
		case "-t":
			p = &a.txDepth
		case "-l":
			p = &a.postList
		case "-n":
			p = &a.iters
		case "-D":
			p = &a.duration
		case "--use_old_post_send":
			a.oldPostSend = true
			continue
		default:
			return a, fmt.Errorf("checks do not know perftest flag %s", f[i])
		}
		if i+1 >= len(f) {
			return a, fmt.Errorf("%s needs a value", f[i])
		}
		i++
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil || v == 0 {
			return a, fmt.Errorf("%s %s: want a positive integer", f[i-1], f[i])
		}
		*p = v
		given[f[i-1]] = true
	}
	for _, k := range []string{"-s", "-Q", "-t", "-l"} {
		if !given[k] {
			return a, fmt.Errorf("give %s: the check derives its expectation from it", k)
		}
	}
	if given["-n"] == given["-D"] {
		return a, fmt.Errorf("give one of -n and -D: the check derives its expectation from it")
	}
	// perftest's own rules (perftest_parameters.c): -n a multiple of -l,
	// -l a multiple of -Q.
	if a.iters%a.postList != 0 || a.postList%a.cqMod != 0 {
		return a, fmt.Errorf("perftest wants -n a multiple of -l and -l a multiple of -Q")
	}
	return a, nil
}

// depth is the max_send_wr perftest asks for: -t, capped to -n in an
// iterations run (force_dependecies in perftest_parameters.c).
func (a perftestArgs) depth() uint64 {
	if a.iters == 0 {
		return a.txDepth
	}
	return min(a.txDepth, a.iters)
}

// perftestBase goes before every perftest's flags. -F: perftest calibrates
// its cycle counter against the clock and, when the fit is poor (r^2 <
// 0.9, which TCG's timing sometimes gives), exits 1 with "Can't produce a
// report" unless -F is given; the bandwidth figures are not checked here.
const perftestBase = "-d rxe0 -x 1 -F "

// perftestTraced runs a perftest bw tool's server (untraced) and its client
// under `sqscope record` on 127.0.0.1 in the guest, then `sqscope report
// --json` of the client's recording, and requires the report to state the
// flags the client ran with. A tiny untraced workload asks rxe for the same
// SQ depth first, to learn what rxe reports back for that request.
func perftestTraced(tool, args string) guestCmd {
	a, err := parsePerftestArgs(args)
	name := tool + strings.NewReplacer(" --", "-", " -", "-", " ", "").Replace(" "+args)
	if err != nil {
		return guestCmd{name: name, sh: "true", check: func(t *testing.T, _ cmdResult) {
			t.Fatalf("perftest args %q: %v", args, err)
		}}
	}
	d := a.depth()
	sh := fmt.Sprintf(`T=%s A=%q
sqscope workload -d rxe0 -x 1 --json -t %d -n %d -Q %d > caps.json || { echo "asking rxe for max_send_wr %d failed"; exit 1; }
$T $A > server.log 2>&1 &
s=$!
i=0
until ss -Hltn 'sport = :18515' | grep -q .; do
	kill -0 $s 2>/dev/null || { wait $s; echo "server exited with $? before listening"; cat server.log; exit 1; }
	i=$((i + 1))
	[ $i -gt 400 ] && { echo "server not listening after 20 s"; cat server.log; kill $s; exit 1; }
	sleep 0.05
done
sqscope record -o client.sqscope -c "$T $A 127.0.0.1"
c=$?
[ $c -eq 0 ] || kill $s 2>/dev/null
wait $s
sv=$?
echo "--- server, exit $sv"
cat server.log
echo "client exit $c, server exit $sv"
[ $c -eq 0 ] && [ $sv -eq 0 ] || exit 1
sqscope report --json client.sqscope > report.json`, tool, perftestBase+args, d, d, d, d)
	return guestCmd{
		name:    name,
		sh:      sh,
		timeout: 45 * time.Second,
		check: func(t *testing.T, r cmdResult) {
			requireExit(t, r, 0)
			checkPerftest(t, r, tool, args, a)
		},
	}
}

func checkPerftest(t *testing.T, r cmdResult, tool, args string, a perftestArgs) {
	t.Helper()
	cmd := fmt.Sprintf("%s %s%s 127.0.0.1", tool, perftestBase, args)
	b, err := os.ReadFile(filepath.Join(r.dir, "report.json"))
	if err != nil {
		t.Fatalf("report of %s: %v", cmd, err)
	}
	s, err := parseSnapshot(string(b))
	if err != nil {
		t.Fatalf("report --json of %s: %v\n%s", cmd, err, b)
	}
	var caps []wlQP
	if cb, err := os.ReadFile(filepath.Join(r.dir, "caps.json")); err != nil || json.Unmarshal(cb, &caps) != nil || len(caps) != 1 {
		t.Fatalf("what rxe reports for max_send_wr %d: %v %s", a.depth(), err, cb)
	}
	rxeDepth := caps[0].MaxSendWR

	if !strings.Contains(r.stdout, "#bytes") {
		t.Errorf("no result table in the %s output:\n%s", tool, tail(r.stdout, 40))
	}
	if s.Recording == nil || !s.Recording.Complete {
		t.Errorf("recording missing or incomplete: %+v", s.Recording)
	}
	if s.Lost != 0 {
		t.Errorf("%d events lost", s.Lost)
	}
	// The client's sending QP is the one that posted; perftest's QP of a
	// bw client only sends.
	var q map[string]any
	for _, c := range s.QPs {
		if num(c, "wrs") > 0 {
			if q != nil {
				t.Fatalf("two QPs posted WRs: %s and %s", excerpt(q), excerpt(c))
			}
			q = c
		}
	}
	if q == nil {
		t.Fatalf("no QP posted a WR in the recording of %s; QPs: %v", cmd, s.QPs)
	}
	rates, _ := q["rates"].(map[string]any)
	perDB, _ := rates["wrs_per_doorbell"].(float64)

	// perftest's ib_*_bw client in an iterations run (run_iter_bw in
	// perftest_resources.c) posts -l WRs per ibv_post_send while fewer
	// than -n are posted and no more than -t are outstanding, so it posts
	// exactly -n WRs in -n/-l calls. Within a list every -Q-th WR is
	// signaled (ctx_set_send_wqes), so -n/-Q CQEs, one every -Q WRs.
	// perftest disables inline on devices it does not know, rxe among
	// them ("Device not recognized to implement inline feature").
	wrs := num(q, "wrs")
	type want struct {
		what      string
		got, want uint64
	}
	checks := []want{
		{"signal interval (signal_interval_typical) = -Q", num(q, "signal_interval_typical"), a.cqMod},
		{"SQ depth (max_send_wr) = what rxe reports for min(-t, -n)", num(q, "max_send_wr"), uint64(rxeDepth)},
		{"WRs per doorbell (wrs/doorbells) = -l", wrs / max(num(q, "doorbells"), 1), a.postList},
		{"WRs per doorbell (rates.wrs_per_doorbell) = -l", uint64(perDB), a.postList},
		{"total WRs = -n", wrs, a.iters},
		{"post calls = -n/-l", num(q, "post_calls"), a.iters / a.postList},
		{"signaled = -n/-Q", num(q, "signaled"), a.iters / a.cqMod},
		{"CQEs polled = signaled", num(q, "cqes_polled"), num(q, "signaled")},
		{"inline WRs (inline fraction 0 on rxe)", num(q, "inline"), 0},
		{"enomem_sq_full", num(q, "enomem_sq_full"), 0},
		{"enomem_unknown", num(q, "enomem_unknown"), 0},
		{"einval", num(q, "einval"), 0},
		{"cqe_errors", num(q, "cqe_errors"), 0},
	}
	// perftest says which post path it took; on rxe it is ibv_post_send
	// with or without --use_old_post_send.
	api := "ibv_post_send"
	wantWR := uint64(0)
	if strings.Contains(r.stdout, "ibv_wr* API     : ON") {
		api, wantWR = "ibv_wr_*", num(q, "post_calls")
	}
	checks = append(checks, want{"post calls through the ibv_wr_* API (wr_api_calls)", num(q, "wr_api_calls"), wantWR})
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: report says %d, want %d", c.what, c.got, c.want)
		}
	}
	// rxe copies the payload in the kernel: no DMA read of it is counted
	for _, k := range mlx5JSON {
		if _, ok := q[k]; ok {
			t.Errorf("the report has the mlx5 model's %q on rxe", k)
		}
	}
	if d := num(q, "max_send_wr"); d < a.depth() {
		t.Errorf("max_send_wr %d is below the %d perftest asked for", d, a.depth())
	}
	t.Logf("%s (posts through %s, --use_old_post_send %v): QP %#x: signal interval %d, max_send_wr %d (asked %d = min(-t %d, -n %d); rxe reports %d for that), %.1f WRs/doorbell, %d WRs, inline %d of %d, %d lost events",
		cmd, api, a.oldPostSend, num(q, "qp_num"), num(q, "signal_interval_typical"), num(q, "max_send_wr"), a.depth(), a.txDepth, a.iters,
		rxeDepth, perDB, wrs, num(q, "inline"), wrs, s.Lost)
	checkProbes(t, s, "post_send", "poll_cq")
	logProbes(t, s)
	if t.Failed() {
		t.Logf("command: sqscope record -c %q\nreport QP: %s\nclient output:\n%s", cmd, excerpt(q, "signal_interval_longest"), tail(r.stdout, 40))
	}
}
