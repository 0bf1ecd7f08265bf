package cli

import (
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/trace"
)

func TestNothingTraced(t *testing.T) {
	failed := trace.Attach{Func: "post_send", Path: "/lib/libmlx5.so.1", Err: "attaching uretprobe: file does not exist"}
	placed := trace.Attach{Func: "poll_cq", Path: "/lib/libmlx5.so.1"}
	control := trace.Attach{Func: "create_qp", Path: "/lib/libibverbs.so.1"}
	notTraced := trace.Attach{Func: "post_recv", Err: "not traced: its receives"}
	for _, tc := range []struct {
		name string
		pid  int
		s    analyzer.Snapshot
		want string
	}{
		{"every data-path probe failed", 42, analyzer.Snapshot{Attach: []trace.Attach{control, failed}}, "nothing of process 42 was traced: post_send could not be attached"},
		{"one data-path probe placed", 42, analyzer.Snapshot{Attach: []trace.Attach{failed, placed}}, ""},
		{"no data-path probe yet (waiting)", 42, analyzer.Snapshot{Attach: []trace.Attach{control, notTraced}}, ""},
		{"QPs seen", 42, analyzer.Snapshot{Attach: []trace.Attach{failed}, QPs: []analyzer.QP{{}}}, ""},
		{"a started command", 0, analyzer.Snapshot{Attach: []trace.Attach{failed}}, ""},
	} {
		err := nothingTraced(tc.pid, tc.s)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if ee, ok := err.(*ExitError); err != nil && (!ok || ee.Code != 1) {
			t.Errorf("%s: %#v, want exit status 1", tc.name, err)
		}
	}
}
