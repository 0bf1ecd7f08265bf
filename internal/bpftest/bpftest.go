// Package bpftest holds the one rule every test that needs root and BPF
// follows: skip with the reason on a machine without them, fail instead
// when SQSCOPE_REQUIRE_BPF=1 (CI), since a feature the kernel should have
// and doesn't is a failure there.
package bpftest

import (
	"os"
	"testing"
)

// Require runs preflight (which says why BPF cannot be used, or nil) and
// skips or fails the test accordingly.
func Require(t testing.TB, preflight func() error) {
	t.Helper()
	check(t, preflight)
	hold(t, false)
}

// check skips or fails the test when preflight says BPF cannot be used.
func check(t testing.TB, preflight func() error) {
	t.Helper()
	err := preflight()
	if err == nil {
		return
	}
	if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
		t.Fatalf("BPF is required here (SQSCOPE_REQUIRE_BPF=1): %v", err)
	}
	t.Skipf("needs BPF: %v", err)
}
