package errsite

import "golang.org/x/arch/x86/x86asm"

// What a conditional jump says of a value compared with zero (test x,x;
// cmp x,0; or the result of an arithmetic instruction, for ZF alone).

type cond uint8

const (
	condE cond = iota + 1
	condNE
	condA
	condBE
	condB
	condAE
	condG
	condLE
	condL
	condGE
	condS
	condNS
	condOther
)

var jccCond = map[x86asm.Op]cond{
	x86asm.JE: condE, x86asm.JNE: condNE, x86asm.JA: condA, x86asm.JBE: condBE,
	x86asm.JB: condB, x86asm.JAE: condAE, x86asm.JG: condG, x86asm.JLE: condLE,
	x86asm.JL: condL, x86asm.JGE: condGE, x86asm.JS: condS, x86asm.JNS: condNS,
	x86asm.JO: condOther, x86asm.JNO: condOther, x86asm.JP: condOther, x86asm.JNP: condOther,
	x86asm.JCXZ: condOther, x86asm.JECXZ: condOther, x86asm.JRCXZ: condOther,
	x86asm.LOOP: condOther, x86asm.LOOPE: condOther, x86asm.LOOPNE: condOther,
}

// cmovJump is the jump of each conditional move's condition.
var cmovJump = map[x86asm.Op]x86asm.Op{
	x86asm.CMOVE: x86asm.JE, x86asm.CMOVNE: x86asm.JNE, x86asm.CMOVA: x86asm.JA,
	x86asm.CMOVAE: x86asm.JAE, x86asm.CMOVB: x86asm.JB, x86asm.CMOVBE: x86asm.JBE,
	x86asm.CMOVG: x86asm.JG, x86asm.CMOVGE: x86asm.JGE, x86asm.CMOVL: x86asm.JL,
	x86asm.CMOVLE: x86asm.JLE, x86asm.CMOVS: x86asm.JS, x86asm.CMOVNS: x86asm.JNS,
	x86asm.CMOVO: x86asm.JO, x86asm.CMOVNO: x86asm.JNO, x86asm.CMOVP: x86asm.JP,
	x86asm.CMOVNP: x86asm.JNP,
}

type zeroness uint8

const (
	zNothing zeroness = iota
	zZero
	zNonZero
)

// implied is what the jump, taken or not, says of the subject: after a
// compare with zero (cmp), every condition speaks; after an arithmetic
// result, only ZF does.
func implied(op x86asm.Op, taken, cmp bool) zeroness {
	c := jccCond[op]
	if !taken {
		switch c {
		case condE:
			c = condNE
		case condNE:
			c = condE
		case condA:
			c = condBE
		case condBE:
			c = condA
		case condG:
			c = condLE
		case condLE:
			c = condG
		case condL:
			c = condGE
		case condGE:
			c = condL
		case condB:
			c = condAE
		case condAE:
			c = condB
		default:
			return zNothing
		}
	}
	switch c {
	case condE:
		return zZero
	case condNE:
		return zNonZero
	}
	if !cmp {
		return zNothing
	}
	switch c {
	case condA, condG, condL: // unsigned above 0, signed above or below it
		return zNonZero
	case condBE: // unsigned at most 0
		return zZero
	}
	return zNothing
}

// refineBy narrows v by what a jump says of it; ok is false when the
// edge cannot be taken with v.
func refineBy(v val, z zeroness, width int) (val, bool) {
	switch z {
	case zZero:
		if width <= 32 && v.nonZero32() || width > 32 && nonZero64(v) {
			return v, false
		}
		out := constant(0)
		out.tags, out.loads = v.tags, v.loads
		return out, true
	case zNonZero:
		if v.isZero() {
			return v, false
		}
		if v.k == vUnknown || v.k == vNonZero && v.c > int64(width) {
			return val{k: vNonZero, c: int64(max(width, 8)), tags: v.tags, loads: v.loads, expr: v.expr}, true
		}
	}
	return v, true
}

// edge is the state along one edge out of a conditional jump: the
// subject of the flags narrowed, or ok false when the edge cannot be
// taken. nz reports the subject became known non-zero on this edge.
func edge(s *state, op x86asm.Op, taken bool) (out *state, ok bool, nz bool) {
	f := s.fl
	if !f.hasSubj {
		return s, true, false
	}
	z := implied(op, taken, f.cmp)
	if z == zNothing {
		return s, true, false
	}
	before := s.get(f.subj)
	v, ok := refineBy(before, z, f.width)
	if !ok {
		return nil, false, false
	}
	if v == before {
		return s, true, false
	}
	out = s.clone()
	fl := out.fl
	size := 8
	if f.subj.slot {
		size = max(f.width/8, 1)
		if sl, ok := out.slots[f.subj.off]; ok {
			size = sl.size
		}
	}
	out.set(f.subj, v, size)
	out.fl = fl
	return out, true, v.k == vNonZero && before.k != vNonZero
}
