package probe

import (
	"strings"

	"github.com/cilium/ebpf"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/ibv"
)

// role is one kind of function sqscope probes, and the programs it takes.
type role struct {
	name string // trace.Attach.Func
	// fn is the index in sq_qp_rec.fns of data-path functions the control
	// path reveals; -1 for control-path functions found by symbol.
	fn     int
	entry  func(*bpf.VerbsPrograms) *ebpf.Program
	ret    func(*bpf.VerbsPrograms) *ebpf.Program
	cookie uint64 // bpf_get_attach_cookie: the opcode of wr_* opcode calls
	// hides, for a data-path function sqscope learns of but does not
	// probe (no entry or ret program), says what the trace misses by it.
	hides string
}

var roles = []role{
	{name: "post_send", fn: int(bpf.VerbsSqFnSQ_FN_POST_SEND),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.PostSendEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.PostSendRet }},
	{name: "poll_cq", fn: int(bpf.VerbsSqFnSQ_FN_POLL_CQ),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.PollCqEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.PollCqRet }},
	{name: "post_recv", fn: int(bpf.VerbsSqFnSQ_FN_POST_RECV),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.PostRecvEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.PostRecvRet }},
	{name: "create_qp_ex", fn: int(bpf.VerbsSqFnSQ_FN_CREATE_QP_EX),
		entry:  func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateQpExEntry },
		ret:    func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateQpRet },
		cookie: uint64(bpf.VerbsSqViaSQ_VIA_PROVIDER)},
	{name: "wr_start", fn: int(bpf.VerbsSqFnSQ_FN_WR_START),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrStart }},
	{name: "wr_complete", fn: int(bpf.VerbsSqFnSQ_FN_WR_COMPLETE),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrCompleteEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrCompleteRet }},
	{name: "wr_abort", fn: int(bpf.VerbsSqFnSQ_FN_WR_ABORT),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrAbort }},
	{name: "wr_send", fn: int(bpf.VerbsSqFnSQ_FN_WR_SEND), entry: wrOpcode, cookie: ibv.WRSend},
	{name: "wr_send_imm", fn: int(bpf.VerbsSqFnSQ_FN_WR_SEND_IMM), entry: wrOpcode, cookie: ibv.WRSendWithImm},
	{name: "wr_rdma_write", fn: int(bpf.VerbsSqFnSQ_FN_WR_RDMA_WRITE), entry: wrOpcode, cookie: ibv.WRRDMAWrite},
	{name: "wr_rdma_write_imm", fn: int(bpf.VerbsSqFnSQ_FN_WR_RDMA_WRITE_IMM), entry: wrOpcode, cookie: ibv.WRRDMAWriteWithImm},
	{name: "wr_rdma_read", fn: int(bpf.VerbsSqFnSQ_FN_WR_RDMA_READ), entry: wrOpcode, cookie: ibv.WRRDMARead},
	{name: "wr_set_inline_data", fn: int(bpf.VerbsSqFnSQ_FN_WR_SET_INLINE_DATA),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrSetInlineData }},
	{name: "wr_set_inline_data_list", fn: int(bpf.VerbsSqFnSQ_FN_WR_SET_INLINE_DATA_LIST),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrSetInlineDataList }},
	{name: "wr_set_sge", fn: int(bpf.VerbsSqFnSQ_FN_WR_SET_SGE),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrSetSge }},
	{name: "wr_set_sge_list", fn: int(bpf.VerbsSqFnSQ_FN_WR_SET_SGE_LIST),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrSetSgeList }},
	{name: "wr_atomic_cmp_swp", fn: int(bpf.VerbsSqFnSQ_FN_WR_ATOMIC_CMP_SWP), entry: wrOpcode, cookie: ibv.WRAtomicCmpAndSwp},
	{name: "wr_atomic_fetch_add", fn: int(bpf.VerbsSqFnSQ_FN_WR_ATOMIC_FETCH_ADD), entry: wrOpcode, cookie: ibv.WRAtomicFetchAndAdd},
	{name: "wr_bind_mw", fn: int(bpf.VerbsSqFnSQ_FN_WR_BIND_MW), entry: wrOpcode, cookie: ibv.WRBindMW},
	{name: "wr_local_inv", fn: int(bpf.VerbsSqFnSQ_FN_WR_LOCAL_INV), entry: wrOpcode, cookie: ibv.WRLocalInv},
	{name: "wr_send_inv", fn: int(bpf.VerbsSqFnSQ_FN_WR_SEND_INV), entry: wrOpcode, cookie: ibv.WRSendWithInv},
	{name: "wr_send_tso", fn: int(bpf.VerbsSqFnSQ_FN_WR_SEND_TSO), entry: wrOpcode, cookie: ibv.WRTSO},
	{name: "wr_atomic_write", fn: int(bpf.VerbsSqFnSQ_FN_WR_ATOMIC_WRITE), entry: wrOpcode, cookie: ibv.WRAtomicWrite},
	// The address setters size nothing (the opcode call already made room
	// for the address in the WQE), and a probe would cost a uprobe per UD
	// or XRC WR: they are listed as not traced.
	{name: "wr_set_ud_addr", fn: int(bpf.VerbsSqFnSQ_FN_WR_SET_UD_ADDR),
		hides: "nothing the send-queue model counts (the WQE's address segment is sized by the opcode call); a UD WR posted without an address is not detected"},
	{name: "wr_set_xrc_srqn", fn: int(bpf.VerbsSqFnSQ_FN_WR_SET_XRC_SRQN),
		hides: "nothing the send-queue model counts (the WQE's XRC segment is sized by the opcode call); an XRC WR posted without its SRQ number is not detected"},
	{name: "post_srq_recv", fn: int(bpf.VerbsSqFnSQ_FN_POST_SRQ_RECV),
		entry:  func(p *bpf.VerbsPrograms) *ebpf.Program { return p.PostRecvEntry },
		ret:    func(p *bpf.VerbsPrograms) *ebpf.Program { return p.PostRecvRet },
		cookie: uint64(bpf.VerbsSqRecKindSQ_REC_SRQ_RECV)},
	{name: "create_cq_ex", fn: int(bpf.VerbsSqFnSQ_FN_CREATE_CQ_EX),
		entry:  func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateCqExEntry },
		ret:    func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateCqExRet },
		cookie: uint64(bpf.VerbsSqViaSQ_VIA_PROVIDER)},
	{name: "modify_cq", fn: int(bpf.VerbsSqFnSQ_FN_MODIFY_CQ),
		entry:  func(p *bpf.VerbsPrograms) *ebpf.Program { return p.ModifyCqEntry },
		ret:    func(p *bpf.VerbsPrograms) *ebpf.Program { return p.ModifyCqRet },
		cookie: uint64(bpf.VerbsSqViaSQ_VIA_PROVIDER)},
	{name: "start_poll", fn: int(bpf.VerbsSqFnSQ_FN_START_POLL),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.StartPollEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.StartPollRet }},
	{name: "next_poll", fn: int(bpf.VerbsSqFnSQ_FN_NEXT_POLL),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.NextPollEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.NextPollRet }},
	{name: "end_poll", fn: int(bpf.VerbsSqFnSQ_FN_END_POLL),
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.EndPollEntry }},
	// What an extended poll's completion holds beyond wr_id and status is
	// read through these; a uretprobe on each, per completion, would cost
	// more than the poll. The analyzer finds the QP by the wr_id instead.
	{name: "cq_read_opcode", fn: int(bpf.VerbsSqFnSQ_FN_CQ_READ_OPCODE),
		hides: "the opcode of extended-poll completions: a completion is taken as a send completion when its wr_id matches a WR outstanding on a QP of its CQ"},
	{name: "cq_read_byte_len", fn: int(bpf.VerbsSqFnSQ_FN_CQ_READ_BYTE_LEN),
		hides: "the byte count of extended-poll completions (nothing the send-queue model counts)"},
	{name: "cq_read_qp_num", fn: int(bpf.VerbsSqFnSQ_FN_CQ_READ_QP_NUM),
		hides: "the QP of extended-poll completions: a completion whose wr_id matches no WR outstanding on a QP of its CQ is counted as unmatched"},

	// control path
	{name: "alloc_pd", fn: -1,
		ret: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.AllocPdRet }},
	{name: "create_qp", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateQpEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateQpRet }},
	{name: "qp_to_qp_ex", fn: -1,
		ret: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.QpToQpExRet }},
	{name: "modify_qp", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.ModifyQpEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.ModifyQpRet }},
	{name: "destroy_qp", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.DestroyQpEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.DestroyQpRet }},
	{name: "open_device", fn: -1,
		ret: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.OpenDeviceRet }},

	// CQ calls (bpf/cq_control.bpf.h); a create starts the CQ's life
	// (cq_born, bpf/lifecycle.bpf.h)
	{name: "create_cq", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateCqEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateCqRet }},
	{name: "resize_cq", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.ResizeCqEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.ResizeCqRet }},
	{name: "destroy_cq", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.DestroyCqEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.DestroyCqRet }},

	// SRQ lifetimes (bpf/lifecycle.bpf.h)
	{name: "create_srq", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateSrqEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateSrqRet }},
	{name: "destroy_srq", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.DestroySrqEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.DestroySrqRet }},
}

func wrOpcode(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrOpcode }

// probed reports whether r is a data-path function sqscope places programs
// on (not the control path, not a function it only lists as not traced).
func (r role) probed() bool { return r.fn >= 0 && (r.entry != nil || r.ret != nil) }

// posts reports whether r is a function that posts (post_send, post_recv,
// the wr_* builders), not one that polls or creates.
func (r role) posts() bool {
	return strings.HasPrefix(r.name, "post_") || strings.HasPrefix(r.name, "wr_")
}

// postLast orders roles so that those that post come after the others,
// for slices.SortStableFunc: probes placed in that order, while the
// process runs, see the completion of every post they see (a post seen
// before its poll's probe was placed could have its completion polled
// unseen, and a late QP's model would then hold it outstanding for ever,
// a "lower bound" above what the queue holds).
func postLast(a, b role) int {
	switch {
	case a.posts() == b.posts():
		return 0
	case b.posts():
		return -1
	}
	return 1
}

func roleByName(name string) (role, bool) {
	for _, r := range roles {
		if r.name == name {
			return r, true
		}
	}
	return role{}, false
}

func roleByFn(fn int) (role, bool) {
	for _, r := range roles {
		if r.fn == fn {
			return r, true
		}
	}
	return role{}, false
}

// discoveryFunc is a control-path function sqscope hooks by symbol, in
// libibverbs (ibv) or in a binary holding the simulated HCA (sim).
type discoveryFunc struct {
	role string
	ibv  string
	sim  string
}

var discoveryFuncs = []discoveryFunc{
	{"alloc_pd", "ibv_alloc_pd", "sqsim_alloc_pd"},
	{"create_qp", "ibv_create_qp", "sqsim_create_qp"},
	// ibv_create_qp_ex is static inline: libibverbs has no symbol for it.
	// Real providers' create_qp_ex is found through the verbs_context.
	{"create_qp_ex", "", "sqsim_create_qp_ex"},
	{"qp_to_qp_ex", "ibv_qp_to_qp_ex", "sqsim_qp_to_qp_ex"},
	{"modify_qp", "ibv_modify_qp", "sqsim_modify_qp"},
	{"destroy_qp", "ibv_destroy_qp", "sqsim_destroy_qp"},
	{"open_device", "ibv_open_device", ""},
	{"create_cq", "ibv_create_cq", "sqsim_create_cq"},
	// ibv_create_cq_ex and ibv_modify_cq are static inline too: found
	// through the verbs_context like create_qp_ex.
	{"create_cq_ex", "", "sqsim_create_cq_ex"},
	{"modify_cq", "", "sqsim_modify_cq"},
	{"resize_cq", "ibv_resize_cq", "sqsim_resize_cq"},
	{"destroy_cq", "ibv_destroy_cq", "sqsim_destroy_cq"},
	{"create_srq", "ibv_create_srq", "sqsim_create_srq"},
	{"destroy_srq", "ibv_destroy_srq", "sqsim_destroy_srq"},
}
