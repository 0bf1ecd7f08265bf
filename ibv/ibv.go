// Package ibv holds the values of <infiniband/verbs.h> (and the errnos
// posts return) that sqscope's Go code reads in traced records: send
// opcodes and flags, completion opcodes and statuses, QP types and states.
// It has no cgo and imports nothing of sqscope, so pure packages (trace,
// analyzer) can use it. Every constant is listed in Facts, and a test of
// package bpf pins each against the installed headers.
//
// The constants are untyped, as in <infiniband/verbs.h>, so that they
// compare with the uint8, uint32 and int fields records and C calls use.
package ibv

// enum ibv_wr_opcode: what a send work request does.
const (
	WRRDMAWrite         = 0
	WRRDMAWriteWithImm  = 1
	WRSend              = 2
	WRSendWithImm       = 3
	WRRDMARead          = 4
	WRAtomicCmpAndSwp   = 5
	WRAtomicFetchAndAdd = 6
	WRLocalInv          = 7
	WRBindMW            = 8
	WRSendWithInv       = 9
	WRTSO               = 10
	WRDriver1           = 11
	WRAtomicWrite       = 15
)

// enum ibv_send_flags: bits of ibv_send_wr.send_flags (and of
// ibv_qp_ex.wr_flags).
const (
	SendFence     = 1 << 0
	SendSignaled  = 1 << 1
	SendSolicited = 1 << 2
	SendInline    = 1 << 3
	SendIPCsum    = 1 << 4
)

// enum ibv_wc_opcode: what a completion completes. Receive-side opcodes
// are WCRecv and above (see IsRecvWC).
const (
	WCSend            = 0
	WCRDMAWrite       = 1
	WCRDMARead        = 2
	WCCompSwap        = 3
	WCFetchAdd        = 4
	WCBindMW          = 5
	WCLocalInv        = 6
	WCTSO             = 7
	WCAtomicWrite     = 9
	WCRecv            = 128
	WCRecvRDMAWithImm = 129
)

// enum ibv_wc_status.
const (
	WCSuccess          = 0
	WCLocLenErr        = 1
	WCLocQPOpErr       = 2
	WCLocEECOpErr      = 3
	WCLocProtErr       = 4
	WCWRFlushErr       = 5
	WCMWBindErr        = 6
	WCBadRespErr       = 7
	WCLocAccessErr     = 8
	WCRemInvReqErr     = 9
	WCRemAccessErr     = 10
	WCRemOpErr         = 11
	WCRetryExcErr      = 12
	WCRNRRetryExcErr   = 13
	WCLocRDDViolErr    = 14
	WCRemInvRdReqErr   = 15
	WCRemAbortErr      = 16
	WCInvEECNErr       = 17
	WCInvEECStateErr   = 18
	WCFatalErr         = 19
	WCRespTimeoutErr   = 20
	WCGeneralErr       = 21
	WCTMErr            = 22
	WCTMRndvIncomplete = 23
)

// enum ibv_qp_type.
const (
	QPTRC        = 2
	QPTUC        = 3
	QPTUD        = 4
	QPTRawPacket = 8
	QPTXRCSend   = 9
	QPTXRCRecv   = 10
	QPTDriver    = 0xff
)

// enum ibv_qp_state.
const (
	QPSReset   = 0
	QPSInit    = 1
	QPSRTR     = 2
	QPSRTS     = 3
	QPSSQD     = 4
	QPSSQE     = 5
	QPSErr     = 6
	QPSUnknown = 7
)

// Errnos ibv_post_send, ibv_post_recv and ibv_wr_complete return (Linux
// values of <errno.h>): ENOMEM when the queue is full or a WR asks for more
// than the QP's caps, EINVAL for a WR the QP cannot take (opcode, state),
// EOPNOTSUPP from libibverbs' stubs when the provider lacks the call.
const (
	ENOMEM     = 12
	EINVAL     = 22
	EOPNOTSUPP = 95
)

// Enum says which set of values a Fact belongs to.
type Enum uint8

const (
	EnumWROpcode Enum = iota + 1 // enum ibv_wr_opcode
	EnumSendFlag                 // enum ibv_send_flags
	EnumWCOpcode                 // enum ibv_wc_opcode
	EnumWCStatus                 // enum ibv_wc_status
	EnumQPType                   // enum ibv_qp_type
	EnumQPState                  // enum ibv_qp_state
	EnumErrno                    // errnos of the post calls
)

// Fact is one constant of this package: the C name it carries, the name
// sqscope prints for it, and its value.
type Fact struct {
	Enum  Enum
	C     string // e.g. "IBV_WR_SEND"
	Name  string // e.g. "SEND"
	Value int64
}

// facts is every constant above, once. The name helpers read it, and tests
// check that it lists every constant and that each value is the header's.
var facts = []Fact{
	{EnumWROpcode, "IBV_WR_RDMA_WRITE", "RDMA_WRITE", WRRDMAWrite},
	{EnumWROpcode, "IBV_WR_RDMA_WRITE_WITH_IMM", "RDMA_WRITE_WITH_IMM", WRRDMAWriteWithImm},
	{EnumWROpcode, "IBV_WR_SEND", "SEND", WRSend},
	{EnumWROpcode, "IBV_WR_SEND_WITH_IMM", "SEND_WITH_IMM", WRSendWithImm},
	{EnumWROpcode, "IBV_WR_RDMA_READ", "RDMA_READ", WRRDMARead},
	{EnumWROpcode, "IBV_WR_ATOMIC_CMP_AND_SWP", "ATOMIC_CMP_AND_SWP", WRAtomicCmpAndSwp},
	{EnumWROpcode, "IBV_WR_ATOMIC_FETCH_AND_ADD", "ATOMIC_FETCH_AND_ADD", WRAtomicFetchAndAdd},
	{EnumWROpcode, "IBV_WR_LOCAL_INV", "LOCAL_INV", WRLocalInv},
	{EnumWROpcode, "IBV_WR_BIND_MW", "BIND_MW", WRBindMW},
	{EnumWROpcode, "IBV_WR_SEND_WITH_INV", "SEND_WITH_INV", WRSendWithInv},
	{EnumWROpcode, "IBV_WR_TSO", "TSO", WRTSO},
	{EnumWROpcode, "IBV_WR_DRIVER1", "DRIVER1", WRDriver1},
	{EnumWROpcode, "IBV_WR_ATOMIC_WRITE", "ATOMIC_WRITE", WRAtomicWrite},

	{EnumSendFlag, "IBV_SEND_FENCE", "FENCE", SendFence},
	{EnumSendFlag, "IBV_SEND_SIGNALED", "SIGNALED", SendSignaled},
	{EnumSendFlag, "IBV_SEND_SOLICITED", "SOLICITED", SendSolicited},
	{EnumSendFlag, "IBV_SEND_INLINE", "INLINE", SendInline},
	{EnumSendFlag, "IBV_SEND_IP_CSUM", "IP_CSUM", SendIPCsum},

	{EnumWCOpcode, "IBV_WC_SEND", "SEND", WCSend},
	{EnumWCOpcode, "IBV_WC_RDMA_WRITE", "RDMA_WRITE", WCRDMAWrite},
	{EnumWCOpcode, "IBV_WC_RDMA_READ", "RDMA_READ", WCRDMARead},
	{EnumWCOpcode, "IBV_WC_COMP_SWAP", "COMP_SWAP", WCCompSwap},
	{EnumWCOpcode, "IBV_WC_FETCH_ADD", "FETCH_ADD", WCFetchAdd},
	{EnumWCOpcode, "IBV_WC_BIND_MW", "BIND_MW", WCBindMW},
	{EnumWCOpcode, "IBV_WC_LOCAL_INV", "LOCAL_INV", WCLocalInv},
	{EnumWCOpcode, "IBV_WC_TSO", "TSO", WCTSO},
	{EnumWCOpcode, "IBV_WC_ATOMIC_WRITE", "ATOMIC_WRITE", WCAtomicWrite},
	{EnumWCOpcode, "IBV_WC_RECV", "RECV", WCRecv},
	{EnumWCOpcode, "IBV_WC_RECV_RDMA_WITH_IMM", "RECV_RDMA_WITH_IMM", WCRecvRDMAWithImm},

	{EnumWCStatus, "IBV_WC_SUCCESS", "SUCCESS", WCSuccess},
	{EnumWCStatus, "IBV_WC_LOC_LEN_ERR", "LOC_LEN_ERR", WCLocLenErr},
	{EnumWCStatus, "IBV_WC_LOC_QP_OP_ERR", "LOC_QP_OP_ERR", WCLocQPOpErr},
	{EnumWCStatus, "IBV_WC_LOC_EEC_OP_ERR", "LOC_EEC_OP_ERR", WCLocEECOpErr},
	{EnumWCStatus, "IBV_WC_LOC_PROT_ERR", "LOC_PROT_ERR", WCLocProtErr},
	{EnumWCStatus, "IBV_WC_WR_FLUSH_ERR", "WR_FLUSH_ERR", WCWRFlushErr},
	{EnumWCStatus, "IBV_WC_MW_BIND_ERR", "MW_BIND_ERR", WCMWBindErr},
	{EnumWCStatus, "IBV_WC_BAD_RESP_ERR", "BAD_RESP_ERR", WCBadRespErr},
	{EnumWCStatus, "IBV_WC_LOC_ACCESS_ERR", "LOC_ACCESS_ERR", WCLocAccessErr},
	{EnumWCStatus, "IBV_WC_REM_INV_REQ_ERR", "REM_INV_REQ_ERR", WCRemInvReqErr},
	{EnumWCStatus, "IBV_WC_REM_ACCESS_ERR", "REM_ACCESS_ERR", WCRemAccessErr},
	{EnumWCStatus, "IBV_WC_REM_OP_ERR", "REM_OP_ERR", WCRemOpErr},
	{EnumWCStatus, "IBV_WC_RETRY_EXC_ERR", "RETRY_EXC_ERR", WCRetryExcErr},
	{EnumWCStatus, "IBV_WC_RNR_RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", WCRNRRetryExcErr},
	{EnumWCStatus, "IBV_WC_LOC_RDD_VIOL_ERR", "LOC_RDD_VIOL_ERR", WCLocRDDViolErr},
	{EnumWCStatus, "IBV_WC_REM_INV_RD_REQ_ERR", "REM_INV_RD_REQ_ERR", WCRemInvRdReqErr},
	{EnumWCStatus, "IBV_WC_REM_ABORT_ERR", "REM_ABORT_ERR", WCRemAbortErr},
	{EnumWCStatus, "IBV_WC_INV_EECN_ERR", "INV_EECN_ERR", WCInvEECNErr},
	{EnumWCStatus, "IBV_WC_INV_EEC_STATE_ERR", "INV_EEC_STATE_ERR", WCInvEECStateErr},
	{EnumWCStatus, "IBV_WC_FATAL_ERR", "FATAL_ERR", WCFatalErr},
	{EnumWCStatus, "IBV_WC_RESP_TIMEOUT_ERR", "RESP_TIMEOUT_ERR", WCRespTimeoutErr},
	{EnumWCStatus, "IBV_WC_GENERAL_ERR", "GENERAL_ERR", WCGeneralErr},
	{EnumWCStatus, "IBV_WC_TM_ERR", "TM_ERR", WCTMErr},
	{EnumWCStatus, "IBV_WC_TM_RNDV_INCOMPLETE", "TM_RNDV_INCOMPLETE", WCTMRndvIncomplete},

	// sqscope's reports print the short names RAW and XRC (the sending
	// side of XRC, the only one with a send queue).
	{EnumQPType, "IBV_QPT_RC", "RC", QPTRC},
	{EnumQPType, "IBV_QPT_UC", "UC", QPTUC},
	{EnumQPType, "IBV_QPT_UD", "UD", QPTUD},
	{EnumQPType, "IBV_QPT_RAW_PACKET", "RAW", QPTRawPacket},
	{EnumQPType, "IBV_QPT_XRC_SEND", "XRC", QPTXRCSend},
	{EnumQPType, "IBV_QPT_XRC_RECV", "XRC_RECV", QPTXRCRecv},
	{EnumQPType, "IBV_QPT_DRIVER", "DRIVER", QPTDriver},

	{EnumQPState, "IBV_QPS_RESET", "RESET", QPSReset},
	{EnumQPState, "IBV_QPS_INIT", "INIT", QPSInit},
	{EnumQPState, "IBV_QPS_RTR", "RTR", QPSRTR},
	{EnumQPState, "IBV_QPS_RTS", "RTS", QPSRTS},
	{EnumQPState, "IBV_QPS_SQD", "SQD", QPSSQD},
	{EnumQPState, "IBV_QPS_SQE", "SQE", QPSSQE},
	{EnumQPState, "IBV_QPS_ERR", "ERR", QPSErr},
	{EnumQPState, "IBV_QPS_UNKNOWN", "UNKNOWN", QPSUnknown},

	{EnumErrno, "ENOMEM", "ENOMEM", ENOMEM},
	{EnumErrno, "EINVAL", "EINVAL", EINVAL},
	{EnumErrno, "EOPNOTSUPP", "EOPNOTSUPP", EOPNOTSUPP},
}

// Facts returns a copy of every constant of this package with its C name.
func Facts() []Fact { return append([]Fact(nil), facts...) }
