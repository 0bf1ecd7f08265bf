package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/trace"
)

// The layout a provider states in its sqsim_sq_layout: the 20 bytes of
// the first layout (no CQ errors kept), the 24 of the second (their
// offset), the 32 of the third (the signaled counts' offsets), and
// anything else refused with why.
func TestReadSQLayout(t *testing.T) {
	dir := t.TempDir()
	build := func(name, body string) string {
		obj := filepath.Join(dir, name+".o")
		compileC(t, dir, name, "#include <stdint.h>\n"+body, "-c", "-o", obj)
		return obj
	}
	first := build("first", `const struct { uint32_t magic, size, posted, retired, width; } sqsim_sq_layout = {0x5153534c, 20, 0x100, 0x108, 8};`)
	second := build("second", `const struct { uint32_t magic, size, posted, retired, width, cq_errors; } sqsim_sq_layout = {0x5153534c, 24, 0x100, 0x108, 4, 0x1f0};`)
	later := build("later", `const struct { uint32_t magic, size, posted, retired, width, cq_errors, more; } sqsim_sq_layout = {0x5153534c, 28, 0x100, 0x108, 8, 0x1f0, 7};`)
	third := build("third", `const struct { uint32_t magic, size, posted, retired, width, cq_errors, signaled, cqes_polled; } sqsim_sq_layout = {0x5153534c, 32, 0x100, 0x108, 8, 0x1f0, 0x200, 0x218};`)
	later3 := build("later3", `const struct { uint32_t magic, size, posted, retired, width, cq_errors, signaled, cqes_polled, more; } sqsim_sq_layout = {0x5153534c, 36, 0x100, 0x108, 8, 0x1f0, 0x200, 0x218, 9};`)
	for _, c := range []struct {
		path string
		want sqLayout
	}{
		{first, sqLayout{posted: 0x100, retired: 0x108, width: 8}},
		{second, sqLayout{posted: 0x100, retired: 0x108, width: 4, cqErrors: 0x1f0}},
		{later, sqLayout{posted: 0x100, retired: 0x108, width: 8, cqErrors: 0x1f0}},
		{third, sqLayout{posted: 0x100, retired: 0x108, width: 8, cqErrors: 0x1f0, signaled: 0x200, cqesPolled: 0x218}},
		{later3, sqLayout{posted: 0x100, retired: 0x108, width: 8, cqErrors: 0x1f0, signaled: 0x200, cqesPolled: 0x218}},
	} {
		got, err := readSQLayout(c.path)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", filepath.Base(c.path), got, err, c.want)
		}
	}
	for _, c := range []struct{ name, body, err string }{
		{"magic", `const struct { uint32_t magic, size, posted, retired, width; } sqsim_sq_layout = {1, 20, 0x100, 0x108, 8};`, "holds no layout"},
		{"width", `const struct { uint32_t magic, size, posted, retired, width; } sqsim_sq_layout = {0x5153534c, 20, 0x100, 0x108, 2};`, "holds no layout"},
		{"short", `const struct { uint32_t magic, size, posted; } sqsim_sq_layout = {0x5153534c, 12, 0x100};`, "12 bytes"},
		{"none", `const int other = 1;`, "states no layout"},
	} {
		if _, err := readSQLayout(build(c.name, c.body)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.err)
		}
	}
}

// QPs of a provider file that states no layout are not read, and the
// round says so once per process and file, with why.
func TestMemSampleSaysNotRead(t *testing.T) {
	exe, err := os.Executable() // a file with no sqsim_sq_layout
	if err != nil {
		t.Fatal(err)
	}
	m := newMemSampler()
	pid := uint32(os.Getpid())
	for _, qp := range []uint64{0x1000, 0x2000} {
		m.note(&trace.QPCreate{Header: trace.Header{PID: pid}, QP: qp, QPNum: uint32(qp >> 8), Lib: exe})
	}
	var said []*trace.Attach
	for range 3 {
		evs, _ := m.round()
		for _, e := range evs {
			a, ok := e.(*trace.Attach)
			if !ok {
				t.Fatalf("a read of a QP whose provider states no layout: %+v", e)
			}
			said = append(said, a)
		}
	}
	if len(said) != 1 || said[0].Func != trace.FuncMemoryRead || said[0].Path != exe || said[0].PID != pid ||
		!strings.Contains(said[0].Err, "states no layout") {
		t.Fatalf("said %+v: want one record that %s's QPs are not read, and why", said, exe)
	}
}
