package probe

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/trace"
)

// The scan helper is this test binary run again with scanHelperEnv set: it
// lays out in its heap what a verbs process has (a struct ibv_context
// whose ops point into its executable, a PD and a CQ of it, QPs of them,
// one with ibv_qp_ex builders) next to a decoy that only looks like an ops
// table, allocates ballast, prints where the objects are, and waits.
const scanHelperEnv = "SQSCOPE_SCAN_HELPER"

// Functions whose addresses the fake ops table holds: never called.
func fakePostSend()   { println("post_send") }
func fakePollCQ()     { println("poll_cq") }
func fakePostRecv()   { println("post_recv") }
func fakeWRStart()    { println("wr_start") }
func fakeWRComplete() { println("wr_complete") }
func fakeWRAbort()    { println("wr_abort") }
func fakeWRSend()     { println("wr_send") }
func fakeStartPoll()  { println("start_poll") }
func fakeNextPoll()   { println("next_poll") }
func fakeEndPoll()    { println("end_poll") }

func fnAddr(f func()) uint64 { return uint64(reflect.ValueOf(f).Pointer()) }

// helperLayout is what the helper prints.
type helperLayout struct {
	Context uint64
	QPs     []uint64
	WRStart uint64
}

var keep [][]uint64 // the helper's objects and ballast, kept reachable

func words(n int) ([]uint64, uint64) {
	w := make([]uint64, n)
	keep = append(keep, w)
	return w, uint64(uintptr(unsafe.Pointer(&w[0])))
}

func setU32(w []uint64, off int, v uint32) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
	*(*uint32)(unsafe.Pointer(&b[off])) = v
}

func scanHelper(mode string) {
	var out helperLayout
	mib := 0
	for _, m := range strings.Split(mode, ",") {
		if v, ok := strings.CutPrefix(m, "ballast="); ok {
			mib, _ = strconv.Atoi(v)
		}
	}
	if strings.Contains(mode, "fakes") {
		ctx, ctxA := words(41)
		dev, devA := words(4)
		dev[0] = 1
		ctx[0] = devA
		ctx[(bpf.IBVContextOps+bpf.IBVOpsPollCQ)/8] = fnAddr(fakePollCQ)
		ctx[(bpf.IBVContextOps+bpf.IBVOpsPostSend)/8] = fnAddr(fakePostSend)
		ctx[(bpf.IBVContextOps+bpf.IBVOpsPostRecv)/8] = fnAddr(fakePostRecv)
		// decoys: three functions of one file, but nothing points at them
		for range 10 {
			decoy, _ := words(41)
			copy(decoy, ctx)
		}
		pd, pdA := words(2)
		pd[0] = ctxA
		cq, cqA := words(bpf.IBVCQXSize / 8) // an extended CQ
		cq[0] = ctxA
		for _, f := range bpf.CQXFuncs {
			switch f.Role {
			case "start_poll":
				cq[f.Off/8] = fnAddr(fakeStartPoll)
			case "next_poll":
				cq[f.Off/8] = fnAddr(fakeNextPoll)
			case "end_poll":
				cq[f.Off/8] = fnAddr(fakeEndPoll)
			}
		}
		for i, typ := range []uint32{2, 4} { // RC, UD
			qp, qpA := words(bpf.IBVQPXSize / 8)
			qp[bpf.IBVQPContext/8], qp[2] = ctxA, pdA
			qp[bpf.IBVQPSendCQ/8], qp[bpf.IBVQPRecvCQ/8] = cqA, cqA
			setU32(qp, bpf.IBVQPQPNum, uint32(0x1c0+i))
			setU32(qp, bpf.IBVQPState, 3)
			setU32(qp, bpf.IBVQPQPType, typ)
			if i == 1 { // an extended QP
				for _, f := range bpf.QPXFuncs {
					switch f.Role {
					case "wr_start":
						qp[f.Off/8] = fnAddr(fakeWRStart)
					case "wr_complete":
						qp[f.Off/8] = fnAddr(fakeWRComplete)
					case "wr_abort":
						qp[f.Off/8] = fnAddr(fakeWRAbort)
					case "wr_send":
						qp[f.Off/8] = fnAddr(fakeWRSend)
					}
				}
				out.WRStart = fnAddr(fakeWRStart)
			}
			out.QPs = append(out.QPs, qpA)
		}
		out.Context = ctxA
	}
	if mib > 0 {
		// a heap of data, not zeros: every word is looked at
		for i := 0; i < mib; i++ {
			b, _ := words(1 << 17)
			for j := range b {
				b[j] = uint64(i*131071+j) * 0x9e3779b97f4a7c15
			}
		}
	}
	json.NewEncoder(os.Stdout).Encode(out)
	time.Sleep(time.Hour)
}

// startScanHelper runs the helper and returns it and its layout.
func startScanHelper(t testing.TB, mode string) (*exec.Cmd, helperLayout) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), scanHelperEnv+"="+mode)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var l helperLayout
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		t.Fatalf("scan helper: %v", err)
	}
	if err := json.Unmarshal(line, &l); err != nil {
		t.Fatalf("scan helper: %v: %s", err, line)
	}
	return cmd, l
}

func TestScanDataPath(t *testing.T) {
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		mode      string
		maxCtx    int // maxContextCandidates, when not 0
		pid       int // instead of a helper
		bounds    ScanBounds
		contexts  int
		qps       []uint32 // numbers
		wantErr   string
		wantBound bool
	}{
		{name: "context and QPs found, decoys not", mode: "fakes", contexts: 1, qps: []uint32{0x1c0, 0x1c1}},
		{name: "more would-be contexts than kept", mode: "fakes", maxCtx: 1, contexts: 1, qps: []uint32{0x1c0, 0x1c1}},
		{name: "no verbs objects", mode: "none"},
		{name: "byte bound", mode: "ballast=64", bounds: ScanBounds{MaxBytes: 1 << 20}, wantBound: true,
			wantErr: "byte bound 1 MiB (--scan-mib)"},
		{name: "process gone", pid: gone.Process.Pid, wantErr: fmt.Sprintf("process %d does not exist", gone.Process.Pid)},
		{name: "bad pid", pid: -4, wantErr: "bad process id -4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pid, layout := c.pid, helperLayout{}
			if c.mode != "" {
				var cmd *exec.Cmd
				cmd, layout = startScanHelper(t, c.mode)
				pid = cmd.Process.Pid
			}
			if c.maxCtx != 0 {
				defer func(v int) { maxContextCandidates = v }(maxContextCandidates)
				maxContextCandidates = c.maxCtx
			}
			res, err := ScanDataPath(pid, c.bounds)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || errors.Is(err, ErrScanBound) != c.wantBound {
					t.Fatalf("err %v, want %q (bound %v)", err, c.wantErr, c.wantBound)
				}
				if c.wantBound && (res.Cut == "" || res.Bytes != c.bounds.MaxBytes) {
					t.Errorf("cut %q after %d bytes", res.Cut, res.Bytes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Contexts) != c.contexts || res.Bytes == 0 || res.Mappings == 0 || res.Duration <= 0 {
				t.Fatalf("%d contexts (want %d), %d bytes of %d mappings in %v", len(res.Contexts), c.contexts, res.Bytes, res.Mappings, res.Duration)
			}
			if c.contexts > 0 {
				ctx := res.Contexts[0]
				if ctx.Addr != layout.Context || ctx.PostSend != fnAddr(fakePostSend) || ctx.PollCQ != fnAddr(fakePollCQ) ||
					ctx.PostRecv != fnAddr(fakePostRecv) || ctx.Provider == "" {
					t.Errorf("context %+v, want at %#x", ctx, layout.Context)
				}
			}
			var got []uint32
			for i, q := range res.QPs {
				got = append(got, q.QPNum)
				if q.Addr != layout.QPs[i] || q.Context != layout.Context || q.State != 3 || q.SendCQ == 0 ||
					q.CQFuncs["start_poll"] != fnAddr(fakeStartPoll) || q.CQFuncs["next_poll"] != fnAddr(fakeNextPoll) ||
					q.CQFuncs["end_poll"] != fnAddr(fakeEndPoll) {
					t.Errorf("QP %+v", q)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.qps) {
				t.Fatalf("QPs %v, want %v", got, c.qps)
			}
			if len(res.QPs) == 2 {
				if res.QPs[0].Type != 2 || res.QPs[1].Type != 4 || res.QPs[0].WRFuncs != nil ||
					res.QPs[1].WRFuncs["wr_start"] != layout.WRStart || res.QPs[1].WRFuncs["wr_send"] != fnAddr(fakeWRSend) {
					t.Errorf("QP types %d %d, builders %v and %v", res.QPs[0].Type, res.QPs[1].Type, res.QPs[0].WRFuncs, res.QPs[1].WRFuncs)
				}
			}
		})
	}
}

// TestScanAccessError says what access the scan lacks.
func TestScanAccessError(t *testing.T) {
	err := memAccessErr(os.Getpid(), os.ErrPermission)
	if !strings.Contains(err.Error(), "CAP_SYS_PTRACE") && !strings.Contains(err.Error(), "ptrace_scope is 3") {
		t.Errorf("%v", err)
	}
}

// BenchmarkAttachRunning attaches to a process with 1 GiB of heap laid out
// as a verbs process (the scan helper): how fast the scan reads its
// memory, and how long the process is stopped while the probes of what
// it found are placed.
func BenchmarkAttachRunning(b *testing.B) {
	bpftest.Require(b, Preflight)
	const heapMiB = 1024
	cmd, _ := startScanHelper(b, fmt.Sprintf("fakes,ballast=%d", heapMiB))
	pid := cmd.Process.Pid
	var bytes int64
	var scan, stop time.Duration
	for i := 0; i < b.N; i++ {
		t, err := Open(Options{PID: pid, FlushInterval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		var sc *trace.Scan
		for _, ev := range t.pre {
			if s, ok := ev.(*trace.Scan); ok {
				sc = s
			}
		}
		t.Close()
		if sc == nil || sc.Contexts != 1 || sc.QPs != 2 || sc.StopNS == 0 || sc.Bytes < heapMiB<<20 {
			b.Fatalf("scan %+v: want the helper's context and QPs, the process stopped, >= %d MiB read", sc, heapMiB)
		}
		bytes += int64(sc.Bytes)
		scan += time.Duration(sc.DurationNS)
		stop += time.Duration(sc.StopNS)
	}
	// the scan alone, by the CPU time it took too: on a loaded machine the
	// wall time measures the other load as much as the scan
	cpu0, wall0 := cpuTime(), time.Now()
	res, err := ScanDataPath(pid, ScanBounds{})
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	if err != nil || len(res.QPs) != 2 {
		b.Fatalf("scan: %v, %d QPs", err, len(res.QPs))
	}
	b.ReportMetric(float64(res.Bytes)/(1<<30)/cpu.Seconds(), "scan-GiB/cpu-s")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "scan-cpu-share")
	b.ReportMetric(float64(bytes)/(1<<30)/scan.Seconds(), "scan-GiB/s")
	b.ReportMetric(float64(scan.Milliseconds())/float64(b.N), "scan-ms")
	b.ReportMetric(float64(stop.Microseconds())/1e3/float64(b.N), "stop-ms")
	b.ReportMetric(float64(bytes)/(1<<20)/float64(b.N), "scanned-MiB")
}

// A process that exits while its memory is read: one clear error.
func TestScanProcessExits(t *testing.T) {
	cmd, _ := startScanHelper(t, "ballast=768")
	pid := cmd.Process.Pid
	go func() {
		time.Sleep(30 * time.Millisecond)
		cmd.Process.Kill()
	}()
	res, err := ScanDataPath(pid, ScanBounds{})
	want := fmt.Sprintf("process %d exited during the memory scan", pid)
	if err == nil || err.Error() != want {
		t.Fatalf("err %v after %d MiB in %v, want %q", err, res.Bytes>>20, res.Duration, want)
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
