package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
)

// compileC writes src to NAME.c in dir and runs the C compiler on it,
// args after it (-o, the libraries): without a compiler the test skips,
// or fails under SQSCOPE_REQUIRE_BPF=1.
func compileC(t *testing.T, dir, name, src string, args ...string) string {
	t.Helper()
	cc := bpftest.RequireTool(t, "cc", "gcc")
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, append([]string{c}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("cc %s: %v\n%s", name, err, out)
	}
	return c
}

// A process whose executable imports mlx5dv's functions (as UCX's and
// DPDK's mlx5 transports do) is listed with them by `sqscope ps`, and its
// trace sentence says its QPs driven that way are not traced; one on
// plain verbs is not.
func TestDirectVerbsImports(t *testing.T) {
	dir := t.TempDir()
	// each program has its libraries mapped once it prints, and waits
	// for the test's end to kill it
	start := func(name, src string, libs ...string) int {
		bin := filepath.Join(dir, name)
		compileC(t, dir, name, src, append([]string{"-o", bin}, libs...)...)
		cmd := exec.Command(bin)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if _, err := out.Read(make([]byte, 1)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return cmd.Process.Pid
	}
	const body = `
#include <stdio.h>
#include <unistd.h>
#include <infiniband/verbs.h>
%s
int main(int argc, char **argv) {
	if (argc > 5) { %s }
	printf("r\n"); fflush(stdout);
	pause();
	return 0;
}
`
	dv := start("dv", strings.Replace(strings.Replace(body, "%s", "#include <infiniband/mlx5dv.h>", 1), "%s",
		"struct mlx5dv_obj o; mlx5dv_init_obj(&o, MLX5DV_OBJ_QP); mlx5dv_create_qp(0, 0, 0);", 1), "-lmlx5", "-libverbs")
	plain := start("plain", strings.Replace(strings.Replace(body, "%s", "", 1), "%s", "ibv_get_device_list(0);", 1), "-libverbs")
	cache := directImports{}
	got := cache.of(dv)
	if len(got) == 1 {
		slices.Sort(got[0].funcs)
	}
	if len(got) != 1 || got[0].path != filepath.Join(dir, "dv") || !slices.Equal(got[0].funcs, []string{"mlx5dv_create_qp", "mlx5dv_init_obj"}) {
		t.Errorf("direct verbs of the mlx5dv program: %+v, want its executable with mlx5dv_init_obj and mlx5dv_create_qp", got)
	}
	if p, ok := inspect(dv, nil, cache); !ok || len(p.DirectVerbs) != 1 || !strings.Contains(p.Trace, "post without ibv_post_send") {
		t.Errorf("ps of the mlx5dv program: %+v", p)
	}
	if got := cache.of(plain); len(got) != 0 {
		t.Errorf("direct verbs of a plain verbs program: %+v", got)
	}
}
