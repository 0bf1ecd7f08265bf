package workload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ready file is written whole and never through a link: the workload
// runs as root under a tracer, and a user's link at the ready file's name,
// or at the name a writer of "PATH.tmp" uses, must not make it overwrite
// the file the link points to.
func TestReadyFileRefusesLinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		link string // where the link to the victim is planted, relative to the ready file
		err  string
	}{
		{"a link beside it", ".tmp", ""},
		{"a link at its name", "", "is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
				t.Fatal(err)
			}
			ready := filepath.Join(dir, "rdy")
			if err := os.Symlink(victim, ready+tc.link); err != nil {
				t.Fatal(err)
			}
			c := simConfig()
			c.Iters, c.ReadyFile = 200, ready
			if err := c.Validate(true); err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), c)
			if b, _ := os.ReadFile(victim); string(b) != "keep" {
				t.Fatalf("the file the link points to now holds %q", b)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--ready-file") {
					t.Fatalf("Run: %v, want an error of --ready-file saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(ready)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("pid %d\nqp %#x ", os.Getpid(), r.QPs[0].Counters.QPNum)
			if !strings.HasPrefix(string(b), want) {
				t.Errorf("ready file %q, want it to start %q", b, want)
			}
		})
	}
}
