package trace

import "math"

// entryPointEvents are the events and fields added for the data-path entry
// points after the first release of version 1: CQ control-path calls, an
// extended poll session and a post on an SRQ.
func entryPointEvents() []Event {
	h := func(ns uint64) Header { return Header{TimeNS: ns, PID: 4242, TID: 4243} }
	return []Event{
		&CQChange{Header: h(4_000_003), Op: CQOpCreateEx, CQ: 0x7f12_0000_2000, CQE: 255, Via: "ibv_create_cq_ex"},
		&CQChange{Header: h(4_000_004), Op: CQOpModify, CQ: 0x7f12_0000_2000,
			ModMask: 1, ModCount: math.MaxUint16, ModPeriodUS: 16, Ret: -95, Via: "sqsim_modify_cq"},
		&CQChange{Header: h(4_000_005), Op: CQOpResize, CQ: 0x7f12_0000_2000, CQE: math.MaxInt32, Ret: 12, Via: "ibv_resize_cq"},
		&Poll{Header: h(4_000_006), CQ: 0x7f12_0000_2000, Ret: 2, Ex: true, EmptyBefore: 3,
			WCs: []WC{{ID: 5}, {ID: 6, Status: 5}}},
		&Poll{Header: h(4_000_007), CQ: 0x7f12_0000_2000, Ret: -22, Ex: true},
		&PostRecv{Header: h(4_000_008), QP: 0x7f12_0000_3000, NumWRs: 4, Accepted: 4, SRQ: true},
		&CQChange{Header: h(4_000_009), Op: CQOpDestroy, CQ: 0x7f12_0000_2000, Via: "ibv_destroy_cq"},
	}
}
