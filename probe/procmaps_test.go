package probe

import (
	"os"
	"strings"
	"testing"
)

const sampleMaps = `55d0c8a00000-55d0c8a01000 r--p 00000000 fd:01 1234567                    /tmp/dir with space/target
55d0c8a01000-55d0c8a02000 r-xp 00001000 fd:01 1234567                    /tmp/dir with space/target
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 
7f1e2d007000-7f1e2d01a000 r-xp 00007000 fd:01 99                         /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0
7f1e2e000000-7f1e2e001000 r-xp 00000000 fd:01 100                        /usr/lib/libgone.so (deleted)
7ffd5a9d1000-7ffd5a9f2000 rw-p 00000000 00:00 0                          [stack]
`

func TestParseMaps(t *testing.T) {
	maps, err := parseMaps(strings.NewReader(sampleMaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 6 {
		t.Fatalf("%d mappings", len(maps))
	}
	for _, c := range []struct {
		name    string
		addr    uint64
		path    string
		off     uint64
		wantErr string
	}{
		{"exe text, path with spaces", 0x55d0c8a01234, "/tmp/dir with space/target", 0x1234, ""},
		{"library", 0x7f1e2d00a000, "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", 0xa000, ""},
		{"deleted file", 0x7f1e2e000010, "/usr/lib/libgone.so", 0x10, ""},
		{"anonymous", 0x7f1e2c000100, "", 0, "anonymous memory"},
		{"not executable", 0x55d0c8a00010, "", 0, "non-executable"},
		{"unmapped", 0x1000, "", 0, "not mapped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, _, off, err := fileOf(1, maps, c.addr)
			if c.wantErr != "" {
				if err == nil || !contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || path != c.path || off != c.off {
				t.Fatalf("got %q %#x %v, want %q %#x", path, off, err, c.path, c.off)
			}
		})
	}
}

func TestParseMapsErrors(t *testing.T) {
	for _, in := range []string{
		"zzzz-1000 r-xp 00000000 fd:01 1 /x",
		"1000-0500 r-xp 00000000 fd:01 1 /x",
		"1000-2000 r-x 00000000 fd:01 1 /x",
		"1000-2000 r-xp 00000000 fd:01",
		"1000-2000 r-xp 0000zz00 fd:01 1 /x",
		"10002000 r-xp 00000000 fd:01 1 /x",
	} {
		t.Run(in, func(t *testing.T) {
			if _, err := parseMaps(strings.NewReader(in)); err == nil {
				t.Errorf("accepted %q", in)
			}
		})
	}
}

func TestReadOwnMaps(t *testing.T) {
	maps, err := readMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	found := false
	for _, m := range maps {
		if m.Path == exe && m.Perms[2] == 'x' {
			found = true
		}
	}
	if !found {
		t.Errorf("own executable %s not among %d mappings", exe, len(maps))
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add(sampleMaps)
	f.Add("0-1 ---p 0 0:0 0\n")
	f.Fuzz(func(t *testing.T, s string) {
		maps, err := parseMaps(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, m := range maps {
			if m.End < m.Start || len(m.Perms) != 4 {
				t.Errorf("accepted bad mapping %+v", m)
			}
			if m.Perms[2] == 'x' && m.Path != "" && !strings.HasPrefix(m.Path, "[") {
				fileOf(0, maps, m.Start) // must not panic
			}
		}
	})
}
