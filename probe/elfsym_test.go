package probe

import (
	"debug/elf"
	"os"
	"testing"
)

const systemLibibverbs = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"

// TestResolveVersionedSymbol resolves libibverbs' versioned exports and
// checks the answer against the file's own version information: the
// default version (name@@VER, version index not hidden) and never a
// compatibility one (name@VER).
func TestResolveVersionedSymbol(t *testing.T) {
	if _, err := os.Stat(systemLibibverbs); err != nil {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
			t.Fatalf("%s: %v", systemLibibverbs, err)
		}
		t.Skipf("%s not installed: %v", systemLibibverbs, err)
	}
	f, err := elf.Open(systemLibibverbs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dyn, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name      string
		versioned bool // exported in more than one version
	}{
		{"ibv_create_qp", true},
		{"ibv_modify_qp", true},
		{"ibv_destroy_qp", true},
		{"ibv_alloc_pd", true},
		{"ibv_qp_to_qp_ex", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var def []elf.Symbol
			var compat []elf.Symbol
			for _, s := range dyn {
				if s.Name != c.name || s.Section == elf.SHN_UNDEF || !s.HasVersion {
					continue
				}
				if s.VersionIndex.IsHidden() {
					compat = append(compat, s)
				} else {
					def = append(def, s)
				}
			}
			if len(def) != 1 {
				t.Fatalf("%d default versions of %s in %s", len(def), c.name, systemLibibverbs)
			}
			if c.versioned != (len(compat) > 0) {
				t.Fatalf("%s: %d compatibility versions", c.name, len(compat))
			}
			wantOff, err := fileOffset(f, def[0].Value)
			if err != nil {
				t.Fatal(err)
			}

			got, err := ResolveSymbol(systemLibibverbs, c.name)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != def[0].Version || !got.Default || got.Offset != wantOff {
				t.Errorf("resolved %s@%s (default %v) at %#x, want %s@@%s at %#x",
					c.name, got.Version, got.Default, got.Offset, c.name, def[0].Version, wantOff)
			}
			for _, s := range compat {
				if off, _ := fileOffset(f, s.Value); off == got.Offset {
					t.Errorf("%s resolved to the compatibility version %s at %#x", c.name, s.Version, off)
				}
			}
			t.Logf("%s@@%s at %#x", c.name, got.Version, got.Offset)
		})
	}
}

// TestResolveStaticSymbol finds a static (local) function through .symtab,
// as explicit probes and the simulator's binaries need.
func TestResolveStaticSymbol(t *testing.T) {
	bin := buildTarget(t)
	for _, c := range []struct {
		name    string
		wantErr bool
	}{
		{"fake_post_send", false}, // static: .symtab only
		{"sqsim_create_qp", false},
		{"no_such_function", true},
		{"payload", true}, // an object, not a function
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := ResolveSymbol(bin, c.name)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if err == nil && (s.Offset == 0 || s.Offset != s.Value) {
				// a PIE's text segment maps at its file offset
				t.Errorf("%s: offset %#x value %#x", c.name, s.Offset, s.Value)
			}
		})
	}
}

func TestResolveSymbolErrors(t *testing.T) {
	for _, c := range []struct{ name, path, want string }{
		{"missing file", "/nonexistent/lib.so", "reading ELF /nonexistent/lib.so"},
		{"not ELF", "elfsym_test.go", "reading ELF elfsym_test.go"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ResolveSymbol(c.path, "f")
			if err == nil || !contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

func TestSplitVersioned(t *testing.T) {
	for _, c := range []struct {
		in, name, ver string
		def           bool
	}{
		{"ibv_create_qp@@IBVERBS_1.1", "ibv_create_qp", "IBVERBS_1.1", true},
		{"ibv_create_qp@IBVERBS_1.0", "ibv_create_qp", "IBVERBS_1.0", false},
		{"main", "main", "", true},
	} {
		t.Run(c.in, func(t *testing.T) {
			n, v, d := splitVersioned(c.in)
			if n != c.name || v != c.ver || d != c.def {
				t.Errorf("got %q %q %v", n, v, d)
			}
		})
	}
}
