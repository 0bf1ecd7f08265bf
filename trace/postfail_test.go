package trace

import (
	"io"
	"testing"
)

// failEvents are what a sentinel trace records: error sites that ran,
// with and without the WR refused.
func failEvents() []Event {
	h := func(ns uint64) Header { return Header{TimeNS: ns, PID: 4242, TID: 4243} }
	return []Event{
		&PostFail{Header: h(9_000_000), QP: 0x7f12_0000_4000, QPNum: 0x1c0, Func: "post_send", Errno: 12, State: 3,
			Site: 0x5d64a2, SiteCauses: "queue_full,too_many_sge,inline", HasWR: true,
			WR: WR{ID: 77, Opcode: 2, Flags: 8, NumSGE: 1, Bytes: 4096}, Traced: true},
		&PostFail{Header: h(9_000_001), QP: 0x7f12_0000_4000, QPNum: 0x1c0, Func: "wr_complete", Errno: 22, State: -1,
			Site: 0x5d7e89, SiteCauses: "qp_state"},
		&PostFail{Header: h(9_000_002), Func: "post_send", Errno: 12, State: -1, HasWR: true,
			WR: WR{NumSGE: 40, Bytes: 1 << 20, SGEsNotSummed: 24}},
		&Window{Header: Header{TimeNS: 9_500_000}, FromNS: 9_300_000, PIDs: 2, PeriodNS: 10_000_000_000,
			Runs: 80_000, RunNS: 9_000_000, Traps: 80_000, TrapNS: 620, TargetCPUNS: 19_000_000_000, BudgetPPM: 10_000, NextNS: 12_000_000_000},
		&Window{Header: Header{TimeNS: 9_600_000}, FromNS: 9_550_000, PIDs: 1, CostErr: "BPF statistics: operation not permitted"},
		&SQSample{Header: Header{TimeNS: 9_700_000, PID: 4242}, QP: 0x7f12_0000_4000, QPNum: 0x1c0, Posted: 1 << 33, Retired: 1<<33 - 127, Width: 8},
		&SQSample{Header: Header{TimeNS: 9_800_000, PID: 4242}, QP: 0x7f12_0000_4000, QPNum: 0x1c0, Posted: 3, Retired: 0xffff_fffe, Width: 4, Capacity: 255, PostedCountsRefused: true},
		&SQSample{Header: Header{TimeNS: 9_900_000, PID: 4242}, QP: 0x7f12_0000_4000, QPNum: 0x1c0, Posted: 191, Retired: 63, Width: 8, CQErrors: 1, CQErrorsRead: true},
		&SQSample{Header: Header{TimeNS: 9_900_001, PID: 4242}, QP: 0x7f12_0000_4000, QPNum: 0x1c0, Posted: 191, Retired: 63, Width: 8, CQErrorsRead: true},
		// the signaled counts (the simulated HCA), and an rxe send CQ's
		// ring read without them: neither read is taken for the other
		&SQSample{Header: Header{TimeNS: 9_900_002, PID: 4242}, QP: 0x7f12_0000_4000, QPNum: 0x1c0, Posted: 191, Retired: 63, Width: 8, CQErrorsRead: true,
			SignaledRead: true, Signaled: 64, SendCQEsPolled: 63},
		&SQSample{Header: Header{TimeNS: 9_900_003, PID: 4242}, QP: 0x7f12_0000_4000, QPNum: 0x1c0, Posted: 3, Retired: 1, Width: 4, Capacity: 255,
			CQRingRead: true, CQFill: 63, CQCapacity: 63},
		&SQSample{Header: Header{TimeNS: 9_900_004, PID: 4242}, QP: 0x7f12_0000_4000, QPNum: 0x1c0, Posted: 3, Retired: 1, Width: 4, Capacity: 255,
			CQRingRead: true, SignaledRead: true},
	}
}

func TestPostFailRoundTrip(t *testing.T) {
	evs := append(append([]Event(nil), lifeEvents()...), failEvents()...)
	_, got, err := readAll(writeRecording(t, evs, 0))
	if err != io.EOF {
		t.Fatalf("reading: %v, want io.EOF", err)
	}
	assertEvents(t, got, evs)
}
