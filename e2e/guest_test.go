// Package e2e boots a QEMU guest with Debian's kernel, where Soft-RoCE
// (rdma_rxe) exists, and runs the real sqscope binary and perftest there
// against the rxe0 device: sqscope traces its own device workload and must
// rebuild exactly what the workload's application side counted, with 0
// lost events and the stripped provider's data path found through its ops
// table, per QP and, where threads share send CQs and SRQs, per CQ and
// SRQ (shared_test.go); it records unmodified perftest clients and its report must state
// the flags they ran with; and it diagnoses a send-queue overflow rxe
// really has. Every command runs in one boot: booting under TCG costs more
// than a command.
//
// The test skips when a piece is missing (qemu, kernel, static busybox),
// and fails instead when SQSCOPE_REQUIRE_GUEST is set or
// SQSCOPE_REQUIRE_BPF=1 (CI). Knobs: SQSCOPE_BIN (use this binary instead of
// building one), SQSCOPE_GUEST_KERNEL (a vmlinuz), SQSCOPE_GUEST_BUSYBOX,
// SQSCOPE_GUEST_KVM=1 (try KVM first, fall back to TCG),
// SQSCOPE_GUEST_BZIMAGE=1 (boot the bzImage, not the PVH vmlinux),
// SQSCOPE_GUEST_RUN=REGEXP (run only the guest commands it matches).
// `go test -artifacts` keeps the guest's console, outputs and dmesg.
package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// guestCmd is one command run in the guest, in list order, in its own
// working directory on the results share.
type guestCmd struct {
	name    string        // subtest and results directory name
	sh      string        // run by /bin/sh in the guest; sqscope is on PATH
	timeout time.Duration // guest-side bound (coreutils timeout)
	check   func(t *testing.T, r cmdResult)
}

// guestCmds run in one boot. Add a command with one line. The traced runs
// cost about 3 s each under TCG on top of the traffic (loading and
// verifying the BPF programs, placing and removing the uprobes).
var guestCmds = []guestCmd{
	// The tracer against the workload's application-side truth, over
	// inline on/off, -Q 1/16, -l 1/8, both APIs, SEND and WRITE on RC.
	tracedWorkload("send-inline-Q1-l1-post_send", viaTrace, "--opcode send -s 64 -I 64 -Q 1 -l 1 -n 1000 --api post_send"),
	tracedWorkload("send-Q16-l8-wr", viaTrace, "--opcode send -s 64 -Q 16 -l 8 -n 1000 --api wr"),
	tracedWorkload("send-inline-Q16-l8-wr", viaRecord, "--opcode send -s 64 -I 64 -Q 16 -l 8 -n 1000 --api wr"),
	tracedWorkload("send-Q1-l1-wr", viaTrace, "--opcode send -s 64 -Q 1 -l 1 -n 1000 --api wr"),
	tracedWorkload("write-Q16-l1-post_send", viaRecord, "--opcode write -s 64 -Q 16 -l 1 -n 1000 --api post_send"),
	tracedWorkload("write-inline-Q1-l8-post_send", viaTrace, "--opcode write -s 64 -I 64 -Q 1 -l 8 -n 1000 --api post_send"),
	tracedWorkload("write-inline-Q16-l1-wr", viaTrace, "--opcode write -s 64 -I 64 -Q 16 -l 1 -n 1000 --api wr"),
	tracedWorkload("write-Q16-l8-wr", viaTrace, "--opcode write -s 64 -Q 16 -l 8 -n 1000 --api wr"),
	// Every opcode rxe takes without a memory window, in turn, through its
	// ibv_wr_* builder, on a CQ created with ibv_create_cq_ex and polled
	// with ibv_start_poll (this guest's kernel, 6.1, has no rxe atomic
	// write; ibv_post_send's walk is the same for every opcode, and the
	// simulated HCA's tests take it through all of them).
	tracedWorkload("every-opcode-Q7-l7-wr-cq-ex", viaTrace, "--opcode "+rxeOpcodes+" -s 64 -Q 7 -l 7 -n 700 --api wr --cq-ex"),
	// 16 QPs over 2 threads, each thread's QPs sharing one send CQ; the
	// SENDs' peers taking their receives from one SRQ per thread: every
	// QP, send CQ and SRQ as the workload counted it.
	tracedShared("shared-cq-srq-send-Q4-l1", viaTrace, "--opcode send -s 64 -Q 4 -l 1 -n 400 --qps 16 --threads 2 --shared-cq --srq", 2),
	tracedShared("shared-cq-write-Q4-l1", viaRecord, "--opcode write -s 64 -Q 4 -l 1 -n 400 --qps 16 --threads 2 --shared-cq", 2),
	tracedShared("shared-cq-ex-write-Q4-l4-wr", viaTrace, "--opcode write -s 64 -Q 4 -l 4 -n 400 --qps 8 --threads 2 --shared-cq --cq-ex --api wr", 2),
	sharedCreateFails("shared-cq-srq-create-fails"),
	// rxe retires unsignaled WRs without CQEs: no overflow (untraced).
	workload("fault-never-signal", "--opcode send -s 64 -t 128 -l 1 -n 1000 --fault never-signal"),
	// An overflow rxe does have, diagnosed with rxe's cause; the same lazy
	// polling with WRITEs overflows nothing and stays quiet.
	tracedRxe("fault-lazy-poll-rnr", "--opcode send -s 64 -t 128 -Q 16 -l 1 -n 3000 --fault lazy-poll=1000", "sq_overflow_rnr_retry"),
	tracedRxe("lazy-poll-write-quiet", "--opcode write -s 64 -t 128 -Q 16 -l 1 -n 2000 --fault lazy-poll=1000", ""),
	// A send CQ too small, polled late: rxe drops the completions due on
	// it full and goes on, said as such.
	tracedRxeCQOverrun("fault-cq-overrun-drops", "-t 128 -Q 1 --cq-depth 32 --fault cq-overrun -n 2000"),
	// (paced, so that the CQ stays full for half of each cycle of 128
	// WRs, where a 100 ms read finds it, however fast the guest runs)
	sentinelRxeCQOverrun("sentinel-cq-overrun-drops", "-t 128 -Q 1 --cq-depth 32 --fault cq-overrun -n 4000 --rate 2000"),
	// The receiver of the same lazily polled SENDs reaps 64 completions a
	// poll, past the 32 a poll record holds: its receives counted exactly.
	tracedRecvPastBound("lazy-poll-recv-past-poll-record", "--opcode send -s 64 -t 64 -Q 8 -l 1 -n 2000 --fault lazy-poll=500 --poll-batch 64"),
	// The sentinel on rxe: librxe's error sites found and verified here,
	// the overflow caught at them with rxe's cause; a healthy run untraced.
	tracedSentinel("sentinel-lazy-poll-rnr", "--opcode send -s 64 -t 128 -Q 16 -l 1 -n 3000 --fault lazy-poll=1000", true),
	// (paced over a second, so that the ring is read while it runs
	// however late the trace takes its QP's create)
	tracedSentinel("sentinel-healthy", "--opcode send -s 64 -t 128 -Q 16 -l 1 -n 3000 --rate 3000", false),
	// The flight recorder on the same overflow: one file from its first
	// ENOMEM, read back with rxe's cause.
	flightRxe("flight-lazy-poll-rnr", "--opcode send -s 64 -t 128 -Q 16 -l 1 -n 3000 --fault lazy-poll=1000"),
	// The low-overhead mode on this kernel's verifier and rxe's bad_wr:
	// healthy lists, and lists the full SQ cuts short.
	tracedCounters("counters-inline-Q16-l4", "--opcode send -s 64 -I 64 -Q 16 -l 4 -n 2000"),
	tracedCounters("counters-lazy-poll-l4", "--opcode send -s 64 -t 128 -Q 16 -l 4 -n 3000 --fault lazy-poll=1000"),
	// Unmodified perftest: the report recovers the flags it ran with. Each
	// tool runs both flag sets, one with --use_old_post_send.
	perftestTraced("ib_write_bw", "-s 256 -Q 4 -t 64 -l 8 -n 2000"),
	perftestTraced("ib_write_bw", "-s 1024 -Q 2 -t 32 -l 4 -n 1200 --use_old_post_send"),
	perftestTraced("ib_send_bw", "-s 1024 -Q 2 -t 32 -l 4 -n 1200"),
	perftestTraced("ib_send_bw", "-s 256 -Q 4 -t 64 -l 8 -n 2000 --use_old_post_send"),
	// A perftest client that runs before sqscope: traced with -p, its QP
	// found in its memory through the stripped librxe and checked against
	// the kernel's list.
	perftestAttached("ib_write_bw", "-s 256 -Q 4 -t 64 -l 8 -D 20", 3),
	// the same with 2 WRs per post, its rate traced against untraced and
	// never left stopped (30 s: the attach takes some 10 s under TCG)
	perftestAttachedRate("ib_write_bw", "-s 16 -Q 2 -l 2 -t 32 -D 30", 4, true),
}

// rxeOpcodes are the workload's opcodes rxe runs without a memory window.
const rxeOpcodes = "send,send_imm,write,write_imm,read,cmp_swp,fetch_add"

func TestGuest(t *testing.T) {
	t0 := time.Now()
	if req, _ := required(); testing.Short() && !req {
		t.Skip("skipping the guest test in -short mode")
	}
	kit, err := findKit()
	if err != nil {
		requireGuest(t, err.Error())
	}
	cmds := guestCmds
	if pat := os.Getenv("SQSCOPE_GUEST_RUN"); pat != "" {
		re, err := regexp.Compile(pat)
		if err != nil {
			t.Fatalf("SQSCOPE_GUEST_RUN: %v", err)
		}
		cmds = nil
		for _, c := range guestCmds {
			if re.MatchString(c.name) {
				cmds = append(cmds, c)
			}
		}
	}
	share := t.ArtifactDir()
	work := t.TempDir()
	type prepared struct {
		files bootFiles
		notes []string
		err   error
	}
	prep, prepDone := make(chan prepared, 1), make(chan struct{})
	t.Cleanup(func() { <-prepDone }) // before work is removed
	go func() {
		defer close(prepDone)
		var p prepared
		p.files, p.notes, p.err = prepareBoot(kit, work)
		prep <- p
	}()
	installSqscope(t, filepath.Join(share, "bin"))
	writeGuestScripts(t, share, cmds)
	p := <-prep
	for _, n := range p.notes {
		t.Log(n)
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	t.Logf("guest kernel %s (%s) and initramfs ready in %v", kit.kver, p.files.kind, p.files.took.Round(time.Millisecond))
	tb := time.Now()
	run := runGuest(t, kit, p.files, share)
	t.Logf("guest (%s, %s) reached the initramfs after %v, powered off after %v",
		run.accel, run.kernel, run.initramfs.Round(time.Millisecond), run.boot.Round(time.Millisecond))

	out := filepath.Join(share, "out")
	if st, err := os.ReadFile(filepath.Join(out, "setup.status")); err != nil || strings.TrimSpace(string(st)) != "0" {
		log, _ := os.ReadFile(filepath.Join(out, "setup.log"))
		t.Fatalf("setting up rxe0 in the guest failed (status %q):\n%s\nconsole:\n%s",
			strings.TrimSpace(string(st)), log, tail(run.console, 40))
	}
	if _, err := os.Stat(filepath.Join(out, "done")); err != nil {
		t.Errorf("the guest did not finish its command list; console:\n%s", tail(run.console, 60))
	}
	for i, c := range cmds {
		t.Run(c.name, func(t *testing.T) {
			r, err := readResult(filepath.Join(out, cmdID(i, c)))
			if err != nil {
				t.Fatalf("%s: %v", c.sh, err)
			}
			t.Logf("%.2f s in the guest", r.seconds)
			c.check(t, r)
		})
	}
	t.Logf("wall time %v: build and set-up %v, guest %v",
		time.Since(t0).Round(time.Millisecond), tb.Sub(t0).Round(time.Millisecond), run.boot.Round(time.Millisecond))
}

func cmdID(i int, c guestCmd) string { return fmt.Sprintf("%02d-%s", i, c.name) }

// installSqscope puts the sqscope binary into dir: SQSCOPE_BIN, or a fresh
// build of this tree.
func installSqscope(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "sqscope")
	if src := os.Getenv("SQSCOPE_BIN"); src != "" {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("SQSCOPE_BIN: %v", err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building sqscope: go not on PATH (or set SQSCOPE_BIN): %v", err)
	}
	t0 := time.Now()
	cmd := exec.Command(goTool, "build", "-o", dst, "github.com/sqscope/sqscope/cmd/sqscope")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sqscope: %v\n%s", err, out)
	}
	t.Logf("built sqscope in %v", time.Since(t0).Round(time.Millisecond))
}

// writeGuestScripts writes run.sh and, per command, cmds/NN-name.sh and its
// timeout in seconds.
func writeGuestScripts(t *testing.T, share string, cmds []guestCmd) {
	t.Helper()
	run, err := guestFiles.ReadFile("guest/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(share, "cmds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(share, "run.sh"), run, 0o755))
	for i, c := range cmds {
		id := cmdID(i, c)
		to := c.timeout
		if to == 0 {
			to = 30 * time.Second
		}
		to = time.Duration(float64(to) * guestSlowness(t))
		// SLOW: how much slower than a quiet host's the guest runs (1 or
		// more), for commands whose own durations must stretch with it
		sh := fmt.Sprintf("SLOW=%.2f\n%s\n", guestSlowness(t), c.sh)
		must(os.WriteFile(filepath.Join(dir, id+".sh"), []byte(sh), 0o644))
		must(os.WriteFile(filepath.Join(dir, id+".timeout"), []byte(strconv.Itoa(int(to.Seconds()))+"\n"), 0o644))
	}
}

// requireExit fails the test unless the command exited with want.
func requireExit(t *testing.T, r cmdResult, want int) {
	t.Helper()
	if r.status == want {
		return
	}
	why := ""
	if r.status == 124 || r.status == 137 {
		why = " (guest-side timeout)"
	}
	t.Fatalf("exit status %d%s, want %d\nstdout:\n%s\nstderr:\n%s", r.status, why, want, tail(r.stdout, 40), tail(r.stderr, 40))
}

// workload runs `sqscope workload` on rxe0 with args and checks its JSON
// against what the flags promise.
func workload(name, args string) guestCmd {
	return guestCmd{
		name:  name,
		sh:    "sqscope workload -d rxe0 -x 1 --json " + args,
		check: checkWorkload(args),
	}
}

// wlQP is the part of `sqscope workload --json` (one object per QP) the
// checks use.
type wlQP struct {
	QPNum         uint32 `json:"qp_num"`
	MaxSendWR     uint64 `json:"max_send_wr"`
	MaxInlineData uint64 `json:"max_inline_data"`
	WRs           uint64 `json:"wrs"`
	PostCalls     uint64 `json:"post_calls"`
	Doorbells     uint64 `json:"doorbells"`
	Inline        uint64 `json:"inline"`
	Signaled      uint64 `json:"signaled"`
	CQEsPolled    uint64 `json:"cqes_polled"`
	ENOMEMSQFull  uint64 `json:"enomem_sq_full"`
	ENOMEMInline  uint64 `json:"enomem_inline"`
	ENOMEMSGE     uint64 `json:"enomem_sge"`
	EINVAL        uint64 `json:"einval"`
	Truth         string `json:"truth"`
	App           struct {
		Attempts    uint64 `json:"attempts"`
		ENOMEM      uint64 `json:"enomem"`
		EINVAL      uint64 `json:"einval"`
		OtherErrors uint64 `json:"other_errors"`
		CQEErrors   uint64 `json:"cqe_errors"`
		Undrained   uint64 `json:"undrained"`
		FirstErrno  int    `json:"first_errno"`
	} `json:"app"`
}

// wlArgs are the workload flags the checks derive expectations from, with
// the workload's defaults.
type wlArgs struct {
	iters, cqMod, size, inline, depth, postList uint64
	qps                                         int
	fault                                       string
	cqModGiven                                  bool
}

func parseWorkloadArgs(args string) (wlArgs, error) {
	a := wlArgs{iters: 5000, cqMod: 100, size: 64, depth: 128, postList: 1, qps: 1}
	f := strings.Fields(args)
	for i := 0; i < len(f); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(f[i], "-"), "=")
		num := func(p *uint64) error {
			if !hasVal {
				if i+1 >= len(f) {
					return fmt.Errorf("%s needs a value", f[i])
				}
				i++
				val = f[i]
			}
			v, err := strconv.ParseUint(val, 10, 64)
			*p = v
			return err
		}
		var err error
		switch name {
		case "n", "iters":
			err = num(&a.iters)
		case "Q", "cq-mod":
			err, a.cqModGiven = num(&a.cqMod), true
		case "s", "size":
			err = num(&a.size)
		case "I", "inline_size":
			err = num(&a.inline)
		case "t", "tx-depth":
			err = num(&a.depth)
		case "l", "post_list":
			err = num(&a.postList)
		case "qps":
			var q uint64
			err, a.qps = num(&q), int(q)
		case "threads":
			var n uint64
			err = num(&n)
		case "fault", "opcode", "api", "connection", "d", "ib-dev", "x", "gid-index":
			if !hasVal {
				if i+1 >= len(f) {
					return a, fmt.Errorf("%s needs a value", f[i])
				}
				i++
				val = f[i]
			}
			if name == "fault" {
				a.fault = val
			}
		case "json", "sig-all", "cq-ex", "shared-cq", "srq":
		default:
			return a, fmt.Errorf("checks do not know flag %s", f[i])
		}
		if err != nil {
			return a, fmt.Errorf("%s: %v", f[i], err)
		}
	}
	if !a.cqModGiven && a.cqMod > a.depth {
		a.cqMod = a.depth
	}
	return a, nil
}

func checkWorkload(args string) func(*testing.T, cmdResult) {
	return func(t *testing.T, r cmdResult) {
		requireExit(t, r, 0)
		var qps []wlQP
		if err := json.Unmarshal([]byte(r.stdout), &qps); err != nil {
			t.Fatalf("workload --json output: %v\n%s", err, tail(r.stdout, 40))
		}
		checkTruth(t, args, qps)
		if t.Failed() {
			t.Logf("stderr:\n%s", tail(r.stderr, 20))
		}
	}
}

// checkTruth checks the workload's own JSON against what its flags promise.
func checkTruth(t *testing.T, args string, qps []wlQP) {
	t.Helper()
	a, err := parseWorkloadArgs(args)
	if err != nil {
		t.Fatalf("workload args %q: %v", args, err)
	}
	if len(qps) != a.qps {
		t.Fatalf("%d QPs in the workload's JSON, want %d", len(qps), a.qps)
	}
	for _, q := range qps {
		t.Logf("QP %#x: max_send_wr %d, max_inline_data %d, wrs %d, post_calls %d, inline %d, signaled %d, cqes_polled %d, enomem_sq_full %d",
			q.QPNum, q.MaxSendWR, q.MaxInlineData, q.WRs, q.PostCalls, q.Inline, q.Signaled, q.CQEsPolled, q.ENOMEMSQFull)
		if q.Truth != "application" {
			t.Errorf("truth %q, want application (a device run)", q.Truth)
		}
		if a.inline > 0 && a.size > q.MaxInlineData {
			t.Fatalf("-s %d is over rxe's max_inline_data %d: pick a smaller size", a.size, q.MaxInlineData)
		}
		type want struct {
			name      string
			got, want uint64
		}
		var checks []want
		switch fault, _, _ := strings.Cut(a.fault, "="); fault {
		case "":
			inline := uint64(0)
			if a.inline > 0 && a.size <= a.inline {
				inline = a.iters
			}
			sig := (a.iters + a.cqMod - 1) / a.cqMod
			calls := (a.iters + a.postList - 1) / a.postList
			checks = []want{
				{"wrs", q.WRs, a.iters},
				{"signaled", q.Signaled, sig},
				{"cqes_polled", q.CQEsPolled, sig},
				{"inline", q.Inline, inline},
				{"post_calls", q.PostCalls, calls},
				{"doorbells", q.Doorbells, calls},
				{"enomem_sq_full", q.ENOMEMSQFull, 0},
				{"app.enomem", q.App.ENOMEM, 0},
			}
		case "never-signal":
			// mlx5 retires send WQEs only through CQEs, so with none
			// requested the SQ fills at max_send_wr and every later post
			// fails. rxe retires a WQE once executed, CQE or not, so its
			// SQ may never fill. Either way, with -l 1 every WR either
			// went in or was one ENOMEM, and the first max_send_wr fit.
			if a.postList != 1 {
				t.Fatalf("the never-signal check counts one WR per failed call: use -l 1")
			}
			checks = []want{
				{"wrs + enomem_sq_full", q.WRs + q.ENOMEMSQFull, a.iters},
				{"app.enomem", q.App.ENOMEM, q.ENOMEMSQFull},
				{"signaled", q.Signaled, 0},
				{"cqes_polled", q.CQEsPolled, 0},
			}
			if q.WRs < min(a.iters, q.MaxSendWR) {
				t.Errorf("QP %#x: only %d WRs accepted before ENOMEM, want at least max_send_wr %d", q.QPNum, q.WRs, q.MaxSendWR)
			}
			if q.ENOMEMSQFull == 0 {
				t.Logf("QP %#x: no SQ overflow: the provider retired unsignaled WRs without CQEs (rxe does)", q.QPNum)
			} else {
				t.Logf("QP %#x: SQ overflowed after %d WRs (max_send_wr %d)", q.QPNum, q.WRs, q.MaxSendWR)
			}
		case "lazy-poll":
			// With -l 1 every WR either went in or was one ENOMEM; each
			// signaled WR's CQE is reaped by the final drain.
			if a.postList != 1 {
				t.Fatalf("the lazy-poll check counts one WR per failed call: use -l 1")
			}
			checks = []want{
				{"wrs + enomem_sq_full", q.WRs + q.ENOMEMSQFull, a.iters},
				{"app.enomem", q.App.ENOMEM, q.ENOMEMSQFull},
				{"cqes_polled", q.CQEsPolled, q.Signaled},
				{"post_calls", q.PostCalls, a.iters},
			}
		default:
			t.Fatalf("no check for --fault %s", a.fault)
		}
		checks = append(checks,
			want{"enomem_inline", q.ENOMEMInline, 0},
			want{"enomem_sge", q.ENOMEMSGE, 0},
			want{"einval", q.EINVAL, 0},
			want{"app.other_errors", q.App.OtherErrors, 0},
			want{"app.cqe_errors", q.App.CQEErrors, 0},
			want{"app.undrained", q.App.Undrained, 0},
			want{"app.attempts", q.App.Attempts, a.iters},
		)
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("QP %#x: %s = %d, want %d", q.QPNum, c.name, c.got, c.want)
			}
		}
	}
}
