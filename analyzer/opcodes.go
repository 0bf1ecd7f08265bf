package analyzer

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sqscope/sqscope/ibv"
)

// OpcodeMix counts a QP's accepted WRs by opcode (enum ibv_wr_opcode):
// what a READ run, a WRITE run or a mix of atomics looks like. An array,
// so that a snapshot's copy shares nothing with the live model. WRs
// accepted past the tracer's list bound have no opcode in the trace and
// are not in it (they are counted as wrs_past_bound).
type OpcodeMix [opcodeSlots]uint64

// opcodeSlots: the opcodes of <infiniband/verbs.h> (0..15), and one slot
// for any opcode past them.
const opcodeSlots = 17

const otherOpcode = opcodeSlots - 1

// otherName is the JSON and text name of the opcodes past the known ones.
const otherName = "other"

// add counts one WR of opcode op.
func (m *OpcodeMix) add(op uint8) {
	if int(op) < otherOpcode {
		m[op]++
	} else {
		m[otherOpcode]++
	}
}

// Total is the WRs counted.
func (m OpcodeMix) Total() uint64 {
	var n uint64
	for _, c := range m {
		n += c
	}
	return n
}

func slotName(i int) string {
	if i == otherOpcode {
		return otherName
	}
	return ibv.OpName(uint8(i))
}

// String lists the opcodes posted with their WRs, in opcode order
// ("RDMA_READ 2000, SEND 100"); "none" when no WR was counted.
func (m OpcodeMix) String() string {
	var parts []string
	for i, c := range m {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", slotName(i), c))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// MarshalJSON writes the mix as an object of the opcodes posted, by name:
// {"RDMA_READ": 2000}.
func (m OpcodeMix) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for i, c := range m {
		if c == 0 {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%q:%d", slotName(i), c)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (m *OpcodeMix) UnmarshalJSON(data []byte) error {
	var byName map[string]uint64
	if err := json.Unmarshal(data, &byName); err != nil {
		return err
	}
	*m = OpcodeMix{}
	for name, c := range byName {
		i := 0
		for ; i < opcodeSlots && slotName(i) != name; i++ {
		}
		if i == opcodeSlots {
			return fmt.Errorf("opcode mix: unknown opcode %q", name)
		}
		m[i] = c
	}
	return nil
}

// responds reports whether an opcode's local SGEs receive a response the
// HCA writes by DMA (a READ's data, an atomic's 8-byte old value) instead
// of holding a payload it reads.
func responds(op uint8) bool {
	switch op {
	case ibv.WRRDMARead, ibv.WRAtomicCmpAndSwp, ibv.WRAtomicFetchAndAdd:
		return true
	}
	return false
}

// atomicBytes is the size of an atomic's operand and response.
const atomicBytes = 8

// response is the DMA writes and bytes of the response of a WR of opcode
// op (one that responds) with gathers data segments of bytes in all: a
// READ fills each segment; an atomic's 8 bytes are one write (mlx5 gives
// every data segment of an atomic 8 bytes, set_data_ptr_seg_atomic).
func response(op uint8, gathers, bytes uint32) (writes, n uint64) {
	if gathers == 0 {
		return 0, 0
	}
	if op == ibv.WRRDMARead {
		return uint64(gathers), uint64(bytes)
	}
	return 1, atomicBytes
}
