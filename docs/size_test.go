package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFileSizes holds the limits docs/design.md sets: cmd/sqscope's
// product code under 1,000 lines, no hand-written Go file over 700, no BPF
// source over 900.
func TestFileSizes(t *testing.T) {
	lines := func(path string) int {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("\n"))
	}
	cmd := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		name := d.Name()
		switch {
		case strings.HasSuffix(name, "_bpfel.go"), strings.HasSuffix(name, ".pb.go"): // generated
		case strings.HasSuffix(name, ".go"):
			n := lines(path)
			if n > 700 {
				t.Errorf("%s has %d lines, over 700: split it by role", rel, n)
			}
			if filepath.Dir(rel) == filepath.Join("cmd", "sqscope") && !strings.HasSuffix(name, "_test.go") {
				cmd += n
			}
		case strings.HasPrefix(rel, "bpf"+string(filepath.Separator)) && (strings.HasSuffix(name, ".c") || strings.HasSuffix(name, ".h")):
			if n := lines(path); n > 900 {
				t.Errorf("%s has %d lines, over 900: split it by role", rel, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cmd == 0 || cmd >= 1000 {
		t.Errorf("cmd/sqscope has %d lines of product code, want some and under 1,000: move what is not flags or the choice of front end to its package", cmd)
	}
}
