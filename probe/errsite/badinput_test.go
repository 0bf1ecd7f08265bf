package errsite

import (
	"strings"
	"testing"
)

// TestAnalyzeRefuses: input that names no function gives one error that
// says why, never a report.
func TestAnalyzeRefuses(t *testing.T) {
	requireFile(t, rxeSO)
	b, err := Open(rxeSO)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f := b.Frames().FDEs[len(b.Frames().FDEs)/2]
	start, err := b.FileOffset(f.Start)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		fn   Func
		want string
	}{
		{"inside a function", Func{Start: start + 1, Role: PostSend}, "not its start"},
		{"no role", Func{Start: start}, "is not post_send or wr_complete"},
		{"outside the code", Func{Start: 0, Role: PostSend}, "no executable segment"},
		{"end before start", Func{Start: start, End: start, Role: PostSend}, "not past the start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := b.Analyze(c.fn)
			if err == nil || !strings.Contains(err.Error(), c.want) || r != nil {
				t.Errorf("got %v, %v; want an error saying %q", r, err, c.want)
			}
		})
	}
	if _, err := Open("testdata/fakeprov.c"); err == nil {
		t.Error("a C file opened as ELF")
	}
}
