package errsite

// Cause is what a guard's compare checks, read from where its operands
// come from: the WR's fields (by their offsets in struct ibv_send_wr,
// fixed by the verbs ABI), memory reached from the QP pointer (whose
// layout is the provider's, and so not named), a callee's result. It is
// inferred from the code's shape, not proven: the analysis does not know
// what a provider keeps at a given offset of its QP.
type Cause uint8

const (
	// CauseUnknown: the compare's operands say nothing this package reads.
	CauseUnknown Cause = iota
	// CauseQueueFull: two or more values read from the QP's memory
	// compared or combined (head - tail + n against the size, (producer +
	// 1) & mask against the consumer), with nothing of the WR.
	CauseQueueFull
	// CauseTooManySGE: the WR's num_sge against a value of the QP. On
	// mlx5 since rdma-core v40 that value is -1 outside RTS, so this is
	// also the QP-not-ready check: told apart at run time by the QP's
	// state.
	CauseTooManySGE
	// CauseInline: lengths of the WR's SGEs (summed) against a value of
	// the QP: inline data over the QP's limit.
	CauseInline
	// CauseOpcode: the WR's opcode against a constant.
	CauseOpcode
	// CauseBadWR: another field of the WR (or SGE) checked against a
	// constant: an atomic's length or alignment, a bind's fields.
	CauseBadWR
	// CauseNullArg: an argument pointer tested against NULL.
	CauseNullArg
	// CauseCallFailed: the result of a call tested (rxe: the doorbell
	// write).
	CauseCallFailed
	// CauseQPState: one value of the QP's memory against a constant: an
	// error an earlier call recorded in the QP (wr_complete returns what a
	// builder set), or a queue the QP does not have.
	CauseQPState
	// CauseEveryCall: no branch leads here: every call of the function
	// fails (mlx5 installs such a wr_complete outside RTS).
	CauseEveryCall
)

var causeNames = [...]string{"unknown", "queue_full", "too_many_sge", "inline", "opcode",
	"bad_wr", "null_arg", "call_failed", "qp_state", "every_call"}

func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return "cause?"
}

// Guard is a conditional jump on the way to a site.
type Guard struct {
	// Entry is set when the function's entry leads here with no jump.
	Entry     bool
	Branch    uint64 // file offset of the jump
	Inst      string // the jump, in GNU syntax
	Taken     bool   // the way here is the jump taken (else not taken)
	CompareAt uint64 // file offset of the instruction whose flags it tests
	Compare   string // that instruction
	Operands  string // what the compare's operands are, as far as known
	Cause     Cause
}

// classify reads a cause from the flags a guard tests.
func classify(fl flagsInfo) Cause {
	if fl.at == 0 {
		return CauseUnknown
	}
	a, b := fl.a, fl.b
	if !fl.cmp || a == b { // an arithmetic result, or test x,x: one value
		b = val{}
	}
	loads := int(a.loads) + int(b.loads)
	t := a.tags | b.tags
	qpSide := func(v val) bool {
		return v.tags&tQP != 0 && v.tags&tagsWR == 0 || v.k == vPtr && v.base == bQP
	}
	other := func(want tag) (val, bool) {
		if a.tags&want != 0 {
			return b, true
		}
		if b.tags&want != 0 {
			return a, true
		}
		return val{}, false
	}
	isArgPtr := func(v val) bool {
		return v.k == vPtr && v.base != bStack && v.c == 0
	}
	switch {
	case t&tSGE != 0:
		if o, ok := other(tSGE); ok && qpSide(o) {
			return CauseInline
		}
		return CauseBadWR
	case t&tNumSGE != 0:
		if o, ok := other(tNumSGE); ok && qpSide(o) {
			return CauseTooManySGE
		}
		return CauseBadWR
	case t&tOpcode != 0:
		return CauseOpcode
	case isArgPtr(a) && (b.isZero() || b == val{}):
		return CauseNullArg
	case t&tagsWR != 0:
		return CauseBadWR
	case t&tCall != 0:
		return CauseCallFailed
	case t&tQP != 0 && loads >= 2:
		return CauseQueueFull
	case t&tQP != 0 && (b.k == vConst || b.k == vUnknown && b.tags == 0 || a.k == vConst):
		return CauseQPState
	}
	return CauseUnknown
}
