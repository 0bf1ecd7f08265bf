package probe

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A process whose executable imports mlx5dv's functions (as UCX's and
// DPDK's mlx5 transports do) is listed with them by `sqscope ps`, and its
// trace sentence says its QPs driven that way are not traced; one on
// plain verbs is not.
func TestDirectVerbsImports(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	if _, err := os.Stat("/usr/include/infiniband/mlx5dv.h"); err != nil {
		t.Skip("no mlx5dv.h (libibverbs-dev)")
	}
	dir := t.TempDir()
	start := func(name, src string, libs ...string) int {
		c, bin := filepath.Join(dir, name+".c"), filepath.Join(dir, name)
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-o", bin, c}, libs...)
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("cc: %v\n%s", err, out)
		}
		cmd := exec.Command(bin)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		b := make([]byte, 1)
		if _, err := out.Read(b); err != nil { // it printed: its libraries are mapped
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
	sleep(60);
	return 0;
}
`
	dv := start("dv", strings.Replace(strings.Replace(body, "%s", "#include <infiniband/mlx5dv.h>", 1), "%s",
		"struct mlx5dv_obj o; mlx5dv_init_obj(&o, MLX5DV_OBJ_QP); mlx5dv_create_qp(0, 0, 0);", 1), "-lmlx5", "-libverbs")
	plain := start("plain", strings.Replace(strings.Replace(body, "%s", "", 1), "%s", "ibv_get_device_list(0);", 1), "-libverbs")
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		if got = directVerbsImports(dv); len(got) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := filepath.Join(dir, "dv") + ": "
	if len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], "mlx5dv_init_obj") || !strings.Contains(got[0], "mlx5dv_create_qp") {
		t.Errorf("direct verbs of the mlx5dv program: %q, want its executable with mlx5dv_init_obj and mlx5dv_create_qp", got)
	}
	if p, ok := inspect(dv, nil); !ok || len(p.DirectVerbs) != 1 || !strings.Contains(p.Trace, "post without ibv_post_send") {
		t.Errorf("ps of the mlx5dv program: %+v", p)
	}
	if got := directVerbsImports(plain); len(got) != 0 {
		t.Errorf("direct verbs of a plain verbs program: %q", got)
	}
}
