package probe

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// debugLibSrc has a static function, which only .symtab (or a debug file)
// names, as a stripped provider's post_send is.
const debugLibSrc = `
static int __attribute__((noinline)) hidden_post_send(int n) { return n * 3 + 1; }
int (*volatile ops_post_send)(int) = hidden_post_send;
int exported(int n) { return ops_post_send(n); }
`

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// buildDebugLib builds lib.so with symbols, and its stripped copy.
func buildDebugLib(t *testing.T) (dir, full, stripped string) {
	t.Helper()
	cc := "cc"
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	for _, tool := range []string{"objcopy", "xz"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lib.c"), []byte(debugLibSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, cc, "-O2", "-g", "-shared", "-fPIC", "-Wl,--build-id", "-o", "lib.so", "lib.c")
	run(t, dir, "objcopy", "--strip-all", "lib.so", "lib-stripped.so")
	return dir, filepath.Join(dir, "lib.so"), filepath.Join(dir, "lib-stripped.so")
}

// TestDebugFiles finds a static function of a stripped library through
// each kind of separate debug information gdb and perf read, at the file
// offset the library's own symbols give.
func TestDebugFiles(t *testing.T) {
	dir, full, stripped := buildDebugLib(t)
	want, err := ResolveSymbol(full, "hidden_post_send")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveSymbol(stripped, "hidden_post_send"); err == nil {
		t.Fatal("the stripped library still names hidden_post_send")
	}
	f, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	id := buildID(f)
	f.Close()
	if len(id) < 8 {
		t.Fatalf("build id %q", id)
	}
	run(t, dir, "objcopy", "--only-keep-debug", "lib.so", "lib.debug")

	cases := []struct {
		name      string
		prepare   func(t *testing.T) (lib string, dirs []string)
		wantDebug string // suffix of the debug file named
		wantErr   bool
	}{
		{"build id", func(t *testing.T) (string, []string) {
			dd := filepath.Join(dir, "bid")
			sub := filepath.Join(dd, ".build-id", id[:2])
			os.MkdirAll(sub, 0o755)
			hardLink(t, filepath.Join(dir, "lib.debug"), filepath.Join(sub, id[2:]+".debug"))
			return stripped, []string{filepath.Join(dir, "nothing"), dd}
		}, "/.build-id/" + id[:2] + "/" + id[2:] + ".debug", false},
		{"debuglink next to the library", func(t *testing.T) (string, []string) {
			run(t, dir, "objcopy", "--add-gnu-debuglink=lib.debug", "lib-stripped.so", "lib-linked.so")
			return filepath.Join(dir, "lib-linked.so"), []string{filepath.Join(dir, "nothing")}
		}, "/lib.debug", false},
		{"debuglink under the debug dir", func(t *testing.T) (string, []string) {
			sub := filepath.Join(dir, "ld")
			os.MkdirAll(sub, 0o755)
			run(t, dir, "objcopy", "--add-gnu-debuglink=lib.debug", "lib-stripped.so", "ld/lib-linked2.so")
			dd := filepath.Join(dir, "dd")
			os.MkdirAll(filepath.Join(dd, sub), 0o755)
			hardLink(t, filepath.Join(dir, "lib.debug"), filepath.Join(dd, sub, "lib.debug"))
			return filepath.Join(sub, "lib-linked2.so"), []string{dd}
		}, "/dd" + filepath.Join(dir, "ld") + "/lib.debug", false},
		{"debuglink with a wrong CRC", func(t *testing.T) (string, []string) {
			sub := filepath.Join(dir, "crc")
			os.MkdirAll(sub, 0o755)
			run(t, dir, "objcopy", "--add-gnu-debuglink=lib.debug", "lib-stripped.so", "crc/lib.so")
			// a file of that name whose CRC is not the one recorded
			run(t, dir, "objcopy", "--only-keep-debug", "lib-stripped.so", "crc/lib.debug")
			return filepath.Join(sub, "lib.so"), []string{filepath.Join(dir, "nothing")}
		}, "", true},
		{"MiniDebugInfo", func(t *testing.T) (string, []string) {
			// as Fedora builds it: the symbols of the functions, in an
			// xz-compressed ELF, in the library's .gnu_debugdata
			run(t, dir, "objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
				"--keep-symbol=hidden_post_send", "lib.debug", "mini.debug")
			run(t, dir, "xz", "-f", "mini.debug")
			run(t, dir, "objcopy", "--add-section", ".gnu_debugdata=mini.debug.xz", "lib-stripped.so", "lib-mini.so")
			return filepath.Join(dir, "lib-mini.so"), []string{filepath.Join(dir, "nothing")}
		}, "lib-mini.so:.gnu_debugdata", false},
		{"no debug information", func(t *testing.T) (string, []string) {
			return stripped, []string{filepath.Join(dir, "nothing")}
		}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lib, dirs := c.prepare(t)
			got, err := ResolveWithDebug(lib, "hidden_post_send", dirs)
			if c.wantErr {
				if err == nil {
					t.Fatalf("found %+v, want none", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Offset != want.Offset || !strings.HasSuffix(got.DebugFile, c.wantDebug) {
				t.Errorf("offset %#x in %s, want %#x in ...%s", got.Offset, got.DebugFile, want.Offset, c.wantDebug)
			}
		})
	}
}

func hardLink(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Link(from, to); err != nil {
		t.Fatal(err)
	}
}

// TestDebugAltLink follows a debug file's .gnu_debugaltlink (dwz) by its
// build ID.
func TestDebugAltLink(t *testing.T) {
	dir, _, _ := buildDebugLib(t)
	run(t, dir, "objcopy", "--only-keep-debug", "lib.so", "lib.debug")
	// the alt file: any ELF with a build ID serves (dwz's holds DWARF)
	run(t, dir, "cc", "-shared", "-fPIC", "-Wl,--build-id=0xabcdef0123456789", "-o", "alt.so", "lib.c")
	alt := []byte("/nonexistent/alt.debug\x00")
	alt = append(alt, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89)
	if err := os.WriteFile(filepath.Join(dir, "altlink"), alt, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "objcopy", "--add-section", ".gnu_debugaltlink=altlink", "lib.debug", "lib-alt.debug")
	run(t, dir, "objcopy", "--add-gnu-debuglink=lib-alt.debug", "lib-stripped.so", "lib-linked.so")
	dd := filepath.Join(dir, "dd")
	os.MkdirAll(filepath.Join(dd, ".build-id", "ab"), 0o755)
	hardLink(t, filepath.Join(dir, "alt.so"), filepath.Join(dd, ".build-id", "ab", "cdef0123456789.debug"))

	f, err := elf.Open(filepath.Join(dir, "lib-linked.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := debugFiles(f, filepath.Join(dir, "lib-linked.so"), dir, []string{dd})
	var names []string
	for _, s := range files {
		names = append(names, s.Debug)
		s.close()
	}
	if len(names) != 2 || !strings.HasSuffix(names[0], "/lib-alt.debug") || !strings.HasSuffix(names[1], "/.build-id/ab/cdef0123456789.debug") {
		t.Errorf("debug files %v, want the debuglink's and its alt file", names)
	}
}
