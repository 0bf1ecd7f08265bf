package reportpage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/analyzer"
	"github.com/sqscope/sqscope/report/pagetest"
	"github.com/sqscope/sqscope/trace"
	"github.com/sqscope/sqscope/verbs/nicmodel"
)

// page is an Output in memory.
type page struct {
	bytes.Buffer
	replaces, committed bool
}

func (p *page) Commit() error  { p.committed = true; return nil }
func (p *page) Replaces() bool { return p.replaces }

// The page of a recording: its QPs, their occupancy over the run and
// the advice, committed; of a damaged recording, what was read before
// the damage, committed as a new file but never over an existing one.
func TestWritePage(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join("..", "cmd", "sqscope", "testdata", "faults", "lazy-poll.sqscope"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good, damaged := filepath.Join(dir, "good.sqscope"), filepath.Join(dir, "damaged.sqscope")
	bad := append([]byte(nil), orig...)
	bad[len(bad)-40] ^= 0xff
	for path, b := range map[string][]byte{good: orig, damaged: bad} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	nic := nicmodel.Model{LinkGbps: 100, WQENS: 10, DMAReadNS: 450, RTTNS: 1500}
	bf := func(fi trace.FileInfo) analyzer.BFConfig { return analyzer.BFFromEnv(fi.Env) }
	for _, tc := range []struct {
		name     string
		path     string
		replaces bool
		err      string
	}{
		{"a recording", good, true, ""},
		{"a damaged recording, a new page", damaged, false, ""},
		{"a damaged recording over a page", damaged, true, "is left as it was"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := Read(context.Background(), tc.path, bf)
			if err != nil {
				t.Fatal(err)
			}
			if (rc.Res.Corrupt != nil) != (tc.path == damaged) {
				t.Fatalf("read %+v", rc.Res)
			}
			out := &page{replaces: tc.replaces}
			err = rc.WritePage(context.Background(), out, "run.html", nic)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "run.html") || out.committed {
					t.Fatalf("WritePage: %v, committed %v; want %q and nothing committed", err, out.committed, tc.err)
				}
				return
			}
			if err != nil || !out.committed {
				t.Fatalf("WritePage: %v, committed %v", err, out.committed)
			}
			p := pagetest.Parse(t, out.Bytes())
			want := []string{"recording " + tc.path + ": sqscope workload"}
			if tc.path == good {
				want = append(want, "no peak is lost", "QP 0x1c0 (pid 25590, RC)", " WRs recorded", "best of ")
			}
			for _, want := range want {
				if !strings.Contains(p.Text, want) {
					t.Errorf("the page lacks %q", want)
				}
			}
		})
	}
}
