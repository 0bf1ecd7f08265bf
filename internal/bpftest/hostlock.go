package bpftest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A host-wide trace (-a) stops every verbs process on the host at its
// first control-path call it has not seen, and continues it once its own
// probes are placed: a test tracing its own target at the same time
// (another package's test binary, run in parallel by go test) could have
// its target continued before its probes are in place. So every BPF test
// holds a shared lock for its duration and a host-wide test an exclusive
// one. A host-wide test first takes the gate, so that tests starting
// meanwhile wait for it instead of starving it.
var (
	lockPath = filepath.Join(os.TempDir(), "sqscope-bpftest.lock")
	gatePath = filepath.Join(os.TempDir(), "sqscope-bpftest.gate")
)

// RequireHost is Require for a test that traces the whole host: it runs
// alone among the BPF tests of every package.
func RequireHost(t testing.TB, preflight func() error) {
	t.Helper()
	check(t, preflight)
	hold(t, true)
}

// hold takes the lock shared (exclusive for a host-wide test) until the
// test ends.
func hold(t testing.TB, exclusive bool) {
	t.Helper()
	gate, lock := openLock(t, gatePath), openLock(t, lockPath)
	if exclusive {
		flock(t, gate, syscall.LOCK_EX)
		flock(t, lock, syscall.LOCK_EX)
		t.Cleanup(func() { lock.Close(); gate.Close() })
		return
	}
	flock(t, gate, syscall.LOCK_SH)
	flock(t, lock, syscall.LOCK_SH)
	gate.Close()
	t.Cleanup(func() { lock.Close() })
}

func openLock(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatalf("test lock: %v", err)
	}
	return f
}

func flock(t testing.TB, f *os.File, how int) {
	t.Helper()
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("test lock %s: %v", f.Name(), err)
		}
		return
	}
}
