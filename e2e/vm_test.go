package e2e

import (
	"bufio"
	"bytes"
	"debug/elf"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
)

//go:embed guest/init guest/run.sh
var guestFiles embed.FS

// Modules the initramfs loads before it can mount the host root; their
// dependencies come from the guest kernel's modules.dep.
var initModules = []string{"virtio_pci", "9pnet_virtio", "9p"}

// Modules the guest needs from the host root once it runs there (checked
// up front so that a kernel without them fails before booting).
var guestModules = []string{"rdma_rxe", "dummy"}

const (
	// guestTimeout bounds one whole guest run, boot to power-off: 270 s
	// for the commands before the WRITE control of lazy polling, plus
	// what that one costs under TCG (about 12 s in the guest), plus the
	// perftest client traced with -p (about 29 s: it runs 20 s, since
	// sqscope takes some 10 s to load and attach under TCG), plus the
	// sentinel's two runs (about 33 s and 23 s) and the client traced
	// with -p against its untraced run (two runs of 30 s and the attach).
	guestTimeout = 450 * time.Second
	// kvmUserspaceDeadline is how long a KVM boot may take to reach the
	// initramfs before the run falls back to TCG.
	kvmUserspaceDeadline = 10 * time.Second
	guestMemory          = "512"
	// maxSlowness bounds how much longer than on a quiet host the guest's
	// timeouts may be: 5 × 450 s stays within the 40 minutes make test
	// gives a package (a host with 4 busy loops on 2 CPUs gives a busy
	// thread about a third of one, less with more load).
	maxSlowness     = 5
	markerInitramfs = "sqscope-e2e: initramfs"
)

// guestKit is what a guest run needs from the host.
type guestKit struct {
	qemu    string
	kernel  string // bzImage (vmlinuz)
	kver    string
	modDir  string // /lib/modules/<kver>
	busybox string // statically linked
}

// required reports whether a missing piece fails the test rather than
// skipping it (the requireBPF convention: CI sets SQSCOPE_REQUIRE_BPF=1).
func required() (bool, string) {
	if v := os.Getenv("SQSCOPE_REQUIRE_GUEST"); v != "" && v != "0" {
		return true, "SQSCOPE_REQUIRE_GUEST=" + v
	}
	if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
		return true, "SQSCOPE_REQUIRE_BPF=1"
	}
	return false, ""
}

// requireGuest skips the test with the reason, or fails it when the guest
// test is required.
func requireGuest(t *testing.T, reason string) {
	t.Helper()
	if req, why := required(); req {
		t.Fatalf("the guest test is required here (%s): %s", why, reason)
	}
	t.Skipf("skipping the guest test: %s (set SQSCOPE_REQUIRE_GUEST=1 to make this a failure)", reason)
}

// findKit locates qemu, a kernel with its modules and a static busybox. The
// error names what is missing and the Debian package that provides it.
func findKit() (*guestKit, error) {
	var missing []string
	k := &guestKit{}
	var err error
	if k.qemu, err = exec.LookPath("qemu-system-x86_64"); err != nil {
		missing = append(missing, "qemu-system-x86_64 not on PATH (Debian package qemu-system-x86)")
	}
	if err := findKernel(k); err != nil {
		missing = append(missing, err.Error())
	}
	if err := findBusybox(k); err != nil {
		missing = append(missing, err.Error())
	}
	if runtime.GOARCH != "amd64" {
		missing = append(missing, "the guest test boots x86-64 only, this is "+runtime.GOARCH)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s; 'make deps' installs them", strings.Join(missing, "; "))
	}
	return k, nil
}

// findKernel picks SQSCOPE_GUEST_KERNEL (a vmlinuz whose modules are under
// /lib/modules/<version>), or else the newest /boot/vmlinuz-<version> whose
// modules include everything the guest loads.
func findKernel(k *guestKit) error {
	if p := os.Getenv("SQSCOPE_GUEST_KERNEL"); p != "" {
		ver := strings.TrimPrefix(filepath.Base(p), "vmlinuz-")
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("SQSCOPE_GUEST_KERNEL: %w", err)
		}
		k.kernel, k.kver, k.modDir = p, ver, filepath.Join("/lib/modules", ver)
		if _, err := moduleOrder(k.modDir, append(slices.Clone(initModules), guestModules...)); err != nil {
			return fmt.Errorf("SQSCOPE_GUEST_KERNEL %s: %w", p, err)
		}
		return nil
	}
	vers, _ := os.ReadDir("/lib/modules")
	var reasons []string
	for i := len(vers) - 1; i >= 0; i-- {
		ver := vers[i].Name()
		kernel := filepath.Join("/boot", "vmlinuz-"+ver)
		if _, err := os.Stat(kernel); err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: no %s", ver, kernel))
			continue
		}
		modDir := filepath.Join("/lib/modules", ver)
		if _, err := moduleOrder(modDir, append(slices.Clone(initModules), guestModules...)); err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", ver, err))
			continue
		}
		k.kernel, k.kver, k.modDir = kernel, ver, modDir
		return nil
	}
	msg := "no guest kernel: need /boot/vmlinuz-VERSION and /lib/modules/VERSION with rdma_rxe and 9p (Debian package linux-image-amd64)"
	if len(reasons) > 0 {
		msg += " [" + strings.Join(reasons, "; ") + "]"
	}
	return errors.New(msg)
}

func findBusybox(k *guestKit) error {
	p := os.Getenv("SQSCOPE_GUEST_BUSYBOX")
	if p == "" {
		for _, c := range []string{"/bin/busybox", "/usr/bin/busybox"} {
			if _, err := os.Stat(c); err == nil {
				p = c
				break
			}
		}
	}
	if p == "" {
		return errors.New("no busybox (Debian package busybox-static)")
	}
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("busybox %s: %v (Debian package busybox-static)", p, err)
	}
	defer f.Close()
	for _, ph := range f.Progs {
		if ph.Type == elf.PT_INTERP {
			return fmt.Errorf("busybox %s is dynamically linked; the initramfs needs a static one (Debian package busybox-static)", p)
		}
	}
	k.busybox = p
	return nil
}

// moduleOrder resolves names to module files (relative to modDir) in load
// order, dependencies first, from modules.dep. Built-in modules are left
// out.
func moduleOrder(modDir string, names []string) ([]string, error) {
	dep, err := os.ReadFile(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[modName(l)] = true
		}
	}
	path := map[string]string{}
	deps := map[string][]string{}
	for _, line := range strings.Split(string(dep), "\n") {
		file, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n := modName(file)
		path[n] = file
		for _, d := range strings.Fields(rest) {
			deps[n] = append(deps[n], modName(d))
		}
	}
	var order []string
	seen := map[string]bool{}
	var visit func(n string) error
	visit = func(n string) error {
		if seen[n] {
			return nil
		}
		seen[n] = true
		if _, ok := path[n]; !ok {
			if builtin[n] {
				return nil
			}
			return fmt.Errorf("module %s not in %s/modules.dep", n, modDir)
		}
		for _, d := range deps[n] {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, path[n])
		return nil
	}
	for _, n := range names {
		if err := visit(strings.ReplaceAll(n, "-", "_")); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// vm is one running QEMU.
type vm struct {
	cmd  *exec.Cmd
	done chan error // receives Wait's result, then is closed

	mu       sync.Mutex
	console  bytes.Buffer // guest serial console
	stderr   bytes.Buffer
	markerAt time.Duration // when markerInitramfs appeared (0: not yet)
	marker   chan struct{}
}

func (v *vm) consoleText() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.console.String() + v.stderr.String()
}

// kill ends this QEMU by its PID; it is safe to call more than once.
func (v *vm) kill() {
	if v.cmd.Process != nil {
		v.cmd.Process.Kill()
	}
}

// startVM starts QEMU. The caller must call kill and wait for done on every
// path; runGuest registers that with t.Cleanup.
func startVM(k *guestKit, kernel, initrd, share, accel string) (*vm, error) {
	args := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-m", guestMemory, "-smp", "2",
		"-kernel", kernel, "-initrd", initrd,
		"-append", "console=ttyS0 quiet loglevel=4 panic=-1 rdinit=/init",
		"-serial", "stdio",
		"-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
		"-fsdev", "local,id=e2e,path=" + strings.ReplaceAll(share, ",", ",,") + ",security_model=none",
		"-device", "virtio-9p-pci,fsdev=e2e,mount_tag=e2e",
	}
	switch accel {
	case "kvm":
		// Not -cpu host: where /dev/kvm is not hardware KVM, QEMU aborts
		// setting host MSRs.
		args = append(args, "-accel", "kvm")
	default:
		args = append(args, "-accel", "tcg,thread=multi")
	}
	v := &vm{cmd: exec.Command(k.qemu, args...), done: make(chan error, 1), marker: make(chan struct{})}
	v.cmd.Stderr = &lockedWriter{mu: &v.mu, w: &v.stderr}
	// A test binary killed outright must not leave QEMU running.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := v.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	t0 := time.Now()
	go func() {
		// Pdeathsig follows the thread that started the child: keep this
		// goroutine on its thread until QEMU is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := v.cmd.Start(); err != nil {
			started <- err
			close(v.done)
			return
		}
		started <- nil
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			v.mu.Lock()
			v.console.WriteString(line + "\n")
			if v.markerAt == 0 && strings.Contains(line, markerInitramfs) {
				v.markerAt = time.Since(t0)
				close(v.marker)
			}
			v.mu.Unlock()
		}
		io.Copy(io.Discard, out) // never leave QEMU blocked on a full pipe
		v.done <- v.cmd.Wait()
		close(v.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", k.qemu, err)
	}
	return v, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// guestRun is the outcome of one boot.
type guestRun struct {
	accel     string
	kernel    string // "vmlinux (PVH)" or "bzImage"
	boot      time.Duration
	initramfs time.Duration // from QEMU's start to the initramfs marker
	console   string
}

// bootFiles are the kernel and initramfs one boot uses.
type bootFiles struct {
	kernel, kind, initrd string
	took                 time.Duration
}

// prepareBoot writes the initramfs into work and, unless
// SQSCOPE_GUEST_BZIMAGE=1, extracts the PVH kernel there (falling back to
// the bzImage when it cannot). Safe to run concurrently with the build.
func prepareBoot(k *guestKit, work string) (bootFiles, []string, error) {
	t0 := time.Now()
	var notes []string
	f := bootFiles{kernel: filepath.Join(work, "vmlinux"), kind: "vmlinux (PVH)", initrd: filepath.Join(work, "initramfs.cpio")}
	if err := writeInitramfs(k, f.initrd); err != nil {
		return f, nil, fmt.Errorf("building the initramfs: %w", err)
	}
	if os.Getenv("SQSCOPE_GUEST_BZIMAGE") == "1" {
		f.kernel, f.kind = k.kernel, "bzImage"
	} else if err := extractVmlinux(k.kernel, f.kernel); err != nil {
		notes = append(notes, fmt.Sprintf("booting the bzImage: cannot extract a PVH kernel from %s: %v", k.kernel, err))
		f.kernel, f.kind = k.kernel, "bzImage"
	}
	f.took = time.Since(t0)
	return f, notes, nil
}

// runGuest boots the guest once with share as its results share and waits
// for it to power off. QEMU is killed by its PID on every path: timeout,
// test failure, or the test ending. With SQSCOPE_GUEST_KVM set it tries KVM
// first and falls back to TCG when that boot dies or does not reach the
// initramfs in time.
func runGuest(t *testing.T, k *guestKit, f bootFiles, share string) guestRun {
	t.Helper()
	deadline := time.Now().Add(time.Duration(float64(guestTimeout) * guestSlowness(t)))
	if d, ok := t.Deadline(); ok && d.Add(-5*time.Second).Before(deadline) {
		deadline = d.Add(-5 * time.Second)
	}
	accels := []string{"tcg"}
	if v := os.Getenv("SQSCOPE_GUEST_KVM"); v != "" && v != "0" {
		accels = []string{"kvm", "tcg"}
	}
	for i, accel := range accels {
		fallback := i < len(accels)-1
		start := time.Now()
		v, err := startVM(k, f.kernel, f.initrd, share, accel)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			v.kill()
			<-v.done
		})
		var firstDeadline <-chan time.Time
		if fallback {
			firstDeadline = time.After(kvmUserspaceDeadline)
		}
		timeout := time.After(time.Until(deadline))
		marker := v.marker
		var waitErr error
		exited := false
	wait:
		for {
			select {
			case waitErr = <-v.done:
				exited = true
				break wait
			case <-marker:
				marker, firstDeadline = nil, nil
			case <-firstDeadline:
				break wait
			case <-timeout:
				v.kill()
				<-v.done
				t.Fatalf("guest run (%s) did not finish within %v; QEMU (pid %d) killed\ncommands:\n%s\nconsole:\n%s",
					accel, time.Since(start).Round(time.Second), v.cmd.Process.Pid, guestProgress(share), tail(v.consoleText(), 60))
			}
		}
		if fallback && marker != nil {
			why := fmt.Sprintf("did not reach the initramfs within %v", kvmUserspaceDeadline)
			if exited {
				why = fmt.Sprintf("failed before the initramfs (%v): %s", waitErr, tail(v.consoleText(), 3))
			}
			t.Logf("%s boot %s; QEMU (pid %d) killed, falling back to %s", accel, why, v.cmd.Process.Pid, accels[i+1])
			v.kill()
			<-v.done
			os.RemoveAll(filepath.Join(share, "out"))
			continue
		}
		run := guestRun{accel: accel, kernel: f.kind, boot: time.Since(start), console: v.consoleText()}
		v.mu.Lock()
		run.initramfs = v.markerAt
		v.mu.Unlock()
		os.WriteFile(filepath.Join(share, "console.log"), []byte(run.console), 0o644)
		if waitErr != nil {
			t.Fatalf("QEMU (%s, pid %d) failed: %v; console:\n%s", accel, v.cmd.Process.Pid, waitErr, tail(run.console, 60))
		}
		return run
	}
	t.Fatalf("no accelerator booted the guest")
	return guestRun{}
}

// guestProgress says, per command of a guest run that was cut short, how
// it ended, and shows the output of the one that was still running.
func guestProgress(share string) string {
	scripts, _ := filepath.Glob(filepath.Join(share, "cmds", "*.sh"))
	var b strings.Builder
	for _, sc := range scripts {
		id := strings.TrimSuffix(filepath.Base(sc), ".sh")
		dir := filepath.Join(share, "out", id)
		r, err := readResult(dir)
		switch {
		case err == nil:
			fmt.Fprintf(&b, "  %s: exit %d after %.2f s\n", id, r.status, r.seconds)
		case dirExists(dir):
			o, _ := os.ReadFile(filepath.Join(dir, "stdout"))
			e, _ := os.ReadFile(filepath.Join(dir, "stderr"))
			sh, _ := os.ReadFile(sc)
			fmt.Fprintf(&b, "  %s: STILL RUNNING when the guest was killed: %s\n    stdout:\n%s\n    stderr:\n%s\n",
				id, strings.TrimSpace(string(sh)), tail(string(o), 15), tail(string(e), 15))
		default:
			fmt.Fprintf(&b, "  %s: not started\n", id)
		}
	}
	return b.String()
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cmdResult is what the guest wrote for one command.
type cmdResult struct {
	status         int // exit status; 124 is the guest-side timeout
	stdout, stderr string
	seconds        float64 // guest uptime from start to end
	dir            string  // the command's working directory on the host
}

func readResult(dir string) (cmdResult, error) {
	r := cmdResult{dir: dir}
	st, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return r, errors.New("the guest did not run it (no status file)")
	}
	if r.status, err = strconv.Atoi(strings.TrimSpace(string(st))); err != nil {
		return r, fmt.Errorf("status file: %v", err)
	}
	o, _ := os.ReadFile(filepath.Join(dir, "stdout"))
	e, _ := os.ReadFile(filepath.Join(dir, "stderr"))
	r.stdout, r.stderr = string(o), string(e)
	if tm, err := os.ReadFile(filepath.Join(dir, "time")); err == nil {
		var a, b float64
		if _, err := fmt.Sscan(string(tm), &a, &b); err == nil {
			r.seconds = b - a
		}
	}
	return r, nil
}

var (
	slownessOnce sync.Once
	slowness     float64
)

// guestSlowness is how many times longer than on a quiet host of this
// kind the guest may take: under TCG it runs on the host's CPU, so on a
// busy host its timeouts, the whole run's and each command's, stretch by
// the share of a CPU a busy thread gets (measured once, over half a
// second), up to maxSlowness.
func guestSlowness(t *testing.T) float64 {
	slownessOnce.Do(func() {
		share := bpftest.CPUShare(500 * time.Millisecond)
		slowness = min(maxSlowness, max(1, 1/share))
		t.Logf("a busy thread gets %.0f%% of a CPU here: the guest's timeouts ×%.1f", 100*share, slowness)
	})
	return slowness
}
