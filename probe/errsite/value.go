package errsite

import (
	"fmt"
	"maps"
	"strings"
)

// The abstract values the analysis keeps for each register and stack
// slot. A value is what is known on every path into an instruction (a
// must-analysis): joining two paths that disagree loses the knowledge.
// Tags ride along as what a value may derive from (joined by union), so
// that a compare can say what it compares even where the value is not
// known.

type vkind uint8

const (
	vUnknown vkind = iota
	vConst         // the constant c
	vNonZero       // not zero in its low c bits (32 or 64)
	vPtr           // base + c
	vSite          // the value the site under test wrote (second phase)
)

// base is what a pointer value is relative to.
type base uint8

const (
	bQP    base = iota + 1 // the first argument at entry (struct ibv_qp *, or ibv_qp_ex *)
	bWR                    // the WR being posted: the second argument, or a next pointer read from a WR
	bArg2                  // the third argument (post_send's bad_wr)
	bStack                 // the stack pointer at entry (c = offset from it)
)

// tag says what a value may derive from.
type tag uint16

const (
	tQP        tag = 1 << iota // the QP pointer or memory reachable from it
	tWR                        // a WR pointer, or a WR field not named below
	tNumSGE                    // the WR's num_sge
	tOpcode                    // the WR's opcode
	tSendFlags                 // the WR's send_flags
	tSGList                    // the WR's sg_list, or a pointer into the SGE array
	tSGE                       // a field of an SGE (length, address, key)
	tCall                      // the return value of a call
	tArgs                      // the third argument or memory it points to
	tFrame                     // an address in the function's own stack frame
	tSite                      // the site's value, or a join of it with others (second phase)
)

// tagsWR are the tags of data the WR carries.
const tagsWR = tWR | tNumSGE | tOpcode | tSendFlags | tSGList | tSGE

type val struct {
	k     vkind
	base  base
	c     int64
	tags  tag
	loads uint8  // how many loads of QP memory were combined into it (at most 3 counted)
	expr  string // what it is, for people; "" when not known
}

var unknown = val{}

func constant(c int64) val { return val{k: vConst, c: c, expr: fmt.Sprintf("%#x", c)} }

func ptr(b base, c int64, tags tag) val { return val{k: vPtr, base: b, c: c, tags: tags} }

// nonZero32 is true when the value's low 32 bits are not zero on every
// path: the int a function returns is not 0.
func (v val) nonZero32() bool {
	switch v.k {
	case vConst:
		return uint32(v.c) != 0
	case vNonZero:
		return v.c <= 32
	case vSite:
		return true
	}
	return false
}

func (v val) isZero() bool { return v.k == vConst && v.c == 0 }

// joinVal is the value known on both paths.
func joinVal(a, b val) val {
	if a == b {
		return a
	}
	out := val{tags: a.tags | b.tags, loads: max(a.loads, b.loads)}
	if a.expr == b.expr {
		out.expr = a.expr
	}
	switch {
	case a.k == b.k && a.k != vUnknown && a.base == b.base && a.c == b.c:
		out.k, out.base, out.c = a.k, a.base, a.c
	case a.k == vSite && b.k == vSite:
		out.k, out.c = vSite, a.c
		if a.c != b.c {
			out.c = 0
		}
	case a.nonZero32() && b.nonZero32():
		out.k, out.c = vNonZero, 32
	case nonZero64(a) && nonZero64(b):
		out.k, out.c = vNonZero, 64
	}
	return out
}

func nonZero64(v val) bool {
	return v.k == vConst && v.c != 0 || v.k == vNonZero || v.k == vSite
}

// combine is the result of arithmetic on a and b: its tags and loads.
func combine(a, b val) val {
	l := int(a.loads) + int(b.loads)
	return val{tags: a.tags | b.tags, loads: uint8(min(l, 3))}
}

// short keeps an expression readable.
func short(s string) string {
	if len(s) > 72 {
		return ""
	}
	return s
}

func (v val) describe() string {
	if v.expr != "" {
		return v.expr
	}
	switch v.k {
	case vConst:
		return fmt.Sprintf("%#x", v.c)
	case vPtr:
		return ptrExpr(v.base, v.c)
	case vSite:
		return "the error value"
	}
	return "?"
}

func ptrExpr(b base, c int64) string {
	name := map[base]string{bQP: "qp", bWR: "wr", bArg2: "bad_wr", bStack: "entry_rsp"}[b]
	switch {
	case c == 0:
		return name
	case c < 0:
		return fmt.Sprintf("%s-%#x", name, -c)
	}
	return fmt.Sprintf("%s+%#x", name, c)
}

// slot is a stack slot's value and its width in bytes.
type slot struct {
	v    val
	size int
}

// flagsInfo is what the flags say: the last compare, and which location's
// zero-ness ZF reflects (subject), while that location is unchanged.
type flagsInfo struct {
	at      uint64 // the instruction that set them; 0: nothing known
	text    string // that instruction as written
	a, b    val    // compared operands (a test or a compare); a alone for an arithmetic result
	cmp     bool   // a compare or test (a and b), not an arithmetic result
	subj    loc
	hasSubj bool
	width   int // bits of the subject's compare
}

// joinFlags keeps what both paths' flags say: one compare's, with its
// operands joined, or nothing when they come from different ones.
func joinFlags(f, g flagsInfo) flagsInfo {
	if f == g {
		return f
	}
	if f.at != g.at || f.cmp != g.cmp || f.width != g.width {
		return flagsInfo{}
	}
	f.a, f.b = joinVal(f.a, g.a), joinVal(f.b, g.b)
	if f.hasSubj != g.hasSubj || f.subj != g.subj {
		f.hasSubj = false
	}
	return f
}

// state is what is known before one instruction.
type state struct {
	gpr   [16]val
	vec   [32]tag // vector registers: tags only
	slots map[int64]slot
	fl    flagsInfo
}

func (s *state) clone() *state {
	c := *s
	c.slots = maps.Clone(s.slots)
	return &c
}

func (s *state) equal(o *state) bool {
	if s.gpr != o.gpr || s.vec != o.vec || s.fl != o.fl || len(s.slots) != len(o.slots) {
		return false
	}
	for k, v := range s.slots {
		if w, ok := o.slots[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// join merges o into s (in place) and says whether s changed.
func (s *state) join(o *state) bool {
	before := s.clone()
	for i := range s.gpr {
		s.gpr[i] = joinVal(s.gpr[i], o.gpr[i])
	}
	for i := range s.vec {
		s.vec[i] |= o.vec[i]
	}
	for k, v := range s.slots {
		w, ok := o.slots[k]
		if !ok || w.size != v.size {
			delete(s.slots, k)
			continue
		}
		s.slots[k] = slot{joinVal(v.v, w.v), v.size}
	}
	s.fl = joinFlags(s.fl, o.fl)
	return !s.equal(before)
}

// loc is a place a value lives: a general register or a stack slot.
type loc struct {
	slot bool
	reg  int   // x86 register number, 0 (rax) to 15 (r15)
	off  int64 // a slot's offset from the stack pointer at entry
}

func (s *state) get(l loc) val {
	if !l.slot {
		return s.gpr[l.reg]
	}
	if sl, ok := s.slots[l.off]; ok {
		return sl.v
	}
	return unknown
}

func (s *state) set(l loc, v val, size int) {
	if !l.slot {
		s.gpr[l.reg] = v
	} else {
		s.clobberSlots(l.off, l.off+int64(size))
		s.slots[l.off] = slot{v, size}
	}
	if s.fl.hasSubj && s.fl.subj == l {
		s.fl.hasSubj = false
	}
}

// clobberSlots forgets the slots overlapping [lo, hi).
func (s *state) clobberSlots(lo, hi int64) {
	for k, v := range s.slots {
		if k < hi && k+int64(v.size) > lo {
			delete(s.slots, k)
			if s.fl.hasSubj && s.fl.subj.slot && s.fl.subj.off == k {
				s.fl.hasSubj = false
			}
		}
	}
}

// rsp is the stack pointer's offset from its value at entry, when known.
func (s *state) rsp() (int64, bool) {
	v := s.gpr[regRSP]
	return v.c, v.k == vPtr && v.base == bStack
}

// where lists the locations holding exactly want, registers first, as
// a uprobe at this instruction reads them.
func (s *state) where(want func(val) bool) []Loc {
	var out []Loc
	for _, r := range preferredRegs {
		if r != regRSP && want(s.gpr[r]) {
			out = append(out, Loc{Kind: InReg, Reg: Reg(r), Adjust: s.gpr[r].c})
		}
	}
	if sp, ok := s.rsp(); ok {
		offs := make([]int64, 0, len(s.slots))
		for k, v := range s.slots {
			if v.size == 8 && want(v.v) {
				offs = append(offs, k)
			}
		}
		sortInts(offs)
		for _, k := range offs {
			out = append(out, Loc{Kind: InStack, Off: k - sp, Adjust: s.slots[k].v.c})
		}
	}
	return out
}

// preferredRegs orders registers as a reader wants them: the callee-saved
// ones first (they hold a value across calls), then the others.
var preferredRegs = []int{3, 5, 12, 13, 14, 15, 0, 1, 2, 6, 7, 8, 9, 10, 11}

func sortInts(a []int64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// Reg is a general register by its x86 number.
type Reg int

var regNames = [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}

func (r Reg) String() string {
	if r < 0 || int(r) >= len(regNames) {
		return fmt.Sprintf("reg%d", int(r))
	}
	return regNames[r]
}

// LocKind says where a value is at a site.
type LocKind uint8

const (
	Unknown LocKind = iota // not proven to be anywhere
	InReg                  // in register Reg
	InStack                // in the 8 bytes at the stack pointer plus Off
)

// Loc is where a value is when an instruction is about to run, as a
// uprobe there reads it: the value is the register's (or the slot's)
// content minus Adjust (a pointer the code moved by Adjust bytes, such as
// the provider's own QP struct around the ibv_qp).
type Loc struct {
	Kind   LocKind
	Reg    Reg
	Off    int64
	Adjust int64
}

func (l Loc) String() string {
	var s string
	switch l.Kind {
	case InReg:
		s = "%" + l.Reg.String()
	case InStack:
		s = fmt.Sprintf("%#x(%%rsp)", l.Off)
	default:
		return "unknown"
	}
	if l.Adjust != 0 {
		s += fmt.Sprintf(" (%+#x)", l.Adjust)
	}
	return s
}

func joinLocs(ls []Loc) string {
	if len(ls) == 0 {
		return "unknown"
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ", ")
}

const regRSP = 4
