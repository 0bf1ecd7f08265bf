package bpf

import (
	"testing"

	"github.com/sqscope/sqscope/bpf/internal/abi"
	"github.com/sqscope/sqscope/ibv"
)

// TestIBVFacts pins every value package ibv carries against the installed
// <infiniband/verbs.h> and <errno.h>. Package ibv's own test checks that
// its table lists every constant it has.
func TestIBVFacts(t *testing.T) {
	measured := abi.Consts()
	facts := ibv.Facts()
	if len(facts) != len(measured) {
		t.Errorf("package ibv carries %d values, package abi measures %d", len(facts), len(measured))
	}
	for _, f := range facts {
		t.Run(f.C, func(t *testing.T) {
			want, ok := measured[f.C]
			switch {
			case !ok:
				t.Errorf("package ibv carries %s but package abi does not measure it", f.C)
			case f.Value != want:
				t.Errorf("package ibv says %s = %d, the C headers say %d", f.C, f.Value, want)
			}
		})
	}
}

// TestBoundsPinned checks the Go record bounds against events.h.
func TestBoundsPinned(t *testing.T) {
	measured := abi.Bounds()
	cases := []struct {
		c     string
		goVal int64
	}{
		{"SQ_MAX_WRS", MaxWRs},
		{"SQ_MAX_SGES", MaxSGEs},
		{"SQ_MAX_WCS", MaxWCs},
		{"SQ_LOC_NONE", SiteLocNone},
		{"SQ_LOC_REG", SiteLocReg},
		{"SQ_LOC_STACK", SiteLocStack},
		{"SQ_SITE_ERRNO_SHIFT", SiteErrnoShift},
		{"SQ_SITE_INDEX_SHIFT", SiteIndexShift},
		{"SQ_SITE_INDEX_BITS", SiteIndexBits},
		{"SQ_SITE_LOCA_SHIFT", SiteLocAShift},
		{"SQ_SITE_LOCB_SHIFT", SiteLocBShift},
		{"SQ_SITE_LOC_OFF_BITS", SiteLocOffBits},
		{"SQ_SITE_ADJ_BITS", SiteAdjBits},
		{"SQ_FAIL_SGES", FailSGEs},
	}
	if len(cases) != len(measured) {
		t.Errorf("%d bounds measured, %d checked", len(measured), len(cases))
	}
	for _, c := range cases {
		t.Run(c.c, func(t *testing.T) {
			if want, ok := measured[c.c]; !ok || c.goVal != want {
				t.Errorf("Go says %s = %d, events.h says %d (measured: %v)", c.c, c.goVal, want, ok)
			}
		})
	}
}

// TestScanOffsetsPinned checks the offsets the memory scan reads with
// against events.h (whose values TestVerbsABI checks against verbs.h).
func TestScanOffsetsPinned(t *testing.T) {
	mirrored := map[string]int64{}
	for _, f := range abi.Facts() {
		mirrored[f.Name] = f.Mirrored
	}
	cases := []struct {
		c     string
		goVal int64
	}{
		{"IBV_CONTEXT_OPS", IBVContextOps},
		{"IBV_OPS_POLL_CQ", IBVOpsPollCQ},
		{"IBV_OPS_POST_SEND", IBVOpsPostSend},
		{"IBV_OPS_POST_RECV", IBVOpsPostRecv},
		{"IBV_OPS_POST_SRQ_RECV", IBVOpsPostSRQRecv},
		{"IBV_QP_CONTEXT", IBVQPContext},
		{"IBV_QP_SEND_CQ", IBVQPSendCQ},
		{"IBV_QP_RECV_CQ", IBVQPRecvCQ},
		{"IBV_QP_QP_NUM", IBVQPQPNum},
		{"IBV_QP_STATE_FIELD", IBVQPState},
		{"IBV_QP_QP_TYPE", IBVQPQPType},
		{"IBV_QP_SIZE", IBVQPSize},
		{"IBV_QPX_SIZE", IBVQPXSize},
		{"IBV_CQX_SIZE", IBVCQXSize},
	}
	for _, f := range append(append([]struct {
		Role   string
		Define string
		Off    int
	}{}, QPXFuncs...), CQXFuncs...) {
		cases = append(cases, struct {
			c     string
			goVal int64
		}{f.Define, int64(f.Off)})
	}
	for _, c := range cases {
		t.Run(c.c, func(t *testing.T) {
			if want, ok := mirrored[c.c]; !ok || c.goVal != want {
				t.Errorf("Go says %s = %d, events.h says %d (mirrored: %v)", c.c, c.goVal, want, ok)
			}
		})
	}
}
