package errsite

import (
	"fmt"
	"strings"

	"golang.org/x/arch/x86/x86asm"
)

// The transfer function: what one instruction does to the abstract state.
// It follows the moves, loads, stores and stack arithmetic precisely and
// treats every other instruction as writing an unknown value (tagged by
// what it read) to its destination. It assumes the System V ABI at calls
// (a callee keeps rbx, rbp, r12-r15 and the caller's stack slots whose
// address did not escape) and that the function's own stores through
// pointers that are not stack addresses do not land in its frame unless
// a frame address escaped (then those slots are forgotten at each such
// store).

// Byte offsets of struct ibv_send_wr fields (<infiniband/verbs.h>; pinned
// to bpf/events.h by the package's test).
const (
	wrNext      = 8
	wrSGList    = 16
	wrNumSGE    = 24
	wrOpcode    = 28
	wrSendFlags = 32
)

// gpr maps a general register of any width to its number and width in
// bits; high is set for AH, CH, DH, BH.
func gpr(r x86asm.Reg) (n, bits int, high, ok bool) {
	switch {
	case r >= x86asm.AL && r <= x86asm.BL:
		return int(r - x86asm.AL), 8, false, true
	case r >= x86asm.AH && r <= x86asm.BH:
		return int(r - x86asm.AH), 8, true, true
	case r >= x86asm.SPB && r <= x86asm.R15B:
		return int(r-x86asm.SPB) + 4, 8, false, true
	case r >= x86asm.AX && r <= x86asm.R15W:
		return int(r - x86asm.AX), 16, false, true
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return int(r - x86asm.EAX), 32, false, true
	case r >= x86asm.RAX && r <= x86asm.R15:
		return int(r - x86asm.RAX), 64, false, true
	}
	return 0, 0, false, false
}

func vecReg(r x86asm.Reg) (int, bool) {
	switch {
	case r >= x86asm.X0 && r <= x86asm.X31:
		return int(r - x86asm.X0), true
	case r >= x86asm.Y0 && r <= x86asm.Y31:
		return int(r - x86asm.Y0), true
	case r >= x86asm.Z0 && r <= x86asm.Z31:
		return int(r - x86asm.Z0), true
	}
	return 0, false
}

// machine is one analysis run's view of the code: for RIP-relative
// addresses and for the stack addresses that escaped.
type machine struct {
	escaped    bool  // a stack address left the frame's own use
	escapedMin int64 // the lowest such address (offset from entry rsp)
}

// trunc32 is v as the low 32 bits of a register, zero-extended.
func trunc32(v val) val {
	switch v.k {
	case vConst:
		v.c = int64(uint32(v.c))
		return v
	case vNonZero:
		if v.c <= 32 {
			return v
		}
	case vSite:
		return v
	}
	return val{tags: v.tags, loads: v.loads, expr: v.expr}
}

// truncTo keeps the low bits of v that a narrower read sees.
func truncTo(v val, bits int) val {
	switch bits {
	case 64:
		return v
	case 32:
		return trunc32(v)
	}
	if v.k == vConst {
		v.c &= 1<<bits - 1
		v.expr = ""
		return v
	}
	return val{tags: v.tags, loads: v.loads, expr: v.expr}
}

// addr is the address a memory operand names.
func (m *machine) addr(s *state, a x86asm.Mem, next uint64) val {
	if a.Segment == x86asm.FS || a.Segment == x86asm.GS {
		return unknown // thread-local storage
	}
	var b val
	switch {
	case a.Base == x86asm.RIP:
		b = val{k: vConst, c: int64(next)}
	case a.Base == 0:
		b = constant(0)
	default:
		n, bits, _, ok := gpr(a.Base)
		if !ok || bits != 64 {
			return unknown
		}
		b = s.gpr[n]
	}
	if a.Index != 0 {
		idx := unknown
		if n, _, _, ok := gpr(a.Index); ok {
			idx = s.gpr[n]
		}
		if idx.isZero() {
			return m.addr(s, x86asm.Mem{Segment: a.Segment, Base: a.Base, Disp: a.Disp}, next)
		}
		out := combine(b, idx)
		if b.k == vPtr {
			out.tags |= baseTag(b.base)
		}
		if idx.k == vPtr {
			out.tags |= baseTag(idx.base)
		}
		return out
	}
	switch b.k {
	case vConst:
		return val{k: vConst, c: b.c + a.Disp}
	case vPtr:
		return ptr(b.base, b.c+a.Disp, b.tags)
	}
	return val{tags: b.tags, loads: b.loads, expr: b.expr}
}

func baseTag(b base) tag {
	switch b {
	case bQP:
		return tQP
	case bWR:
		return tWR
	case bArg2:
		return tArgs
	case bStack:
		return tFrame
	}
	return 0
}

// load reads size bytes at address a.
func (m *machine) load(s *state, a val, size int, sp int64) val {
	if a.k == vPtr {
		switch a.base {
		case bStack:
			if sl, ok := s.slots[a.c]; ok && size <= sl.size {
				return truncTo(sl.v, size*8)
			}
			return val{expr: fmt.Sprintf("[rsp%+#x]", a.c-sp)}
		case bQP:
			return val{tags: tQP, loads: 1, expr: fmt.Sprintf("[%s]", ptrExpr(bQP, a.c))}
		case bWR:
			switch a.c {
			case wrNext:
				if size == 8 {
					return ptr(bWR, 0, tWR)
				}
			case wrSGList:
				return val{tags: tSGList, expr: "wr.sg_list"}
			case wrNumSGE:
				return val{tags: tNumSGE, expr: "wr.num_sge"}
			case wrOpcode:
				return val{tags: tOpcode, expr: "wr.opcode"}
			case wrSendFlags:
				return val{tags: tSendFlags, expr: "wr.send_flags"}
			}
			return val{tags: tWR, expr: fmt.Sprintf("[%s]", ptrExpr(bWR, a.c))}
		case bArg2:
			return val{tags: tArgs}
		}
	}
	switch {
	case a.tags&(tSGList|tSGE) != 0:
		return val{tags: tSGE, expr: "sge field"}
	case a.tags&tQP != 0:
		e := ""
		if a.expr != "" {
			e = short("[" + a.expr + "]")
		}
		return val{tags: tQP, loads: 1, expr: e}
	case a.tags&tWR != 0:
		return val{tags: tWR}
	}
	return unknown
}

// store writes v (size bytes) at address a.
func (m *machine) store(s *state, a val, v val, size int) {
	if a.k == vPtr && a.base == bStack {
		s.set(loc{slot: true, off: a.c}, v, size)
		return
	}
	if v.k == vPtr && v.base == bStack {
		m.escape(v.c) // a frame address kept where a callee may find it
	} else if v.tags&tFrame != 0 {
		m.escape(-1 << 62)
	}
	if a.tags&tFrame != 0 {
		s.clobberSlots(-1<<62, 1<<62) // into the frame, at an index
		return
	}
	m.clobberEscaped(s)
}

func (m *machine) escape(off int64) {
	if !m.escaped || off < m.escapedMin {
		m.escaped, m.escapedMin = true, off
	}
}

func (m *machine) clobberEscaped(s *state) {
	if m.escaped {
		s.clobberSlots(m.escapedMin, 1<<62)
	}
}

// read evaluates an operand as a value of its width.
func (m *machine) read(s *state, a x86asm.Arg, in *x86asm.Inst, next uint64) val {
	switch a := a.(type) {
	case x86asm.Reg:
		if n, bits, high, ok := gpr(a); ok {
			if high {
				return val{tags: s.gpr[n].tags}
			}
			return truncTo(s.gpr[n], bits)
		}
		if n, ok := vecReg(a); ok {
			return val{tags: s.vec[n]}
		}
	case x86asm.Mem:
		sp, _ := s.rsp()
		return m.load(s, m.addr(s, a, next), memSize(in), sp)
	case x86asm.Imm:
		return constant(int64(a))
	}
	return unknown
}

func memSize(in *x86asm.Inst) int {
	if in.MemBytes > 0 {
		return in.MemBytes
	}
	return in.DataSize / 8
}

// write stores v into an operand: a register write of 32 bits clears the
// upper half, one of 8 or 16 bits merges into it (the result unknown).
func (m *machine) write(s *state, a x86asm.Arg, v val, in *x86asm.Inst, next uint64) {
	switch a := a.(type) {
	case x86asm.Reg:
		if n, bits, _, ok := gpr(a); ok {
			switch bits {
			case 64:
			case 32:
				v = trunc32(v)
			default:
				v = val{tags: v.tags | s.gpr[n].tags}
			}
			s.set(loc{reg: n}, v, 8)
			return
		}
		if n, ok := vecReg(a); ok {
			s.vec[n] = v.tags
		}
	case x86asm.Mem:
		m.store(s, m.addr(s, a, next), v, memSize(in))
	}
}

// argLoc is the location an operand names, if it is a whole register or
// a stack slot.
func (m *machine) argLoc(s *state, a x86asm.Arg, next uint64) (loc, bool) {
	switch a := a.(type) {
	case x86asm.Reg:
		if n, _, high, ok := gpr(a); ok && !high {
			return loc{reg: n}, true
		}
	case x86asm.Mem:
		if p := m.addr(s, a, next); p.k == vPtr && p.base == bStack {
			return loc{slot: true, off: p.c}, true
		}
	}
	return loc{}, false
}

// callerSaved are the registers a call may change (System V).
var callerSaved = []int{0, 1, 2, 6, 7, 8, 9, 10, 11}

// call applies a call's effects; the return value is tagged as such.
func (m *machine) call(s *state) {
	for _, r := range []int{7, 6, 2, 1, 8, 9} { // the argument registers
		if v := s.gpr[r]; v.k == vPtr && v.base == bStack {
			m.escape(v.c)
		} else if v.tags&tFrame != 0 {
			m.escape(-1 << 62)
		}
	}
	for _, r := range callerSaved {
		s.gpr[r] = unknown
	}
	s.gpr[0] = val{tags: tCall, expr: "a call's result"}
	s.vec = [32]tag{}
	s.fl = flagsInfo{}
	m.clobberEscaped(s)
}

// step applies instruction in at pc to s (a copy the caller owns).
func (m *machine) step(s *state, in *x86asm.Inst, pc uint64) {
	next := pc + uint64(in.Len)
	a0, a1 := in.Args[0], in.Args[1]
	setFlags := func(f flagsInfo) {
		f.at = pc
		f.text = strings.ReplaceAll(x86asm.GNUSyntax(*in, pc, nil), ",%riz", "")
		s.fl = f
	}
	resultFlags := func(dst x86asm.Arg, v val) {
		f := flagsInfo{a: v}
		if l, ok := m.argLoc(s, dst, next); ok {
			f.subj, f.hasSubj, f.width = l, true, in.DataSize
		}
		setFlags(f)
	}
	switch in.Op {
	case x86asm.NOP, x86asm.PAUSE, x86asm.LFENCE, x86asm.SFENCE, x86asm.MFENCE,
		x86asm.PREFETCHNTA, x86asm.PREFETCHT0, x86asm.PREFETCHT1, x86asm.PREFETCHT2,
		x86asm.JMP, x86asm.RET, x86asm.UD2, x86asm.INT, x86asm.HLT:
		if in.Op == x86asm.RET {
			if sp, ok := s.rsp(); ok {
				s.gpr[regRSP] = ptr(bStack, sp+8, 0)
			}
		}
		return
	case x86asm.MOV:
		m.write(s, a0, m.read(s, a1, in, next), in, next)
		return
	case x86asm.MOVZX:
		v := m.read(s, a1, in, next)
		if v.k != vConst {
			v = val{tags: v.tags, loads: v.loads, expr: v.expr}
		}
		m.write(s, a0, v, in, next)
		return
	case x86asm.MOVSX, x86asm.MOVSXD, x86asm.CDQE:
		if in.Op == x86asm.CDQE {
			a0, a1 = x86asm.RAX, x86asm.EAX
		}
		v := m.read(s, a1, in, next)
		if v.k == vConst {
			bits := 32
			if r, ok := a1.(x86asm.Reg); ok {
				_, bits, _, _ = gpr(r)
			} else if in.MemBytes > 0 {
				bits = in.MemBytes * 8
			}
			v.c = v.c << (64 - bits) >> (64 - bits)
		} else if v.k != vSite && !(v.k == vNonZero && v.c <= 32) {
			v = val{tags: v.tags, loads: v.loads, expr: v.expr}
		}
		m.write(s, a0, v, in, next)
		return
	case x86asm.LEA:
		m.write(s, a0, m.addr(s, a1.(x86asm.Mem), next), in, next)
		return
	case x86asm.XCHG:
		if a0 == a1 {
			return
		}
		v0, v1 := m.read(s, a0, in, next), m.read(s, a1, in, next)
		m.write(s, a0, v1, in, next)
		m.write(s, a1, v0, in, next)
		return
	case x86asm.PUSH:
		v := m.read(s, a0, in, next)
		if sp, ok := s.rsp(); ok {
			s.gpr[regRSP] = ptr(bStack, sp-8, 0)
			s.set(loc{slot: true, off: sp - 8}, v, 8)
		} else {
			s.gpr[regRSP] = unknown
		}
		return
	case x86asm.POP:
		v := unknown
		if sp, ok := s.rsp(); ok {
			if sl, ok := s.slots[sp]; ok && sl.size == 8 {
				v = sl.v
			}
			s.gpr[regRSP] = ptr(bStack, sp+8, 0)
		}
		m.write(s, a0, v, in, next)
		return
	case x86asm.LEAVE:
		s.gpr[regRSP] = s.gpr[5]
		v := unknown
		if sp, ok := s.rsp(); ok {
			if sl, ok := s.slots[sp]; ok && sl.size == 8 {
				v = sl.v
			}
			s.gpr[regRSP] = ptr(bStack, sp+8, 0)
		}
		s.set(loc{reg: 5}, v, 8)
		return
	case x86asm.CALL:
		m.call(s)
		return
	case x86asm.CMP, x86asm.TEST:
		va, vb := m.read(s, a0, in, next), m.read(s, a1, in, next)
		f := flagsInfo{a: va, b: vb, cmp: true, width: in.DataSize}
		if l, ok := m.argLoc(s, a0, next); ok && (in.Op == x86asm.TEST && a0 == a1 || in.Op == x86asm.CMP && vb.isZero()) {
			f.subj, f.hasSubj = l, true
		}
		setFlags(f)
		return
	case x86asm.XOR, x86asm.SUB, x86asm.SBB, x86asm.PXOR, x86asm.XORPS, x86asm.XORPD:
		if a0 == a1 {
			if in.Op == x86asm.SBB {
				break
			}
			z := constant(0)
			if _, ok := a0.(x86asm.Reg); ok {
				m.write(s, a0, z, in, next)
			}
			resultFlags(a0, z)
			return
		}
		if in.Op == x86asm.SUB {
			m.arith(s, in, next, -1, resultFlags)
			return
		}
	case x86asm.ADD:
		m.arith(s, in, next, 1, resultFlags)
		return
	case x86asm.INC, x86asm.DEC:
		v := m.read(s, a0, in, next)
		out := val{tags: v.tags, loads: v.loads}
		if v.k == vConst {
			out = constant(v.c + 1)
			if in.Op == x86asm.DEC {
				out = constant(v.c - 1)
			}
		}
		m.write(s, a0, out, in, next)
		resultFlags(a0, out)
		return
	case x86asm.CMOVE, x86asm.CMOVNE, x86asm.CMOVA, x86asm.CMOVAE, x86asm.CMOVB, x86asm.CMOVBE,
		x86asm.CMOVG, x86asm.CMOVGE, x86asm.CMOVL, x86asm.CMOVLE, x86asm.CMOVS, x86asm.CMOVNS,
		x86asm.CMOVO, x86asm.CMOVNO, x86asm.CMOVP, x86asm.CMOVNP:
		// The destination keeps its value where the condition fails (what
		// the flags then say of it) and takes the source's where it holds.
		kept, moved := m.read(s, a0, in, next), m.read(s, a1, in, next)
		narrow := func(a x86asm.Arg, v val, taken bool) val {
			if l, ok := m.argLoc(s, a, next); ok && s.fl.hasSubj && s.fl.subj == l {
				if r, ok := refineBy(v, implied(cmovJump[in.Op], taken, s.fl.cmp), s.fl.width); ok {
					return r
				}
			}
			return v
		}
		m.write(s, a0, joinVal(narrow(a0, kept, false), narrow(a1, moved, true)), in, next)
		return
	case x86asm.CQO, x86asm.CDQ, x86asm.CWD:
		s.set(loc{reg: 2}, unknown, 8)
		return
	case x86asm.CWDE, x86asm.CBW, x86asm.LAHF:
		s.set(loc{reg: 0}, unknown, 8)
		return
	case x86asm.MUL, x86asm.IMUL, x86asm.DIV, x86asm.IDIV, x86asm.RDTSC, x86asm.RDTSCP, x86asm.CPUID, x86asm.SYSCALL:
		if in.Op == x86asm.IMUL && a1 != nil {
			break
		}
		for _, r := range []int{0, 1, 2, 3, 11} {
			if r == 0 || r == 2 || in.Op == x86asm.CPUID && r <= 3 || in.Op == x86asm.SYSCALL && (r == 1 || r == 11) || in.Op == x86asm.RDTSCP && r == 1 {
				s.set(loc{reg: r}, unknown, 8)
			}
		}
		s.fl = flagsInfo{}
		return
	case x86asm.CMPXCHG, x86asm.XADD, x86asm.CMPXCHG8B, x86asm.CMPXCHG16B:
		m.write(s, a0, unknown, in, next)
		if a1 != nil {
			m.write(s, a1, unknown, in, next)
		}
		s.set(loc{reg: 0}, unknown, 8)
		s.set(loc{reg: 2}, unknown, 8)
		s.fl = flagsInfo{}
		return
	case x86asm.MOVSB, x86asm.MOVSW, x86asm.MOVSD, x86asm.MOVSQ, x86asm.STOSB, x86asm.STOSW,
		x86asm.STOSD, x86asm.STOSQ, x86asm.LODSB, x86asm.LODSW, x86asm.LODSD, x86asm.LODSQ,
		x86asm.SCASB, x86asm.SCASW, x86asm.SCASD, x86asm.SCASQ, x86asm.CMPSB, x86asm.CMPSW,
		x86asm.CMPSD, x86asm.CMPSQ:
		if in.Op == x86asm.MOVSD && a1 != nil {
			if _, ok := a0.(x86asm.Reg); ok {
				break // the SSE move of a double
			}
			if _, ok := a1.(x86asm.Reg); ok {
				break
			}
		}
		if d := s.gpr[7]; d.k == vPtr && d.base == bStack {
			s.clobberSlots(d.c, 1<<62) // a string store into the frame
		} else {
			m.clobberEscaped(s)
		}
		for _, r := range []int{0, 1, 6, 7} {
			s.set(loc{reg: r}, unknown, 8)
		}
		s.fl = flagsInfo{}
		return
	}
	if isJcc(in.Op) {
		return
	}
	// Anything else writes its first operand with what it read.
	var t tag
	var loads int
	for _, a := range in.Args {
		if a == nil {
			break
		}
		v := m.read(s, a, in, next)
		t |= v.tags
		loads += int(v.loads)
	}
	out := val{tags: t, loads: uint8(min(loads, 3))}
	if a0 != nil && !(in.Op == x86asm.BT || in.Op == x86asm.UCOMISS || in.Op == x86asm.UCOMISD || in.Op == x86asm.COMISS || in.Op == x86asm.COMISD || in.Op == x86asm.PTEST) {
		if _, isImm := a0.(x86asm.Imm); !isImm {
			m.write(s, a0, out, in, next)
		}
	}
	resultFlags(a0, out)
}

// arith is ADD (sign 1) or SUB (sign -1): constants and pointers move by
// constants; anything else is unknown with both operands' tags.
func (m *machine) arith(s *state, in *x86asm.Inst, next uint64, sign int64, flags func(x86asm.Arg, val)) {
	a, b := m.read(s, in.Args[0], in, next), m.read(s, in.Args[1], in, next)
	out := combine(a, b)
	op := " + "
	if sign < 0 {
		op = " - "
	}
	switch {
	case a.k == vConst && b.k == vConst:
		out = constant(a.c + sign*b.c)
	case a.k == vPtr && b.k == vConst:
		out = ptr(a.base, a.c+sign*b.c, a.tags)
	case b.k == vPtr && a.k == vConst && sign > 0:
		out = ptr(b.base, b.c+a.c, b.tags)
	default:
		if a.k == vPtr {
			out.tags |= baseTag(a.base)
		}
		if b.k == vPtr {
			out.tags |= baseTag(b.base)
		}
		out.expr = short("(" + a.describe() + op + b.describe() + ")")
	}
	m.write(s, in.Args[0], out, in, next)
	if r, ok := in.Args[0].(x86asm.Reg); !ok || r != x86asm.RSP {
		flags(in.Args[0], out)
	}
}

func isJcc(op x86asm.Op) bool {
	_, ok := jccCond[op]
	return ok
}
