package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// tmux drives the real binary in a real terminal.
type tmux struct {
	t    testing.TB
	name string
}

// run runs a tmux command on the test's own tmux server (-L), so that one
// test's server shutting down never races another's start.
func (m tmux) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", m.name}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (m tmux) capture() string { return m.run("capture-pane", "-p", "-t", m.name) }

func (m tmux) waitFor(what string, re *regexp.Regexp, d time.Duration) string {
	m.t.Helper()
	deadline := time.Now().Add(bpftest.Timeout(m.t, d))
	for {
		s := m.capture()
		if re.MatchString(s) {
			return s
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("waiting for %s; screen:\n%s", what, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tuiUp matches the live view only: the QP table inside its titled box
// (the workload's own summary printed after a run names the QPs too).
var tuiUp = regexp.MustCompile(`(?s)send queues.*0x1c3\s+RC\s+\d+\s+[█░]`)

var qpRow = regexp.MustCompile(`(0x1c[0-9a-f])\s+RC\s+\d+\s+[█░]+\s+(\d+)`)

func occupancies(screen string) map[string]string {
	m := map[string]string{}
	for _, r := range qpRow.FindAllStringSubmatch(screen, -1) {
		m[r[1]] = r[2]
	}
	return m
}

func TestDemoInTmux(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed (make deps installs it)")
	}
	bin := sqscopeBin(t)
	m := tmux{t, fmt.Sprintf("sqscope-e2e-%d", time.Now().UnixNano())}
	m.run("new-session", "-d", "-s", m.name, "-x", "160", "-y", "45", "bash --norc --noprofile")
	t.Cleanup(func() { exec.Command("tmux", "-L", m.name, "kill-server").Run() })
	m.run("send-keys", "-t", m.name, bin+" demo -D 40 --fault-after 3; echo SQSCOPE_EXIT=$?", "Enter")

	first := m.waitFor("the demo's QPs", tuiUp, 30*time.Second)
	for _, qp := range []string{"0x1c0", "0x1c1", "0x1c2", "0x1c3"} {
		if !strings.Contains(first, qp) {
			t.Fatalf("QP %s not shown:\n%s", qp, first)
		}
	}
	// occupancy moves between captures
	a := occupancies(first)
	changed := false
	for i := 0; i < 20 && !changed; i++ {
		time.Sleep(300 * time.Millisecond)
		b := occupancies(m.capture())
		for qp, v := range a {
			if b[qp] != "" && b[qp] != v {
				changed = true
			}
		}
	}
	if !changed {
		t.Fatalf("occupancy did not change between captures: %v", a)
	}
	screen := m.waitFor("the overflow alert", regexp.MustCompile(`SQ overflow \(ENOMEM\)`), 30*time.Second)
	if !regexp.MustCompile(`0x1c2\s+RC\s+204\s+█{16}\s+204\s.*OVERFLOW`).MatchString(screen) {
		t.Fatalf("QP 0x1c2 not shown full and OVERFLOW:\n%s", screen)
	}
	if !regexp.MustCompile(`sqscope CPU \d+%`).MatchString(screen) {
		t.Fatalf("the header does not show sqscope's own CPU:\n%s", screen)
	}
	m.run("send-keys", "-t", m.name, "q")
	m.waitFor("exit status", regexp.MustCompile(`SQSCOPE_EXIT=\d+`), 45*time.Second)
	if s := m.capture(); !strings.Contains(s, "SQSCOPE_EXIT=0") {
		t.Fatalf("demo did not exit 0:\n%s", s)
	}
	// the terminal is usable: cooked mode, echo on, the shell answers
	m.run("send-keys", "-t", m.name, "stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo | tr '\\n' ' '; echo TTY_OK", "Enter")
	m.waitFor("the shell", regexp.MustCompile(`icanon echo TTY_OK`), 10*time.Second)

	// Ctrl-C quits too, and restores the terminal
	m.run("send-keys", "-t", m.name, "clear; "+bin+" demo -D 40; echo SQSCOPE_EXIT2=$?", "Enter")
	m.waitFor("the demo again", tuiUp, 30*time.Second)
	m.run("send-keys", "-t", m.name, "C-c")
	m.waitFor("exit status after Ctrl-C", regexp.MustCompile(`SQSCOPE_EXIT2=0`), 45*time.Second)
	m.run("send-keys", "-t", m.name, "stty -a | tr ' ' '\\n' | grep -x -e icanon -e echo | tr '\\n' ' '; echo TTY_OK2", "Enter")
	m.waitFor("the shell after Ctrl-C", regexp.MustCompile(`icanon echo TTY_OK2`), 10*time.Second)
}

// At 80×24 the overflowing QP's STATUS shows, and a jumps to it.
func TestDemoAt80x24(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed (make deps installs it)")
	}
	bin := sqscopeBin(t)
	m := tmux{t, fmt.Sprintf("sqscope-e2e80-%d", time.Now().UnixNano())}
	m.run("new-session", "-d", "-s", m.name, "-x", "80", "-y", "24", "bash --norc --noprofile")
	t.Cleanup(func() { exec.Command("tmux", "-L", m.name, "kill-server").Run() })
	m.run("send-keys", "-t", m.name, "clear; "+bin+" demo -D 40 --fault-after 2; echo SQSCOPE_EXIT=$?", "Enter")
	screen := m.waitFor("QP 0x1c2 overflowing", regexp.MustCompile(`0x1c2 .*OVERFLOW`), 40*time.Second)
	if !strings.Contains(screen, "? help") || !strings.Contains(screen, "q quit") {
		t.Fatalf("the footer's keys are cut at 80 columns:\n%s", screen)
	}
	m.run("send-keys", "-t", m.name, "a")
	m.waitFor("the detail of QP 0x1c2", regexp.MustCompile(`QP 0x1c2 \(450\) pid \d+`), 10*time.Second)
	m.run("send-keys", "-t", m.name, "q")
	m.waitFor("exit status", regexp.MustCompile(`SQSCOPE_EXIT=0`), 45*time.Second)
}
