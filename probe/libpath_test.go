package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/trace"
)

// A target whose loader finds libibverbs through LD_LIBRARY_PATH gets that
// copy hooked, not the system's.
func TestLibibverbsFromLDLibraryPath(t *testing.T) {
	requireBPF(t)
	bin := buildTarget(t)
	sys := (&Tracer{opts: Options{}}).findLibibverbs()
	if sys == "" {
		t.Fatal("no system libibverbs.so.1")
	}
	dir := t.TempDir()
	copyFile(t, sys, filepath.Join(dir, "libibverbs.so.1"))

	cmd := exec.Command(bin, "run")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	_, evs, _ := traceCmd(t, Options{}, cmd)
	hooked := map[string]bool{}
	for _, e := range evs {
		if a, ok := e.(*trace.Attach); ok && a.Func == "create_qp" && a.Err == "" {
			hooked[a.Path] = true
		}
	}
	inDir := false
	for p := range hooked {
		if strings.HasPrefix(p, dir) {
			inDir = true
		}
	}
	if !inDir {
		t.Fatalf("create_qp hooked in %v, want the copy in %s", hooked, dir)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
