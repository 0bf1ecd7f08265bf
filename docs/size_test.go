package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFileSizes holds the limits docs/design.md sets: cmd/sqscope's
// product code under 1,000 lines, no hand-written Go file over 700, no C
// source or header over 900 (the BPF programs, the simulated HCA, the
// device backend, the workload's loop, and the C programs under testdata/
// the tests build).
func TestFileSizes(t *testing.T) {
	lines := func(path string) int {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("\n"))
	}
	cmd, cFiles := 0, 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		name := d.Name()
		testdata := slices.Contains(strings.Split(filepath.Dir(rel), string(filepath.Separator)), "testdata")
		switch {
		case strings.HasSuffix(name, ".c") || strings.HasSuffix(name, ".h"):
			cFiles++
			if n := lines(path); n > 900 {
				t.Errorf("%s has %d lines, over 900: split it by role", rel, n)
			}
		case testdata: // fixtures and corpora: only their C is held
		case strings.HasSuffix(name, "_bpfel.go"), strings.HasSuffix(name, ".pb.go"): // generated
		case strings.HasSuffix(name, ".go"):
			n := lines(path)
			if n > 700 {
				t.Errorf("%s has %d lines, over 700: split it by role", rel, n)
			}
			if filepath.Dir(rel) == filepath.Join("cmd", "sqscope") && !strings.HasSuffix(name, "_test.go") {
				cmd += n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cFiles < 20 {
		t.Errorf("found only %d C files: is the walk still reading the tree?", cFiles)
	}
	if cmd == 0 || cmd >= 1000 {
		t.Errorf("cmd/sqscope has %d lines of product code, want some and under 1,000: move what is not flags or the choice of front end to its package", cmd)
	}
}
