// Package bpftest holds the one rule every test that needs root and BPF
// follows: skip with the reason on a machine without them, fail instead
// when SQSCOPE_REQUIRE_BPF=1 (CI), since a feature the kernel should have
// and doesn't is a failure there. Tests of a program CI installs
// (RequireTool) follow it too.
package bpftest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Require runs preflight (which says why BPF cannot be used, or nil) and
// skips or fails the test accordingly.
func Require(t testing.TB, preflight func() error) {
	t.Helper()
	check(t, preflight)
	hold(t, false)
}

// RequireTool returns the path of the program name, which the Debian
// package pkg brings (make deps installs it): without it the test skips,
// or fails under SQSCOPE_REQUIRE_BPF=1, where CI has installed it.
func RequireTool(t testing.TB, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		need(t, name, fmt.Errorf("%s is not installed (Debian package %s; make deps)", name, pkg))
	}
	return path
}

// check skips or fails the test when preflight says BPF cannot be used.
func check(t testing.TB, preflight func() error) {
	t.Helper()
	if err := preflight(); err != nil {
		need(t, "BPF", err)
	}
}

// need skips or fails the test, which needs what and cannot have it
// (err says why).
func need(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
		t.Fatalf("%s is required here (SQSCOPE_REQUIRE_BPF=1): %v", what, err)
	}
	t.Skipf("needs %s: %v", what, err)
}
