package errsite

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// requireCC returns the C compiler, or skips (fails where CI requires
// the tests that build C).
func requireCC(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
			t.Fatal("no C compiler (cc) to build testdata/fakeprov.c")
		}
		t.Skip("no C compiler (cc) to build testdata/fakeprov.c")
	}
	return cc
}

// funcOffset is the file offset of an exported function, as a test
// finds it; the package itself takes offsets.
func funcOffset(t *testing.T, path, name string) uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name == name {
			for _, p := range f.Progs {
				if p.Type == elf.PT_LOAD && p.Vaddr <= s.Value && s.Value < p.Vaddr+p.Filesz {
					return s.Value - p.Vaddr + p.Off
				}
			}
		}
	}
	t.Fatalf("%s not in %s", name, path)
	return 0
}

type foundSite struct {
	fn string
	Site
}

// TestFakeProviderSitesFireOnlyOnFailure builds a miniature provider and
// runs its calls with a breakpoint on every site found: a healthy call
// must hit none, each failing call a site of its errno and cause, with
// the QP where the analysis says it is.
func TestFakeProviderSitesFireOnlyOnFailure(t *testing.T) {
	cc := requireCC(t)
	dir := t.TempDir()
	lib, harness := filepath.Join(dir, "libfakeprov.so"), filepath.Join(dir, "harness")
	for _, args := range [][]string{
		{"-O2", "-Wall", "-shared", "-fPIC", "-o", lib, "testdata/fakeprov.c"},
		{"-O2", "-Wall", "-o", harness, "testdata/harness.c", "-ldl"},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("strip", lib).CombinedOutput(); err != nil {
		t.Logf("strip: %v %s (analysing the unstripped library)", err, out)
	}
	b, err := Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var sites []foundSite
	var input strings.Builder
	for _, fn := range []struct {
		name string
		role Role
	}{{"fake_post_send", PostSend}, {"fake_post_send_db", PostSend}, {"fake_post_send_hoisted", PostSend}, {"fake_wr_complete", WRComplete}} {
		r, err := b.Analyze(Func{Start: funcOffset(t, lib, fn.name), Role: fn.role})
		if err != nil {
			t.Fatalf("%s: %v", fn.name, err)
		}
		t.Logf("%s:\n%s", fn.name, r)
		if r.CFAMismatch != 0 || r.CFAChecked == 0 {
			t.Errorf("%s: stack depth checked at %d instructions, %d disagree with the unwind table", fn.name, r.CFAChecked, r.CFAMismatch)
		}
		for _, s := range r.Sites {
			if s.QP.Kind == Unknown {
				t.Errorf("%s: site %#x: the QP's location is unknown", fn.name, s.Offset)
			}
			sites = append(sites, foundSite{fn.name, s})
			fmt.Fprintf(&input, "%x %d %d %d %d\n", s.Addr, s.QP.Kind, s.QP.Reg, s.QP.Off, s.QP.Adjust)
		}
	}
	cmd := exec.Command(harness, lib)
	cmd.Stdin = strings.NewReader(input.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, out)
	}
	t.Logf("calls (name, result, sites hit, QP misplaced):\n%s", out)
	want := map[string]struct {
		errno int
		cause Cause
	}{
		"post_send/healthy": {}, "post_send/healthy_inline": {}, "post_send_db/healthy": {},
		"post_send_hoisted/healthy": {}, "wr_complete/healthy": {},
		"post_send/opcode":             {22, CauseOpcode},
		"post_send/queue_full":         {12, CauseQueueFull},
		"post_send/too_many_sge":       {12, CauseTooManySGE},
		"post_send/inline":             {12, CauseInline},
		"post_send_db/queue_full":      {12, CauseQueueFull},
		"post_send_db/null_arg":        {22, CauseNullArg},
		"post_send_hoisted/queue_full": {12, CauseUnknown}, // no site: the write runs on healthy calls too
		"wr_complete/recorded":         {12, CauseQPState},
	}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			t.Fatalf("harness line %q", sc.Text())
		}
		w, ok := want[f[0]]
		if !ok {
			t.Fatalf("harness ran %s, which the test does not know", f[0])
		}
		seen++
		t.Run(f[0], func(t *testing.T) {
			ret, _ := strconv.Atoi(f[1])
			if ret != w.errno {
				t.Fatalf("returned %d, want %d", ret, w.errno)
			}
			if f[3] != "qpbad=0" {
				t.Errorf("the QP was not where the analysis said at %s of the hits", strings.TrimPrefix(f[3], "qpbad="))
			}
			var hit []foundSite
			if f[2] != "-" {
				for _, s := range strings.Split(f[2], ",") {
					i, _ := strconv.Atoi(s)
					hit = append(hit, sites[i])
				}
			}
			if w.errno == 0 || w.cause == CauseUnknown {
				if len(hit) != 0 {
					t.Fatalf("hit sites %v", hit)
				}
				return
			}
			if len(hit) == 0 {
				t.Fatal("failed without hitting a site")
			}
			for _, s := range hit {
				if !strings.HasPrefix(f[0], strings.TrimPrefix(s.fn, "fake_")+"/") {
					t.Errorf("hit site %#x of %s", s.Offset, s.fn)
				}
				if s.Errno != 0 && s.Errno != w.errno {
					t.Errorf("hit site %#x of errno %d", s.Offset, s.Errno)
				}
			}
			if !containsCause(hit[0].Causes, w.cause) {
				t.Errorf("site %#x gives causes %v, want %v among them", hit[0].Offset, hit[0].Causes, w.cause)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("harness reported %d calls, want %d", seen, len(want))
	}
}
