package workload

import (
	"fmt"
	"strings"

	"github.com/sqscope/sqscope/ibv"
	"github.com/sqscope/sqscope/verbs"
)

// opcode is one --opcode name: the WR opcode, its IBV_QP_EX_WITH_* bit
// (the QP's send_ops_flags on the wr API), and what it needs.
type opcode struct {
	name    string
	op      int
	sendOp  uint64
	payload bool // carries the WR's payload out, so may be inline
	ud      bool // UD QPs take it
	device  bool // the workload can run it on a real device (sets up what it needs)
}

// Bits of enum ibv_qp_create_send_ops_flags.
const (
	withRDMAWrite        = 1 << 0
	withRDMAWriteWithImm = 1 << 1
	withSend             = 1 << 2
	withSendWithImm      = 1 << 3
	withRDMARead         = 1 << 4
	withAtomicCmpAndSwp  = 1 << 5
	withAtomicFetchAdd   = 1 << 6
	withLocalInv         = 1 << 7
	withBindMW           = 1 << 8
	withSendWithInv      = 1 << 9
	withAtomicWrite      = 1 << 12
)

// opcodes are the opcodes the workload posts. Send with invalidate, local
// invalidate and memory-window bind need a memory window the workload
// sets up only on the simulated HCA.
var opcodes = []opcode{
	{"send", ibv.WRSend, withSend, true, true, true},
	{"send_imm", ibv.WRSendWithImm, withSendWithImm, true, true, true},
	{"send_inv", ibv.WRSendWithInv, withSendWithInv, true, false, false},
	{"write", ibv.WRRDMAWrite, withRDMAWrite, true, false, true},
	{"write_imm", ibv.WRRDMAWriteWithImm, withRDMAWriteWithImm, true, false, true},
	{"read", ibv.WRRDMARead, withRDMARead, false, false, true},
	{"cmp_swp", ibv.WRAtomicCmpAndSwp, withAtomicCmpAndSwp, false, false, true},
	{"fetch_add", ibv.WRAtomicFetchAndAdd, withAtomicFetchAdd, false, false, true},
	{"atomic_write", ibv.WRAtomicWrite, withAtomicWrite, false, false, true},
	{"local_inv", ibv.WRLocalInv, withLocalInv, false, false, false},
	{"bind_mw", ibv.WRBindMW, withBindMW, false, false, false},
}

func opcodeOf(op int) (opcode, bool) {
	for _, o := range opcodes {
		if o.op == op {
			return o, true
		}
	}
	return opcode{}, false
}

// OpcodeNames lists the names --opcode takes.
func OpcodeNames() []string {
	out := make([]string, len(opcodes))
	for i, o := range opcodes {
		out[i] = o.name
	}
	return out
}

// ParseOpcodes parses --opcode: one name, or names separated by commas,
// posted in turn WR by WR.
func ParseOpcodes(s string) ([]int, error) {
	var out []int
	for _, name := range strings.Split(strings.ToLower(s), ",") {
		found := false
		for _, o := range opcodes {
			if o.name == strings.TrimSpace(name) {
				out = append(out, o.op)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("--opcode %q: want %s, or several separated by commas", name, strings.Join(OpcodeNames(), ", "))
		}
	}
	if len(out) > maxOpcodes {
		return nil, fmt.Errorf("--opcode: at most %d opcodes", maxOpcodes)
	}
	return out, nil
}

// maxOpcodes is the length of wl_params.opcodes.
const maxOpcodes = 16

// opNames names a list of opcodes for the summary.
func opNames(ops []int) string {
	var names []string
	for _, op := range ops {
		names = append(names, ibv.OpName(uint8(op)))
	}
	return strings.Join(names, ",")
}

// checkOpcodes is Validate's part for the opcodes.
func (c *Config) checkOpcodes() error {
	if len(c.Opcodes) == 0 || len(c.Opcodes) > maxOpcodes {
		return usagef("--opcode: want 1 to %d opcodes", maxOpcodes)
	}
	for _, op := range c.Opcodes {
		o, ok := opcodeOf(op)
		if !ok {
			return usagef("--opcode: unknown opcode %d", op)
		}
		if !o.ud && c.Conn == verbs.UD {
			if op == ibv.WRRDMAWrite {
				return usagef("--opcode write needs --connection RC (UD has no RDMA WRITE)")
			}
			return usagef("--opcode %s needs --connection RC (UD QPs only send)", o.name)
		}
		if !o.device && c.Device != verbs.SimName {
			return usagef("--opcode %s needs the simulated HCA (-d sim): the workload sets up no memory window on a device", o.name)
		}
	}
	return nil
}

// sendOps are the send_ops_flags the opcodes need.
func sendOps(ops []int) uint64 {
	var flags uint64
	for _, op := range ops {
		o, _ := opcodeOf(op)
		flags |= o.sendOp
	}
	return flags
}

// atomics reports whether any opcode is an atomic (the peer must allow
// remote atomics).
func atomics(ops []int) bool {
	for _, op := range ops {
		switch op {
		case ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd, ibv.WRAtomicWrite:
			return true
		}
	}
	return false
}
