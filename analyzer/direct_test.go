package analyzer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer/streamtest"
	"github.com/sqscope/sqscope/trace"
)

// A QP whose completions come with no post traced since its create, the
// post probe in place, writes its WQEs directly (direct verbs): it is
// said so, and its send figures are absent, not 0. The same completions
// with the post probe not placed are calls the trace missed, and a QP
// that posted once is not direct.
func TestPostsNotTracedDirect(t *testing.T) {
	build := func(postErr string, posted bool) *streamtest.Stream {
		s := streamtest.New()
		s.Add(&trace.Attach{Header: s.Header(), Func: "post_send", Path: "/usr/lib/libmlx5.so.1", How: "ops-table", Err: postErr})
		s.Add(&trace.Attach{Header: s.Header(), Func: "poll_cq", Path: "/usr/lib/libmlx5.so.1", How: "ops-table"})
		s.Create(1, trace.QPTypeRC, streamtest.RCCaps(64, 60, 1), false)
		s.ToRTS(1)
		if posted {
			s.Send(1, 1, 0, 1)
		}
		s.Poll(1, 100, 101, 102)
		s.Poll(1, 103)
		return s
	}
	snap := run(t, build("", false), Options{BF: DefaultBF})
	q := snap.QPs[0]
	if !q.PostsNotTraced || len(snap.Diagnoses) != 1 || snap.Diagnoses[0].Kind != "posts_not_traced" {
		t.Fatalf("posts not traced %v, diagnoses %+v: want posts_not_traced alone", q.PostsNotTraced, snap.Diagnoses)
	}
	d := snap.Diagnoses[0]
	if d.Evidence["send_cqes_polled"] != 4 || d.Evidence["unmatched_cqes"] != 4 || d.Evidence["max_send_wr"] != 64 ||
		!strings.HasPrefix(d.Message, "posts not traced: direct verbs. 4 send completions") {
		t.Errorf("diagnosis %+v", d)
	}
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"wrs", "post_calls", "doorbells", "outstanding", "peak_outstanding", "occupancy", "pcie", "enomem"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s = %v in the JSON of a QP whose posts were not seen", k, m[k])
		}
	}
	if r, _ := m["rates"].(map[string]any); r["post_wrs_per_s"] != nil || r["polls_per_s"] == nil {
		t.Errorf("rates %v: want the polls' only", r)
	}
	if m["cqes_polled"] != 4.0 || m["posts_not_traced"] != true || q.Measured("wrs") || !q.Measured("cqes_polled") {
		t.Errorf("JSON %s: want its 4 completions and posts_not_traced", b)
	}

	for _, c := range []struct {
		name    string
		postErr string
		posted  bool
		want    string
	}{{"post probe not placed", "no such symbol", false, "calls_not_traced"}, {"one post traced", "", true, "calls_not_traced"}} {
		snap := run(t, build(c.postErr, c.posted), Options{BF: DefaultBF})
		var kinds []string
		for _, d := range snap.Diagnoses {
			kinds = append(kinds, d.Kind)
		}
		if snap.QPs[0].PostsNotTraced || len(kinds) != 1 || kinds[0] != c.want {
			t.Errorf("%s: posts not traced %v, diagnoses %v; want %s only", c.name, snap.QPs[0].PostsNotTraced, kinds, c.want)
		}
	}
}
