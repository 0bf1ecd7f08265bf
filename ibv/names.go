package ibv

import (
	"strconv"
	"strings"
	"syscall"
)

// names maps each enum's values to the names sqscope prints, from facts.
var names = func() map[Enum]map[int64]string {
	m := map[Enum]map[int64]string{}
	for _, f := range facts {
		if m[f.Enum] == nil {
			m[f.Enum] = map[int64]string{}
		}
		m[f.Enum][f.Value] = f.Name
	}
	return m
}()

// name is the name of v in enum e, or v in decimal when the enum has no
// such value.
func name(e Enum, v int64) string {
	if s, ok := names[e][v]; ok {
		return s
	}
	return strconv.FormatInt(v, 10)
}

// The helpers take the integer types trace's records hold the values in.

// OpName names a send opcode: "SEND", "RDMA_WRITE", ...; an unknown one
// is its number.
func OpName(op uint8) string { return name(EnumWROpcode, int64(op)) }

// WCOpName names a completion opcode: "SEND", "RECV", ...; an unknown one
// is its number.
func WCOpName(op uint8) string { return name(EnumWCOpcode, int64(op)) }

// WCStatusName names a completion status: "SUCCESS", "WR_FLUSH_ERR", ...;
// an unknown one is its number.
func WCStatusName(s uint8) string { return name(EnumWCStatus, int64(s)) }

// QPTypeName names a QP type: "RC", "UD", ...; an unknown one is its
// number.
func QPTypeName(t uint8) string { return name(EnumQPType, int64(t)) }

// QPStateName names a QP state: "RTS", "ERR", ...; an unknown one is its
// number.
func QPStateName(s int32) string { return name(EnumQPState, int64(s)) }

// IsRecvWC reports whether a completion opcode is of the receive side:
// <infiniband/verbs.h> numbers those from IBV_WC_RECV up.
func IsRecvWC(op uint8) bool { return op >= WCRecv }

// SendFlagsString names the bits of send_flags, e.g. "SIGNALED|INLINE";
// bits it does not know are shown in hex, no bits as "0".
func SendFlagsString(flags uint32) string {
	if flags == 0 {
		return "0"
	}
	var parts []string
	for _, f := range facts {
		if f.Enum == EnumSendFlag && flags&uint32(f.Value) != 0 {
			parts = append(parts, f.Name)
			flags &^= uint32(f.Value)
		}
	}
	if flags != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(flags), 16))
	}
	return strings.Join(parts, "|")
}

// ErrnoName names what a post call returned: "ENOMEM", "EINVAL" or
// "EOPNOTSUPP"; another errno by its text; anything not positive as
// "error N".
func ErrnoName(ret int32) string {
	if s, ok := names[EnumErrno][int64(ret)]; ok {
		return s
	}
	if ret > 0 {
		return syscall.Errno(ret).Error()
	}
	return "error " + strconv.Itoa(int(ret))
}
