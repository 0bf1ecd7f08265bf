package bpf

// Verbs ABI offsets of events.h that user space reads the target's memory
// with (the memory scan of package probe): struct ibv_context and its ops
// table, struct ibv_qp, and the function pointers of struct ibv_qp_ex. A
// test pins each to events.h, which abi_test.go pins to
// <infiniband/verbs.h>.
const (
	IBVContextOps     = 8   // IBV_CONTEXT_OPS
	IBVOpsPollCQ      = 88  // IBV_OPS_POLL_CQ
	IBVOpsPostSend    = 200 // IBV_OPS_POST_SEND
	IBVOpsPostRecv    = 208 // IBV_OPS_POST_RECV
	IBVOpsPostSRQRecv = 160 // IBV_OPS_POST_SRQ_RECV
	IBVQPContext      = 0   // IBV_QP_CONTEXT
	IBVQPSendCQ       = 24  // IBV_QP_SEND_CQ
	IBVQPRecvCQ       = 32  // IBV_QP_RECV_CQ
	IBVQPQPNum        = 52  // IBV_QP_QP_NUM
	IBVQPState        = 56  // IBV_QP_STATE_FIELD
	IBVQPQPType       = 60  // IBV_QP_QP_TYPE
	IBVQPSize         = 160 // IBV_QP_SIZE
	IBVQPXSize        = 352 // IBV_QPX_SIZE
)

// QPXFuncs are the ibv_qp_ex function pointers by the name of the data-path
// role that probes them (probe's roles), at their events.h offsets.
var QPXFuncs = []struct {
	Role   string
	Define string
	Off    int
}{
	{"wr_atomic_cmp_swp", "IBV_QPX_WR_ATOMIC_CMP_SWP", 184},
	{"wr_atomic_fetch_add", "IBV_QPX_WR_ATOMIC_FETCH_ADD", 192},
	{"wr_bind_mw", "IBV_QPX_WR_BIND_MW", 200},
	{"wr_local_inv", "IBV_QPX_WR_LOCAL_INV", 208},
	{"wr_rdma_read", "IBV_QPX_WR_RDMA_READ", 216},
	{"wr_rdma_write", "IBV_QPX_WR_RDMA_WRITE", 224},
	{"wr_rdma_write_imm", "IBV_QPX_WR_RDMA_WRITE_IMM", 232},
	{"wr_send", "IBV_QPX_WR_SEND", 240},
	{"wr_send_imm", "IBV_QPX_WR_SEND_IMM", 248},
	{"wr_send_inv", "IBV_QPX_WR_SEND_INV", 256},
	{"wr_send_tso", "IBV_QPX_WR_SEND_TSO", 264},
	{"wr_set_ud_addr", "IBV_QPX_WR_SET_UD_ADDR", 272},
	{"wr_set_xrc_srqn", "IBV_QPX_WR_SET_XRC_SRQN", 280},
	{"wr_set_inline_data", "IBV_QPX_WR_SET_INLINE_DATA", 288},
	{"wr_set_inline_data_list", "IBV_QPX_WR_SET_INLINE_DATA_LIST", 296},
	{"wr_set_sge", "IBV_QPX_WR_SET_SGE", 304},
	{"wr_set_sge_list", "IBV_QPX_WR_SET_SGE_LIST", 312},
	{"wr_start", "IBV_QPX_WR_START", 320},
	{"wr_complete", "IBV_QPX_WR_COMPLETE", 328},
	{"wr_abort", "IBV_QPX_WR_ABORT", 336},
	{"wr_atomic_write", "IBV_QPX_WR_ATOMIC_WRITE", 344},
}

// IBVCQXSize is IBV_CQX_SIZE, the size of struct ibv_cq_ex.
const IBVCQXSize = 288

// CQXFuncs are the ibv_cq_ex function pointers by the name of the role
// that probes them (or lists them as not traced), at their events.h
// offsets.
var CQXFuncs = []struct {
	Role   string
	Define string
	Off    int
}{
	{"start_poll", "IBV_CQX_START_POLL", 144},
	{"next_poll", "IBV_CQX_NEXT_POLL", 152},
	{"end_poll", "IBV_CQX_END_POLL", 160},
	{"cq_read_opcode", "IBV_CQX_READ_OPCODE", 168},
	{"cq_read_byte_len", "IBV_CQX_READ_BYTE_LEN", 184},
	{"cq_read_qp_num", "IBV_CQX_READ_QP_NUM", 200},
}
