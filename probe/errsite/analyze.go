// Package errsite finds, in a provider library's machine code, the
// instructions that run only when a data-path call fails: where a uprobe
// costs the application nothing while its posts succeed. Given an x86-64
// ELF file and the file offset of a function (post_send, wr_complete),
// it reads the function's bounds from .eh_frame, disassembles it, and
// lists its error sites: each instruction that puts an errno into what
// the function returns, proven by following every path from it to a
// return, with where the function's first argument (the QP) and the WR
// being posted are at that instruction, and what the branches leading
// there compare (the cause, where the compared values say it).
//
// It reads only the file: no process, no kernel, no cgo.
package errsite

import (
	"fmt"
	"sort"
	"strings"

	"golang.org/x/arch/x86/x86asm"
)

// Role says what the analysed function is, and so what its arguments are.
type Role uint8

const (
	// PostSend is int post_send(struct ibv_qp *qp, struct ibv_send_wr
	// *wr, struct ibv_send_wr **bad_wr).
	PostSend Role = iota + 1
	// WRComplete is int wr_complete(struct ibv_qp_ex *qp).
	WRComplete
)

func (r Role) String() string {
	switch r {
	case PostSend:
		return "post_send"
	case WRComplete:
		return "wr_complete"
	}
	return fmt.Sprintf("role %d", uint8(r))
}

// Func names the function to analyse: Start is the file offset of its
// first instruction (what a uprobe takes); End, when not 0, the file
// offset just past it, else the end the FDE covering Start gives.
type Func struct {
	Start, End uint64
	Role       Role
}

// Region is a range of code the analysis followed, in file offsets: the
// function, and code it jumps to outside its own FDE (a cold part, or a
// function it tail-calls).
type Region struct {
	Start, End uint64
	FromFDE    bool // the bounds are an FDE's
}

// Report is what the analysis found in one function.
type Report struct {
	Func    Func
	Regions []Region
	Insts   int // instructions decoded in Regions
	Reached int // of them, reached from the entry
	Sites   []Site
	// Rejected lists the errno writes that are not error-only, with why.
	Rejected []Rejected
	// CFAChecked counts the reached instructions whose stack depth the
	// analysis compared with the CFA rule of the unwind table, and
	// CFAMismatch those where they disagree (each also in Notes).
	CFAChecked, CFAMismatch int
	// Notes say what the analysis could not follow, and where.
	Notes []string
}

// Rejected is an instruction that writes an errno constant (or a value
// tested non-zero) that does not reach every return of the call.
type Rejected struct {
	Offset uint64
	Inst   string
	Why    string
}

// Site is an instruction a uprobe may be placed on to see one failure.
type Site struct {
	Offset uint64 // file offset: where the uprobe goes
	Addr   uint64 // the same instruction's virtual address in the file's layout
	Inst   string // the instruction, in GNU syntax
	// Errno is the error the call returns from here; 0 when the value is
	// not a constant of the code and is read at run time from ErrnoAt.
	Errno   int
	ErrnoAt Loc
	// Exact says the call returns exactly this error on every path from
	// the site; false says it fails on every path, with this error
	// unless a later step fails too and returns its own (rxe's doorbell
	// write after a refused WR).
	Exact bool
	// QP is where the function's first argument (the ibv_qp, or the
	// ibv_qp_ex of wr_complete) is when the site is about to run; WR the
	// WR being posted (post_send), which the code stores as *bad_wr.
	QP, WR Loc
	// Guards are the conditional jumps whose outcome leads here, each with
	// the compare it tests and the cause that compare suggests.
	Guards []Guard
	// Causes are the distinct causes of the guards, in order: one means
	// every way here is that check; more than one means the code merged
	// the checks' failures and the cause is to be told apart at run time
	// (from the WR and the QP's caps and state).
	Causes []Cause
}

// Analyze opens the ELF file at path and analyses fn in it.
func Analyze(path string, fn Func) (*Report, error) {
	b, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return b.Analyze(fn)
}

// inst is one decoded instruction.
type inst struct {
	x86asm.Inst
	pc   uint64
	text string
}

// terminal says how a path ends at an instruction with no successor.
type terminal uint8

const (
	termNone    terminal = iota
	termRet              // a return: the value in eax is the result
	termTrap             // ud2, hlt, or a call that does not return
	termUnknown          // an indirect jump not resolved, or code not found
)

// analysis is one function's decoded code and first-phase states.
type analysis struct {
	b     *Binary
	rep   *Report
	insts map[uint64]*inst
	order []uint64 // addresses of insts, sorted
	fdes  map[uint64]FDE
	succ  map[uint64][]succ
	term  map[uint64]terminal
	preds map[uint64][]uint64
	in    map[uint64]*state
	nz    map[uint64][]loc // instructions entered by an edge that made a location non-zero
	m     machine
	role  Role
	// afterStep, when set, changes the state after an instruction (the
	// second phase's write of the site's value).
	afterStep func(pc uint64, s *state)
	vstart    uint64
}

// Analyze analyses fn in b.
func (b *Binary) Analyze(fn Func) (*Report, error) {
	if fn.Role != PostSend && fn.Role != WRComplete {
		return nil, fmt.Errorf("role %d is not post_send or wr_complete", fn.Role)
	}
	vstart, err := b.VAddr(fn.Start)
	if err != nil {
		return nil, err
	}
	fde, ok := b.frames.Covering(vstart)
	if !ok {
		return nil, fmt.Errorf("no FDE covers offset %#x (address %#x): no function bounds", fn.Start, vstart)
	}
	if fde.Start != vstart {
		return nil, fmt.Errorf("offset %#x is %#x bytes into the function at %#x, not its start", fn.Start, vstart-fde.Start, fde.Start)
	}
	if fn.End != 0 {
		vend, err := b.VAddr(fn.End - 1)
		if err != nil || vend+1 <= vstart {
			return nil, fmt.Errorf("end offset %#x is not past the start %#x in the same segment", fn.End, fn.Start)
		}
		fde.End = vend + 1
	} else {
		end, _ := b.FileOffset(fde.End - 1)
		fn.End = end + 1
	}
	a := &analysis{
		b: b, rep: &Report{Func: fn}, insts: map[uint64]*inst{}, fdes: map[uint64]FDE{},
		role: fn.Role, vstart: vstart,
	}
	if err := a.decode(fde, fn.End != 0); err != nil {
		return nil, err
	}
	a.firstPhase()
	a.findSites()
	a.checkCFA()
	sort.Slice(a.rep.Regions, func(i, j int) bool { return a.rep.Regions[i].Start < a.rep.Regions[j].Start })
	return a.rep, nil
}

// decode disassembles one FDE's range (or the caller's bounds).
func (a *analysis) decode(f FDE, fromFDE bool) error {
	code, err := a.b.code(f.Start, f.End)
	if err != nil {
		return err
	}
	startOff, _ := a.b.FileOffset(f.Start)
	a.rep.Regions = append(a.rep.Regions, Region{Start: startOff, End: startOff + (f.End - f.Start), FromFDE: fromFDE})
	for i := 0; i < len(code); {
		pc := f.Start + uint64(i)
		in, err := x86asm.Decode(code[i:], 64)
		if err != nil {
			a.note("%#x: cannot decode (%v): the code after it in this range is not followed", a.off(pc), err)
			break
		}
		a.insts[pc] = &inst{Inst: in, pc: pc}
		a.fdes[pc] = f
		a.order = append(a.order, pc)
		a.rep.Insts++
		i += in.Len
	}
	sort.Slice(a.order, func(i, j int) bool { return a.order[i] < a.order[j] })
	return nil
}

func (a *analysis) note(format string, args ...any) {
	a.rep.Notes = append(a.rep.Notes, fmt.Sprintf(format, args...))
}

func (a *analysis) off(pc uint64) uint64 {
	o, err := a.b.FileOffset(pc)
	if err != nil {
		return pc
	}
	return o
}

func (a *analysis) text(in *inst) string {
	if in.text == "" {
		in.text = strings.ReplaceAll(x86asm.GNUSyntax(in.Inst, in.pc, a.symname), ",%riz", "")
	}
	return in.text
}

func (a *analysis) symname(addr uint64) (string, uint64) {
	if s, ok := a.b.plt[addr]; ok {
		return s + "@plt", addr
	}
	return "", 0
}

// reach makes sure the code at pc is decoded, following a jump out of
// the regions into the FDE that covers it.
func (a *analysis) reach(pc uint64) bool {
	if _, ok := a.insts[pc]; ok {
		return true
	}
	if _, ok := a.fdes[pc]; ok {
		return false // inside a decoded range, not on an instruction boundary
	}
	f, ok := a.b.frames.Covering(pc)
	if !ok {
		return false
	}
	for _, r := range a.rep.Regions {
		if v, _ := a.b.VAddr(r.Start); v == f.Start {
			return false
		}
	}
	if err := a.decode(f, true); err != nil {
		return false
	}
	_, ok = a.insts[pc]
	return ok
}

// noReturn are the library functions a call never comes back from.
var noReturn = map[string]bool{
	"__stack_chk_fail": true, "abort": true, "exit": true, "_exit": true, "__assert_fail": true,
	"__fortify_fail": true, "__chk_fail": true, "longjmp": true, "siglongjmp": true,
	"__longjmp_chk": true, "pthread_exit": true, "err": true, "errx": true, "verr": true, "verrx": true,
	"__cxa_throw": true, "_Unwind_Resume": true,
}

// succ is one way out of an instruction; taken says a conditional jump
// jumped.
type succ struct {
	to    uint64
	taken bool
}

// successors lists where control goes after the instruction at pc, and
// how a path ends there when it goes nowhere (or partly nowhere).
func (a *analysis) successors(pc uint64) ([]succ, terminal) {
	if s, ok := a.succ[pc]; ok {
		return s, a.term[pc]
	}
	in := a.insts[pc]
	next := pc + uint64(in.Len)
	var out []succ
	t := termNone
	target := func() (uint64, bool) {
		if r, ok := in.Args[0].(x86asm.Rel); ok {
			return uint64(int64(next) + int64(r)), true
		}
		return 0, false
	}
	follow := func(to uint64, taken bool) {
		if a.reach(to) {
			out = append(out, succ{to, taken})
		} else {
			a.note("%#x: %s goes to %#x, which is no instruction of a known function", a.off(pc), a.text(in), to)
			t = termUnknown
		}
	}
	switch {
	case in.Op == x86asm.RET:
		t = termRet
	case in.Op == x86asm.UD2 || in.Op == x86asm.HLT || in.Op == x86asm.INT:
		t = termTrap
	case in.Op == x86asm.JMP:
		if to, ok := target(); ok {
			follow(to, false)
		} else if tab, ok := a.jumpTable(pc); ok {
			for _, to := range tab {
				follow(to, false)
			}
		} else {
			a.note("%#x: %s: an indirect jump not resolved", a.off(pc), a.text(in))
			t = termUnknown
		}
	case isJcc(in.Op):
		to, _ := target()
		follow(to, true)
		follow(next, false)
	case in.Op == x86asm.CALL:
		if to, ok := target(); ok && noReturn[a.b.plt[to]] {
			t = termTrap
		} else {
			follow(next, false)
		}
	default:
		follow(next, false)
	}
	if a.succ == nil {
		a.succ, a.term = map[uint64][]succ{}, map[uint64]terminal{}
	}
	a.succ[pc], a.term[pc] = out, t
	return out, t
}

// jumpTable resolves the jump of a switch as GCC emits it for
// position-independent code: lea TABLE(%rip),T; movslq (T,I,4),R;
// add T,R; jmp *R, with the index bounded by cmp $N,I; ja before it.
func (a *analysis) jumpTable(pc uint64) ([]uint64, bool) {
	r, ok := a.insts[pc].Args[0].(x86asm.Reg)
	if !ok {
		return nil, false
	}
	i := sort.Search(len(a.order), func(i int) bool { return a.order[i] >= pc })
	var table uint64
	var tReg, idx x86asm.Reg
	var n int64 = -1
	aliases := map[int]bool{}
	for k := i - 1; k >= 0 && k >= i-16; k-- {
		in := a.insts[a.order[k]]
		switch {
		case tReg == 0 && in.Op == x86asm.ADD && in.Args[0] == r:
			tReg, _ = in.Args[1].(x86asm.Reg)
		case tReg != 0 && idx == 0 && in.Op == x86asm.MOVSXD && in.Args[0] == r:
			m, ok := in.Args[1].(x86asm.Mem)
			if !ok || m.Base != tReg || m.Scale != 4 {
				return nil, false
			}
			idx = m.Index
			if n, _, _, ok := gpr(idx); ok {
				aliases[n] = true
			}
		case tReg != 0 && in.Op == x86asm.LEA && in.Args[0] == tReg:
			m := in.Args[1].(x86asm.Mem)
			if m.Base != x86asm.RIP || table != 0 {
				return nil, false
			}
			table = uint64(int64(in.pc) + int64(in.Len) + m.Disp)
		case idx != 0 && in.Op == x86asm.MOV:
			d, _, _, ok1 := gpr(regOf(in.Args[0]))
			s, _, _, ok2 := gpr(regOf(in.Args[1]))
			if ok1 && ok2 && aliases[d] {
				aliases[s] = true
			}
		case idx != 0 && in.Op == x86asm.CMP && n < 0:
			d, _, _, ok := gpr(regOf(in.Args[0]))
			imm, isImm := in.Args[1].(x86asm.Imm)
			nxt, ok2 := a.insts[in.pc+uint64(in.Len)]
			if ok && isImm && aliases[d] && ok2 {
				switch nxt.Op {
				case x86asm.JA:
					n = int64(imm) + 1
				case x86asm.JAE:
					n = int64(imm)
				}
			}
		}
		if table != 0 && n >= 0 {
			break
		}
	}
	if table == 0 || n <= 0 || n > 4096 {
		return nil, false
	}
	data, ok := a.b.readData(table, int(n)*4)
	if !ok {
		return nil, false
	}
	out := make([]uint64, 0, n)
	for k := int64(0); k < n; k++ {
		d := int32(uint32(data[4*k]) | uint32(data[4*k+1])<<8 | uint32(data[4*k+2])<<16 | uint32(data[4*k+3])<<24)
		out = append(out, uint64(int64(table)+int64(d)))
	}
	return out, true
}

func regOf(a x86asm.Arg) x86asm.Reg {
	r, _ := a.(x86asm.Reg)
	return r
}

// entryState is what is known at the function's first instruction.
func (a *analysis) entryState() *state {
	s := &state{slots: map[int64]slot{}}
	s.gpr[7] = ptr(bQP, 0, tQP)
	if a.role == PostSend {
		s.gpr[6] = ptr(bWR, 0, tWR)
		s.gpr[2] = ptr(bArg2, 0, tArgs)
	}
	s.gpr[regRSP] = ptr(bStack, 0, 0)
	s.slots[0] = slot{unknown, 8} // the return address
	return s
}

// firstPhase computes, for every instruction reached from the entry, the
// state on every path into it. A stack address found to escape late
// restarts it, so that slots are forgotten from the start.
func (a *analysis) firstPhase() {
	for round := 0; round < 4; round++ {
		before := a.m
		a.in, a.nz, a.preds = map[uint64]*state{}, map[uint64][]loc{}, map[uint64][]uint64{}
		a.run(a.vstart, a.entryState(), a.in, func(from, to uint64, nz []loc) {
			a.preds[to] = appendUnique(a.preds[to], from)
			for _, l := range nz {
				a.nz[to] = appendLoc(a.nz[to], l)
			}
		}, nil)
		if a.m == before {
			break
		}
	}
	a.rep.Reached = len(a.in)
}

func appendUnique(s []uint64, v uint64) []uint64 {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func appendLoc(s []loc, l loc) []loc {
	for _, x := range s {
		if x == l {
			return s
		}
	}
	return append(s, l)
}

// run propagates states from start (whose in-state is init) to a fixed
// point, filling in; onEdge sees every edge taken, atTerm every path's
// end with the state there.
func (a *analysis) run(start uint64, init *state, in map[uint64]*state, onEdge func(from, to uint64, nz []loc), atTerm func(pc uint64, t terminal, s *state)) {
	in[start] = init
	work := []uint64{start}
	queued := map[uint64]bool{start: true}
	for steps := 0; len(work) > 0; steps++ {
		if steps > 200000 {
			a.note("the analysis stopped after %d steps without settling", steps)
			return
		}
		pc := work[len(work)-1]
		work = work[:len(work)-1]
		queued[pc] = false
		ins := a.insts[pc]
		out := in[pc].clone()
		a.m.step(out, &ins.Inst, pc)
		if a.afterStep != nil {
			a.afterStep(pc, out)
		}
		outs, t := a.successors(pc)
		if t != termNone && atTerm != nil {
			atTerm(pc, t, out)
		}
		for _, e := range outs {
			to, s := e.to, out
			var nz []loc
			if isJcc(ins.Op) {
				var ok, became bool
				s, ok, became = edge(out, ins.Op, e.taken)
				if !ok {
					continue
				}
				if became {
					nz = []loc{out.fl.subj}
				}
			}
			if onEdge != nil {
				onEdge(pc, to, nz)
			}
			if old, ok := in[to]; ok {
				if !old.join(s) {
					continue
				}
			} else {
				in[to] = s.clone()
			}
			if !queued[to] {
				queued[to] = true
				work = append(work, to)
			}
		}
	}
}
