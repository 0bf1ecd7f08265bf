package probe

import (
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

	// object lifetimes (bpf/lifecycle.bpf.h)
	{name: "create_cq", fn: -1,
		ret: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateCqRet }},
	{name: "create_srq", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateSrqEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.CreateSrqRet }},
	{name: "destroy_srq", fn: -1,
		entry: func(p *bpf.VerbsPrograms) *ebpf.Program { return p.DestroySrqEntry },
		ret:   func(p *bpf.VerbsPrograms) *ebpf.Program { return p.DestroySrqRet }},
}

func wrOpcode(p *bpf.VerbsPrograms) *ebpf.Program { return p.WrOpcode }

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
	// ibv_create_cq_ex is static inline: a CQ it creates is known by
	// its address alone (generation 0).
	{"create_cq", "ibv_create_cq", "sqsim_create_cq"},
	{"create_srq", "ibv_create_srq", "sqsim_create_srq"},
	{"destroy_srq", "ibv_destroy_srq", "sqsim_destroy_srq"},
}
