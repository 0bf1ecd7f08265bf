package bpf

import (
	"os"
	"reflect"
	"regexp"
	"testing"
	"unsafe"

	"github.com/sqscope/sqscope/bpf/internal/abi"
)

// TestVerbsABI pins every verbs offset, size and enum value events.h
// mirrors against the installed <infiniband/verbs.h> (measured by the C
// compiler in package abi: cgo is not allowed in test files).
func TestVerbsABI(t *testing.T) {
	facts := abi.Facts()
	if len(facts) < 80 {
		t.Fatalf("only %d ABI facts measured", len(facts))
	}
	for _, f := range facts {
		t.Run(f.Name, func(t *testing.T) {
			if f.Mirrored != f.Actual {
				t.Errorf("events.h says %s = %d, <infiniband/verbs.h> says %d", f.Name, f.Mirrored, f.Actual)
			}
		})
	}
}

// TestEveryABIFactPinned fails when events.h mirrors a verbs fact that
// TestVerbsABI does not check.
func TestEveryABIFactPinned(t *testing.T) {
	src, err := os.ReadFile("events.h")
	if err != nil {
		t.Fatal(err)
	}
	pinned := map[string]bool{}
	for _, f := range abi.Facts() {
		pinned[f.Name] = true
	}
	re := regexp.MustCompile(`(?m)^#define ((?:IBV_|VERBS_|SQ_IBV_)[A-Z0-9_]+)\s`)
	names := re.FindAllStringSubmatch(string(src), -1)
	if len(names) < 70 {
		t.Fatalf("found only %d mirrored facts in events.h", len(names))
	}
	for _, m := range names {
		if !pinned[m[1]] {
			t.Errorf("events.h defines %s but no test pins it", m[1])
		}
	}
}

// TestGeneratedSizes checks that every Go type bpf2go generated from
// events.h has the size of its C struct.
func TestGeneratedSizes(t *testing.T) {
	sizes := abi.Sizes()
	cases := []struct {
		c      string
		goType any
	}{
		{"sq_hdr", VerbsSqHdr{}},
		{"sq_caps", VerbsSqCaps{}},
		{"sq_qp_rec", VerbsSqQpRec{}},
		{"sq_cq_rec", VerbsSqCqRec{}},
		{"sq_wr", VerbsSqWr{}},
		{"sq_post_rec", VerbsSqPostRec{}},
		{"sq_wc", VerbsSqWc{}},
		{"sq_poll_rec", VerbsSqPollRec{}},
		{"sq_recv_rec", VerbsSqRecvRec{}},
		{"sq_exit_rec", VerbsSqExitRec{}},
		{"sq_proc_rec", VerbsSqProcRec{}},
		{"sq_key", VerbsSqKey{}},
		{"sq_cq_stats", VerbsSqCqStats{}},
		{"sq_qp_counters", VerbsSqQpCounters{}},
		{"sq_gen_key", VerbsSqGenKey{}},
		{"sq_obj_rec", VerbsSqObjRec{}},
		{"sq_qp_final_rec", VerbsSqQpFinalRec{}},
		{"sq_fail_rec", VerbsSqFailRec{}},
		{"sq_occ", VerbsSqOcc{}},
		{"sq_occ_fail_rec", VerbsSqOccFailRec{}},
		{"sq_qpn_key", VerbsSqQpnKey{}},
		{"sq_sig", VerbsSqSig{}},
		{"sq_qp_occ", VerbsSqQpOcc{}},
	}
	if len(cases) != len(sizes) {
		t.Errorf("%d C sizes measured, %d Go types checked", len(sizes), len(cases))
	}
	for _, c := range cases {
		t.Run(c.c, func(t *testing.T) {
			want, ok := sizes[c.c]
			if !ok {
				t.Fatalf("no C size for %s", c.c)
			}
			if got := int(reflect.TypeOf(c.goType).Size()); got != want {
				t.Errorf("Go %T is %d bytes, C struct %s is %d", c.goType, got, c.c, want)
			}
		})
	}
}

// TestRecordBounds checks the array bounds the Go decoder relies on.
func TestRecordBounds(t *testing.T) {
	var p VerbsSqPostRec
	var q VerbsSqPollRec
	var r VerbsSqQpRec
	var c VerbsSqCqRec
	if len(p.Wrs) != 64 || len(q.Wcs) != 32 || len(r.Fns) != int(VerbsSqFnSQ_FN_COUNT) || len(c.Fns) != len(r.Fns) {
		t.Errorf("bounds: wrs %d wcs %d fns %d and %d (SQ_FN_COUNT %d)", len(p.Wrs), len(q.Wcs), len(r.Fns), len(c.Fns), VerbsSqFnSQ_FN_COUNT)
	}
	if off := unsafe.Offsetof(p.Wrs); off != 64 {
		t.Errorf("sq_post_rec.wrs at %d, want 64", off)
	}
}
