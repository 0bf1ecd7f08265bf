package errsite

import "fmt"

// DWARF register numbers of x86-64 (System V psABI, figure 3.36) that a
// CFA rule names.
const (
	dwarfRBP = 6
	dwarfRSP = 7
)

// CFA is the rule for the canonical frame address at one instruction:
// the value of DWARF register Reg plus Off. Expr is set when the rule is
// a DWARF expression, which this package does not evaluate.
type CFA struct {
	Reg  uint64
	Off  int64
	Expr bool
}

// CFAAt runs the CIE's and the FDE's call frame instructions up to the
// virtual address pc and returns the CFA rule in force there.
func (f FDE) CFAAt(pc uint64) (CFA, error) {
	if pc < f.Start || pc >= f.End {
		return CFA{}, fmt.Errorf("address %#x is outside the FDE %#x-%#x", pc, f.Start, f.End)
	}
	var st cfaState
	st.loc = f.Start
	if err := st.run(f.cie.insns, f.cie, ^uint64(0)); err != nil {
		return CFA{}, fmt.Errorf("CIE instructions: %w", err)
	}
	st.initial = st.cfa
	if err := st.run(f.insns, f.cie, pc); err != nil {
		return CFA{}, fmt.Errorf("FDE instructions: %w", err)
	}
	return st.cfa, nil
}

type cfaState struct {
	loc     uint64
	cfa     CFA
	initial CFA
	stack   []CFA
}

// DW_CFA_* opcodes.
const (
	cfaAdvanceLoc        = 0x40 // high two bits
	cfaOffset            = 0x80
	cfaRestore           = 0xc0
	cfaNop               = 0x00
	cfaSetLoc            = 0x01
	cfaAdvanceLoc1       = 0x02
	cfaAdvanceLoc2       = 0x03
	cfaAdvanceLoc4       = 0x04
	cfaOffsetExtended    = 0x05
	cfaRestoreExtended   = 0x06
	cfaUndefined         = 0x07
	cfaSameValue         = 0x08
	cfaRegister          = 0x09
	cfaRememberState     = 0x0a
	cfaRestoreState      = 0x0b
	cfaDefCFA            = 0x0c
	cfaDefCFARegister    = 0x0d
	cfaDefCFAOffset      = 0x0e
	cfaDefCFAExpression  = 0x0f
	cfaExpression        = 0x10
	cfaOffsetExtendedSF  = 0x11
	cfaDefCFASF          = 0x12
	cfaDefCFAOffsetSF    = 0x13
	cfaValOffset         = 0x14
	cfaValOffsetSF       = 0x15
	cfaValExpression     = 0x16
	cfaGNUArgsSize       = 0x2e
	cfaGNUNegOffsetExtSF = 0x2f
)

// run executes instructions until the location passes pc; the register
// rules other than the CFA's are read past, not kept.
func (s *cfaState) run(b []byte, c *cie, pc uint64) error {
	r := &reader{b: b}
	advance := func(delta uint64) bool {
		s.loc += delta * c.codeAlign
		return s.loc > pc
	}
	for r.i < len(r.b) && r.err == nil {
		op := r.u8()
		switch op & 0xc0 {
		case cfaAdvanceLoc:
			if advance(uint64(op & 0x3f)) {
				return nil
			}
			continue
		case cfaOffset:
			r.uleb()
			continue
		case cfaRestore:
			continue
		}
		switch op {
		case cfaNop:
		case cfaSetLoc:
			s.loc = r.pointer(c.fdeEnc)
			if s.loc > pc {
				return r.err
			}
		case cfaAdvanceLoc1:
			if advance(uint64(r.u8())) {
				return r.err
			}
		case cfaAdvanceLoc2:
			if d := r.fixedBytes(2); r.err == nil && advance(d) {
				return nil
			}
		case cfaAdvanceLoc4:
			if d := r.fixedBytes(4); r.err == nil && advance(d) {
				return nil
			}
		case cfaOffsetExtended, cfaValOffset, cfaGNUNegOffsetExtSF:
			r.uleb()
			r.uleb()
		case cfaOffsetExtendedSF, cfaValOffsetSF:
			r.uleb()
			r.sleb()
		case cfaRestoreExtended, cfaUndefined, cfaSameValue, cfaGNUArgsSize:
			r.uleb()
		case cfaRegister:
			r.uleb()
			r.uleb()
		case cfaRememberState:
			s.stack = append(s.stack, s.cfa)
		case cfaRestoreState:
			if len(s.stack) == 0 {
				return fmt.Errorf("DW_CFA_restore_state with no state remembered")
			}
			s.cfa = s.stack[len(s.stack)-1]
			s.stack = s.stack[:len(s.stack)-1]
		case cfaDefCFA:
			s.cfa = CFA{Reg: r.uleb(), Off: int64(r.uleb())}
		case cfaDefCFASF:
			s.cfa = CFA{Reg: r.uleb(), Off: r.sleb() * c.dataAlign}
		case cfaDefCFARegister:
			s.cfa.Reg, s.cfa.Expr = r.uleb(), false
		case cfaDefCFAOffset:
			s.cfa.Off = int64(r.uleb())
		case cfaDefCFAOffsetSF:
			s.cfa.Off = r.sleb() * c.dataAlign
		case cfaDefCFAExpression:
			r.bytes(int(min(r.uleb(), uint64(len(r.b)))))
			s.cfa = CFA{Expr: true}
		case cfaExpression, cfaValExpression:
			r.uleb()
			r.bytes(int(min(r.uleb(), uint64(len(r.b)))))
		default:
			return fmt.Errorf("call frame instruction %#x not known", op)
		}
	}
	return r.err
}
