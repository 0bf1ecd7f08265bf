package errsite

import (
	"fmt"
	"sort"

	"github.com/sqscope/sqscope/ibv"
	"golang.org/x/arch/x86/x86asm"
)

// maxErrno is the largest Linux errno (EHWPOISON): the constants a verbs
// call returns on failure are in [1, maxErrno].
const maxErrno = 133

// candidate is an instruction that may begin an error path: it writes an
// errno constant to l (konst set), or is entered with l known non-zero.
type candidate struct {
	pc    uint64
	l     loc
	konst int64
}

func (a *analysis) candidates() []candidate {
	var out []candidate
	for pc, st := range a.in {
		in := a.insts[pc]
		if in.Op == x86asm.MOV {
			if imm, ok := in.Args[1].(x86asm.Imm); ok && imm >= 1 && imm <= maxErrno {
				next := pc + uint64(in.Len)
				if l, ok := a.m.argLoc(st, in.Args[0], next); ok && (l.slot || in.DataSize >= 32) {
					out = append(out, candidate{pc: pc, l: l, konst: int64(imm)})
				}
			}
		}
		for _, l := range a.nz[pc] {
			if st.get(l).k == vNonZero {
				out = append(out, candidate{pc: pc, l: l})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pc != out[j].pc {
			return out[i].pc < out[j].pc
		}
		return out[i].konst > out[j].konst
	})
	return out
}

// findSites runs the second phase from every candidate: a candidate is a
// site when every path from it returns a non-zero value.
func (a *analysis) findSites() {
	seen := map[uint64]bool{}
	for _, c := range a.candidates() {
		if seen[c.pc] {
			continue
		}
		exact, why := a.errorOnly(c)
		in := a.insts[c.pc]
		if why != "" {
			if c.konst == ibv.ENOMEM || c.konst == ibv.EINVAL || c.konst == ibv.EOPNOTSUPP {
				a.rep.Rejected = append(a.rep.Rejected, Rejected{Offset: a.off(c.pc), Inst: a.text(in), Why: why})
			}
			continue
		}
		seen[c.pc] = true
		st := a.in[c.pc]
		s := Site{Offset: a.off(c.pc), Addr: c.pc, Inst: a.text(in), Errno: int(c.konst), Exact: exact}
		if c.konst == 0 {
			s.ErrnoAt = a.locOf(st, c.l)
		}
		s.QP = first(st.where(func(v val) bool { return v.k == vPtr && v.base == bQP }))
		if a.role == PostSend {
			s.WR = first(st.where(func(v val) bool { return v.k == vPtr && v.base == bWR && v.c == 0 }))
		}
		s.Guards = a.guards(c.pc)
		for _, g := range s.Guards {
			if !containsCause(s.Causes, g.Cause) {
				s.Causes = append(s.Causes, g.Cause)
			}
		}
		a.rep.Sites = append(a.rep.Sites, s)
	}
}

func containsCause(cs []Cause, c Cause) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// first picks the best location: the pointer itself before one moved by
// an offset, then registers before slots (where orders them).
func first(ls []Loc) Loc {
	for _, l := range ls {
		if l.Adjust == 0 {
			return l
		}
	}
	if len(ls) > 0 {
		return ls[0]
	}
	return Loc{}
}

func (a *analysis) locOf(st *state, l loc) Loc {
	if !l.slot {
		return Loc{Kind: InReg, Reg: Reg(l.reg)}
	}
	if sp, ok := st.rsp(); ok {
		return Loc{Kind: InStack, Off: l.off - sp}
	}
	return Loc{}
}

// errorOnly follows every path from the candidate with its value marked
// and says whether each return gives it (exact) or at least some non-zero
// value; why says what breaks the proof.
func (a *analysis) errorOnly(c candidate) (exact bool, why string) {
	saved := a.m
	defer func() { a.m = saved }()
	site := val{k: vSite, c: c.konst, tags: tSite}
	init := a.in[c.pc].clone()
	var after func(pc uint64, s *state)
	if c.konst == 0 {
		init.set(c.l, site, 8)
		init.fl = a.in[c.pc].fl
	} else {
		after = func(pc uint64, s *state) {
			if pc == c.pc {
				size := 8
				if c.l.slot {
					size = memSize(&a.insts[pc].Inst)
				}
				fl := s.fl
				s.set(c.l, site, size)
				s.fl = fl
			}
		}
	}
	exact = true
	rets, carried := 0, 0
	in := map[uint64]*state{}
	a.runFrom(c.pc, init, in, after, func(pc uint64, t terminal, s *state) {
		if why != "" {
			return
		}
		switch t {
		case termRet:
			rets++
			v := s.gpr[0]
			if v.tags&tSite != 0 {
				carried++
			}
			switch {
			case v.k == vSite:
			case v.nonZero32():
				exact = false
			default:
				why = fmt.Sprintf("the return at %#x gives %s on some path", a.off(pc), v.describe())
			}
		case termUnknown:
			why = fmt.Sprintf("a path leaves the code followed at %#x", a.off(pc))
		}
	})
	switch {
	case why != "":
	case rets == 0:
		why = "no path from here returns"
	case carried == 0:
		why = "the value does not reach the result (the path fails for another reason)"
	}
	return exact, why
}

// runFrom is run with an optional change to the state after the
// instruction at each pc (the site's write).
func (a *analysis) runFrom(start uint64, init *state, in map[uint64]*state, after func(uint64, *state), atTerm func(uint64, terminal, *state)) {
	a.afterStep = after
	defer func() { a.afterStep = nil }()
	a.run(start, init, in, nil, atTerm)
}

// guards finds the conditional jumps that decide whether the site runs:
// R is the set of reached instructions from which every path goes
// through the site (the site, and each instruction all of whose ways out
// lead into R); a guard is a jump outside R with a way into it. The
// entry in R means every call runs the site.
func (a *analysis) guards(pc uint64) []Guard {
	// A path that ends in a trap never returns: it neither avoids the
	// site nor reaches it, so it counts as inside R but is no way in.
	trap := a.closure(func(p uint64) bool { return a.term[p] == termTrap })
	inR := a.closure(func(p uint64) bool { return p == pc || trap[p] })
	var out []Guard
	if inR[a.vstart] && !trap[a.vstart] {
		out = append(out, Guard{Entry: true, Cause: CauseEveryCall})
	}
	for p := range a.in {
		if inR[p] || !isJcc(a.insts[p].Op) {
			continue
		}
		for _, e := range a.succ[p] {
			if inR[e.to] && !trap[e.to] && a.edgeTaken(p, e) {
				out = append(out, a.guard(p, e.taken))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Branch != out[j].Branch {
			return out[i].Branch < out[j].Branch
		}
		return out[i].Taken
	})
	return dedupGuards(out)
}

// closure is the set of reached instructions that seed selects, grown
// by every instruction whose ways out all lead into the set.
func (a *analysis) closure(seed func(uint64) bool) map[uint64]bool {
	in := map[uint64]bool{}
	left := map[uint64]int{} // ways out not yet known to lead into the set
	var work []uint64
	for p := range a.in {
		left[p] = len(a.succ[p])
		if seed(p) {
			in[p] = true
			work = append(work, p)
		}
	}
	for len(work) > 0 {
		q := work[len(work)-1]
		work = work[:len(work)-1]
		for _, p := range a.preds[q] {
			if in[p] || a.term[p] != termNone {
				continue
			}
			for _, e := range a.succ[p] {
				if e.to == q {
					left[p]--
				}
			}
			if left[p] <= 0 {
				in[p] = true
				work = append(work, p)
			}
		}
	}
	return in
}

// edgeTaken says whether the first phase found the edge feasible.
func (a *analysis) edgeTaken(p uint64, e succ) bool {
	for _, q := range a.preds[e.to] {
		if q == p {
			return true
		}
	}
	return false
}

func dedupGuards(gs []Guard) []Guard {
	var out []Guard
	for i, g := range gs {
		if i > 0 && g == gs[i-1] {
			continue
		}
		out = append(out, g)
	}
	return out
}

func (a *analysis) guard(p uint64, taken bool) Guard {
	pin := a.insts[p]
	fl := a.in[p].fl
	g := Guard{Branch: a.off(p), Inst: a.text(pin), Taken: taken}
	if fl.at != 0 {
		g.CompareAt, g.Compare = a.off(fl.at), fl.text
		if fl.cmp && fl.a != fl.b {
			g.Operands = fl.a.describe() + " vs " + fl.b.describe()
		} else {
			g.Operands = fl.a.describe()
		}
	}
	g.Cause = classify(fl)
	return g
}

// checkCFA compares the stack depth the analysis tracked with the CFA
// rule of the unwind table at every reached instruction where that rule
// is the stack pointer plus a constant.
func (a *analysis) checkCFA() {
	for pc, st := range a.in {
		sp, ok := st.rsp()
		f, inFDE := a.fdes[pc]
		if !ok || !inFDE {
			continue
		}
		cfa, err := f.CFAAt(pc)
		if err != nil || cfa.Expr || cfa.Reg != dwarfRSP {
			continue
		}
		a.rep.CFAChecked++
		// The CFA is the stack pointer before the call: entry rsp + 8.
		if want := 8 - cfa.Off; sp != want {
			a.rep.CFAMismatch++
			a.note("%#x: the stack pointer is entry%+d by the code, entry%+d by the unwind table", a.off(pc), sp, want)
		}
	}
	sort.Strings(a.rep.Notes)
}
