package main

import (
	"testing"

	"github.com/sqscope/sqscope/internal/bpftest"
	"github.com/sqscope/sqscope/probe"
)

// The receiver of a lazily polled SEND stream reaps 64 completions a
// poll, past the 32 a poll record holds: its CQ is its own, no QP sends
// to it, so the completions past the record are its receives, counted
// exactly (the simulated HCA's count), and its receive queue never shows
// more outstanding than it holds.
func TestReceivesPastThePollRecord(t *testing.T) {
	bpftest.Require(t, probe.Preflight)
	tr, truth := traceWorkload(t, "--opcode send -s 64 -t 64 -Q 8 -n 2000 --fault lazy-poll=500 --receiver --poll-batch 64")
	if len(truth) != 1 {
		t.Fatalf("truth %v: want one sender", truth)
	}
	want := truth[0]["receiver"].(map[string]any) // the simulated HCA's count of the receiver
	rcvNum := want["qp_num"]
	var rcv map[string]any
	for _, q := range tr.QPs {
		if q["qp_num"] == rcvNum {
			rcv = q
		}
	}
	if rcv == nil {
		t.Fatalf("receiver QP %v not traced: %v", rcvNum, tr.QPs)
	}
	r := rcv["recv"].(map[string]any)
	depth := r["max_recv_wr"].(float64)
	if r["consumed"] != want["recv_cqes_polled"] || r["consumed_lower_bound"] != nil || r["posted"] != want["post_recvs"] ||
		r["outstanding"].(float64) > depth || r["peak_outstanding"].(float64) > depth {
		t.Errorf("receiver's queue %v: want %v consumed exactly of %v posted, never more than %v outstanding", r, want["recv_cqes_polled"], want["post_recvs"], depth)
	}
	var past float64
	for _, c := range tr.CQs {
		if b, ok := c["cqes_past_bound"].(float64); ok {
			past += b
			if c["cqes_past_bound_receives"] != b {
				t.Errorf("CQ %v: %v past the bound, %v of them receives: want all", c["cq"], b, c["cqes_past_bound_receives"])
			}
		}
	}
	if past == 0 {
		t.Errorf("no completion past the poll record bound: the test polls 64 at a time, past the 32 a record holds")
	}
}
