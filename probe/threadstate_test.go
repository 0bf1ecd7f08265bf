package probe

import "testing"

// The hash by thread id gets room for threads only when it holds their
// state: with task storage the thread state (QP number cache included)
// takes no megabytes there.
func TestThreadsByTIDRoom(t *testing.T) {
	requireBPF(t)
	for _, c := range []struct {
		name string
		opts Options
		want uint32
	}{
		{"task storage", Options{}, 1},
		{"thread state by tid", Options{noTaskStorage: true}, 16384},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, tr := traceRun(t, c.opts, "run")
			info, err := tr.objs.ThreadsByTid.Info()
			if err != nil {
				t.Fatal(err)
			}
			if info.MaxEntries != c.want {
				t.Errorf("threads_by_tid holds %d entries, want %d", info.MaxEntries, c.want)
			}
		})
	}
}
