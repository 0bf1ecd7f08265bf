package outfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func write(t *testing.T, path, s string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Outputs that are not regular files, or that are an input or an existing
// recording, are refused, and stay as they were.
func TestCheckRefuses(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.json")
	write(t, plain, "old", 0o644)
	rec := filepath.Join(dir, "run.sqscope")
	write(t, rec, "SQSCOPE\x00rest", 0o600)
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(plain, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.sqscope")
	if err := os.Link(rec, hard); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	null := filepath.Join(dir, "null")
	nullErr := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3) // like /dev/null

	tests := []struct {
		name, path string
		inputs     []string
		force      bool
		exists     bool
		err        string
	}{
		{"new file", filepath.Join(dir, "new.json"), nil, false, false, ""},
		{"stdout", Stdout, nil, false, false, ""},
		{"existing plain file", plain, nil, false, true, ""},
		{"symbolic link", link, nil, false, true, "is a symbolic link"},
		{"directory", dir, nil, false, true, "is a directory, not a regular file"},
		{"named pipe", fifo, nil, false, true, "is a named pipe"},
		{"the input itself", rec, []string{rec}, true, true, "is also an input"},
		{"the input by another name", hard, []string{rec}, true, true, "is also an input"},
		{"existing recording", rec, nil, false, true, "is an existing recording: give --force"},
		{"existing recording, forced", rec, nil, true, true, ""},
	}
	if nullErr == nil {
		tests = append(tests, struct {
			name, path string
			inputs     []string
			force      bool
			exists     bool
			err        string
		}{"character device", null, nil, true, true, "is a character device"})
	} else {
		t.Logf("no device node test: %v", nullErr)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exists, err := Check(tc.path, tc.inputs, tc.force)
			if exists != tc.exists {
				t.Errorf("exists %v, want %v", exists, tc.exists)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Check(%s) = %v, want %q", tc.path, err, tc.err)
			}
			if tc.err != "" {
				if _, err := Create(tc.path, 0o600, tc.inputs, tc.force, true); err == nil {
					t.Fatalf("Create(%s) accepted what Check refused", tc.path)
				}
			}
		})
	}
	if content(t, plain) != "old" || content(t, rec) != "SQSCOPE\x00rest" {
		t.Error("a refused output was changed")
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Error("the link is no longer a link")
	}
	if nullErr == nil {
		if st, err := os.Stat(null); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Error("the device node is no longer a device")
		}
	}
}

// A new output is written in place with the given mode; an existing one is
// replaced only on Commit, keeping its mode when asked; Abort and Discard
// leave the old file as it was.
func TestCreateReplacesOnlyOnCommit(t *testing.T) {
	dir := t.TempDir()
	newPath := filepath.Join(dir, "new.json")
	f, err := Create(newPath, 0o600, nil, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if f.Replaces() {
		t.Error("a new file says it replaces one")
	}
	f.WriteString("new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(newPath); content(t, newPath) != "new" || st.Mode().Perm() != 0o600 {
		t.Errorf("new file %q mode %v", content(t, newPath), st.Mode().Perm())
	}

	old := filepath.Join(dir, "old.json")
	for _, end := range []string{"abort", "discard", "commit"} {
		write(t, old, "old", 0o644)
		f, err := Create(old, 0o600, nil, false, true)
		if err != nil {
			t.Fatal(err)
		}
		if !f.Replaces() {
			t.Error("replacing an existing file does not say so")
		}
		f.WriteString("replacement")
		if content(t, old) != "old" {
			t.Fatalf("%s: the old file changed before the end", end)
		}
		switch end {
		case "abort":
			f.Abort()
		case "discard":
			f.Discard()
		case "commit":
			if err := f.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		want := "old"
		if end == "commit" {
			want = "replacement"
		}
		st, _ := os.Stat(old)
		if got := content(t, old); got != want || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: file %q mode %v, want %q mode 0644", end, got, st.Mode().Perm(), want)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".old.json.*")); len(left) != 0 {
			t.Errorf("%s: temporary files left: %v", end, left)
		}
	}

	// a new file cut short stays (a recording is readable up to the cut);
	// discarded, it goes
	cut := filepath.Join(dir, "cut.sqscope")
	f, _ = Create(cut, 0o600, nil, false, false)
	f.WriteString("SQSCOPE\x00part")
	f.Abort()
	if content(t, cut) != "SQSCOPE\x00part" {
		t.Error("Abort removed a new file's content")
	}
	gone := filepath.Join(dir, "gone.json")
	f, _ = Create(gone, 0o600, nil, false, false)
	f.WriteString("{")
	f.Discard()
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("Discard left %s: %v", gone, err)
	}
}

// WriteFile writes a file whole, new or replaced, never through a link:
// neither one planted at the path nor one at a name beside it that a
// writer of "PATH.tmp" would have written through.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	write(t, victim, "keep", 0o600)
	for _, tc := range []struct {
		name  string
		setup func(path string)
		err   string
	}{
		{"new file", func(string) {}, ""},
		{"replaced", func(p string) { write(t, p, "old", 0o600) }, ""},
		{"a link beside it named PATH.tmp", func(p string) {
			if err := os.Symlink(victim, p+".tmp"); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a link at the path", func(p string) {
			if err := os.Symlink(victim, p); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"a dangling link at the path", func(p string) {
			if err := os.Symlink(filepath.Join(dir, "nowhere"), p); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"a directory", func(p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "is a directory"},
		{"standard output", nil, "give a file name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := Stdout
			if tc.setup != nil {
				path = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
				tc.setup(path)
			}
			err := WriteFile(path, []byte("pid 1\n"), 0o644)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("WriteFile: %v, want an error saying %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatalf("WriteFile: %v", err)
			}
			if got := content(t, victim); got != "keep" {
				t.Fatalf("the file a link points to now holds %q", got)
			}
			if tc.err != "" {
				return
			}
			st, err := os.Lstat(path)
			if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o644 || content(t, path) != "pid 1\n" {
				t.Fatalf("%s: %v, mode %v, %q", path, err, st.Mode(), content(t, path))
			}
		})
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestDirAndCreateNew(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "flight")
	if err := Dir(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("created %v (err %v), want a directory with mode 0700", st.Mode(), err)
	}
	if err := Dir(dir); err != nil {
		t.Errorf("an existing directory refused: %v", err)
	}
	plain := filepath.Join(base, "plain")
	write(t, plain, "old", 0o644)
	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{plain, link, Stdout} {
		if err := Dir(bad); err == nil {
			t.Errorf("Dir(%s) accepted", bad)
		}
	}

	f, err := CreateNew(filepath.Join(dir, "a"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "a")); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	fileLink := filepath.Join(dir, "b")
	if err := os.Symlink(plain, fileLink); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "a"), fileLink} {
		if _, err := CreateNew(p, 0o600); err == nil {
			t.Errorf("CreateNew(%s) wrote over what was there", p)
		}
	}
	if content(t, plain) != "old" || content(t, filepath.Join(dir, "a")) != "new" {
		t.Errorf("a file was changed")
	}
}

// Run through sudo, the outputs a user asked for are that user's (as perf
// gives them): a new file, a directory of outputs, a file made whole; a
// replaced file keeps its owner with its mode.
func TestSudoUserOwnsOutputs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	const uid, gid = 65534, 65534 // nobody, nogroup
	t.Setenv("SUDO_UID", "65534")
	t.Setenv("SUDO_GID", "65534")
	dir := t.TempDir()
	owner := func(path string) (int, int) {
		st, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		s := st.Sys().(*syscall.Stat_t)
		return int(s.Uid), int(s.Gid)
	}
	newFile := filepath.Join(dir, "new.json")
	f, err := Create(newFile, 0o600, nil, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	flight := filepath.Join(dir, "flight")
	if err := Dir(flight); err != nil {
		t.Fatal(err)
	}
	inFlight := filepath.Join(flight, "one.sqscope")
	g, err := CreateNew(inFlight, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	g.Commit()
	ready := filepath.Join(dir, "ready")
	if err := WriteFile(ready, []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{newFile, flight, inFlight, ready} {
		if u, g := owner(p); u != uid || g != gid {
			t.Errorf("%s: owned by %d:%d, want the sudo user's %d:%d", p, u, g, uid, gid)
		}
	}
	if st, _ := os.Stat(newFile); st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", newFile, st.Mode())
	}
	// a file of root's replaced with keepMode stays root's
	old := filepath.Join(dir, "old.html")
	if err := os.WriteFile(old, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chown(old, 0, 0)
	h, err := Create(old, 0o600, nil, false, true)
	if err != nil {
		t.Fatal(err)
	}
	h.WriteString("y")
	if err := h.Commit(); err != nil {
		t.Fatal(err)
	}
	if u, g := owner(old); u != 0 || g != 0 {
		t.Errorf("%s: replaced, owned by %d:%d, want its owner's 0:0 kept", old, u, g)
	}
	// without sudo's variables nothing changes hands
	t.Setenv("SUDO_UID", "")
	plain := filepath.Join(dir, "plain.json")
	p, err := Create(plain, 0o600, nil, false, true)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit()
	if u, _ := owner(plain); u != os.Geteuid() {
		t.Errorf("%s: owned by %d without SUDO_UID, want %d", plain, u, os.Geteuid())
	}
}
