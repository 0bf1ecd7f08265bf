package probe

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/trace"
)

// dlopenTarget is testdata/dlopen_target.c and two copies (two files, two
// inodes) of the provider library it loads at run time.
type dlopenTarget struct {
	bin        string
	lib, lib2  string
	dataPathFn map[string]string // role -> static function in the library
}

func buildDlopenTarget(t *testing.T) dlopenTarget {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
			t.Fatal("no C compiler (cc) to build testdata/dlopen_*.c")
		}
		t.Skip("no C compiler (cc) to build testdata/dlopen_*.c")
	}
	dir := t.TempDir()
	d := dlopenTarget{
		bin:  filepath.Join(dir, "dlopen_target"),
		lib:  filepath.Join(dir, "libsqfake-rdmav34.so"),
		lib2: filepath.Join(dir, "libsqfake2-rdmav34.so"),
		dataPathFn: map[string]string{
			"post_send": "prov_post_send",
			"poll_cq":   "prov_poll_cq",
			"post_recv": "prov_post_recv",
		},
	}
	for _, args := range [][]string{
		{"-O2", "-g", "-Wall", "-shared", "-fPIC", "-fvisibility=hidden", "-o", d.lib, "testdata/dlopen_provider.c"},
		{"-O2", "-g", "-Wall", "-shared", "-fPIC", "-fvisibility=hidden", "-o", d.lib2, "testdata/dlopen_provider.c"},
		{"-O2", "-g", "-Wall", "-o", d.bin, "testdata/dlopen_target.c", "-ldl"},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// The provider must not be mapped when the target starts.
	f, err := elf.Open(d.bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	needed, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range needed {
		if strings.Contains(n, "sqfake") || strings.Contains(n, "ibverbs") {
			t.Fatalf("%s links %s at load time", d.bin, n)
		}
	}
	return d
}

// dlopenStats is what testdata/dlopen_target.c says it did.
type dlopenStats struct {
	targetStats
	Loads, Moved uint64
}

// traceHeld runs bin held, traced with opts, and returns its output, the
// events and the tracer.
func traceHeld(t *testing.T, opts Options, bin string, args ...string) ([]byte, []trace.Event, *Tracer) {
	t.Helper()
	return traceCmd(t, opts, exec.Command(bin, args...))
}

// TestDlopenedProvider: a provider library the target dlopen()s after the
// tracer attached is found through the ops pointers its QP creation
// reveals, its static data-path functions are probed inside the library,
// and every call through them is traced.
func TestDlopenedProvider(t *testing.T) {
	requireBPF(t)
	d := buildDlopenTarget(t)
	for _, c := range []struct {
		name string
		opts Options
		args []string
		libs []string // the files the data path must be probed in
	}{
		{"once", Options{}, []string{"once", d.lib}, []string{d.lib}},
		{"once perf-event uprobes", Options{perfEventUprobes: true}, []string{"once", d.lib}, []string{d.lib}},
		// unloaded and loaded again at other addresses: the same file and
		// offsets, so no second attachment, but the process must be
		// stopped again and the new mapping probed
		{"reload elsewhere", Options{}, []string{"reload", d.lib}, []string{d.lib}},
		{"two libraries", Options{}, []string{"two", d.lib, d.lib2}, []string{d.lib, d.lib2}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			out, evs, tr := traceHeld(t, c.opts, d.bin, c.args...)
			var want dlopenStats
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &want); err != nil {
				t.Fatalf("target output %q: %v", out, err)
			}
			got := tallyEvents(evs)

			if len(got.AttachErrors) > 0 {
				t.Errorf("attach errors: %v", got.AttachErrors)
			}
			if got.Attached["create_qp/symbol"] == 0 {
				t.Errorf("sqsim_create_qp not hooked: %v", got.Attached)
			}
			if c.args[0] == "reload" && want.Moved != 1 {
				t.Fatalf("the second load did not move: %+v", want)
			}
			checkDataPathInLibs(t, d, evs, c.libs)
			// each QP names the library its post_send is in: its provider
			for _, e := range evs {
				if q, ok := e.(*trace.QPCreate); ok && !slices.ContainsFunc(c.libs, func(l string) bool { return sameFile(q.Lib, l) }) {
					t.Errorf("QP %#x: post_send in %q, want one of %v", q.QPNum, q.Lib, c.libs)
				}
			}

			if tr.stops != int(want.Loads) {
				t.Errorf("stopped %d times for %d loads of a provider", tr.stops, want.Loads)
			}
			if got.Lost != 0 || tr.Lost() != 0 {
				t.Errorf("lost %d events (Lost() %d)", got.Lost, tr.Lost())
			}
			if got.Exits != 1 || got.ExitCode != 0 {
				t.Errorf("exits %d code %d, want 1 exit with 0", got.Exits, got.ExitCode)
			}
			if got.Via["sqsim_create_qp"] != int(want.QPs) || len(got.Via) != 1 {
				t.Errorf("QPs created via %v, want %d via sqsim_create_qp", got.Via, want.QPs)
			}
			checkCounts(t, got, want.targetStats, "qps", "modifies", "destroys", "post calls", "post WRs", "post accepted",
				"post errors", "non-empty polls", "CQEs", "empty polls", "post_recv calls", "post_recv WRs")
			if want.PostCalls == 0 || want.CQEs == 0 || want.RecvCalls == 0 {
				t.Errorf("the target did nothing to trace: %+v", want)
			}
			t.Logf("%d events, %d stops; target: %+v", len(evs), tr.stops, want)
		})
	}
}

// checkDataPathInLibs asserts that post_send, poll_cq and post_recv were
// each probed once per library, by ops table, at the file offset of the
// library's static function, and nowhere else.
func checkDataPathInLibs(t *testing.T, d dlopenTarget, evs []trace.Event, libs []string) {
	t.Helper()
	for role, fn := range d.dataPathFn {
		var at []*trace.Attach
		for _, e := range evs {
			if a, ok := e.(*trace.Attach); ok && a.Func == role && a.Err == "" {
				at = append(at, a)
			}
		}
		if len(at) != len(libs) {
			t.Errorf("%s: %d attachments, want one in each of %d libraries: %+v", role, len(at), len(libs), at)
		}
		for _, lib := range libs {
			sym, err := ResolveSymbol(lib, fn)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(at, func(a *trace.Attach) bool { return sameFile(a.Path, lib) })
			if i < 0 {
				t.Errorf("%s: not attached in %s: %+v", role, filepath.Base(lib), at)
				continue
			}
			if a := at[i]; a.How != "ops-table" || a.Offset != sym.Offset {
				t.Errorf("%s in %s: how %q offset %#x, want ops-table at %s's %#x",
					role, filepath.Base(lib), a.How, a.Offset, fn, sym.Offset)
			}
		}
	}
}

func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
