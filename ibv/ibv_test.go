package ibv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFactsListEveryConstant fails when a constant of this package is not
// in facts, the table the bpf package's tests pin against the installed
// headers.
func TestFactsListEveryConstant(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]bool{}
	listed := map[string]int{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				v, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for _, n := range v.Names {
					// the Enum values name the tables, they are no header's
					if g.Tok == token.CONST && n.IsExported() && !strings.HasPrefix(n.Name, "Enum") {
						consts[n.Name] = true
					}
					if g.Tok == token.VAR && n.Name == "facts" {
						for _, e := range v.Values[0].(*ast.CompositeLit).Elts {
							fields := e.(*ast.CompositeLit).Elts
							if id, ok := fields[len(fields)-1].(*ast.Ident); ok {
								listed[id.Name]++
							} else {
								t.Errorf("facts entry %s: value is not a constant's name", fset.Position(e.Pos()))
							}
						}
					}
				}
			}
		}
	}
	if len(consts) < 60 {
		t.Fatalf("found only %d constants", len(consts))
	}
	for c := range consts {
		if listed[c] != 1 {
			t.Errorf("%s is listed %d times in facts, want once", c, listed[c])
		}
	}
	if len(facts) != len(consts) {
		t.Errorf("facts has %d entries for %d constants", len(facts), len(consts))
	}
}

// TestFactsConsistent checks what the name helpers rely on: one name and
// one C name per value of an enum, and send flags of one bit each.
func TestFactsConsistent(t *testing.T) {
	seenC := map[string]bool{}
	byValue := map[Enum]map[int64]string{}
	byName := map[Enum]map[string]bool{}
	for _, f := range facts {
		if seenC[f.C] {
			t.Errorf("%s listed twice", f.C)
		}
		seenC[f.C] = true
		if byValue[f.Enum] == nil {
			byValue[f.Enum], byName[f.Enum] = map[int64]string{}, map[string]bool{}
		}
		if other, ok := byValue[f.Enum][f.Value]; ok {
			t.Errorf("%s and %s both have value %d", other, f.C, f.Value)
		}
		byValue[f.Enum][f.Value] = f.C
		if byName[f.Enum][f.Name] || f.Name == "" {
			t.Errorf("%s: name %q empty or taken", f.C, f.Name)
		}
		byName[f.Enum][f.Name] = true
		if f.Enum == EnumSendFlag && bits.OnesCount64(uint64(f.Value)) != 1 {
			t.Errorf("%s = %#x is not one bit", f.C, f.Value)
		}
	}
	for e := EnumWROpcode; e <= EnumErrno; e++ {
		if len(byValue[e]) == 0 {
			t.Errorf("enum %d has no values", e)
		}
	}
}

func TestNames(t *testing.T) {
	for _, tt := range []struct {
		name, got, want string
	}{
		{"send opcode", OpName(WRSend), "SEND"},
		{"rdma write with imm", OpName(WRRDMAWriteWithImm), "RDMA_WRITE_WITH_IMM"},
		{"unknown send opcode", OpName(99), "99"},
		{"wc opcode", WCOpName(WCRDMARead), "RDMA_READ"},
		{"wc recv", WCOpName(WCRecv), "RECV"},
		{"wc status flush", WCStatusName(WCWRFlushErr), "WR_FLUSH_ERR"},
		{"wc status success", WCStatusName(WCSuccess), "SUCCESS"},
		{"unknown wc status", WCStatusName(200), "200"},
		{"qp type UD", QPTypeName(QPTUD), "UD"},
		{"qp type raw", QPTypeName(QPTRawPacket), "RAW"},
		{"qp type XRC send", QPTypeName(QPTXRCSend), "XRC"},
		{"qp state RTS", QPStateName(QPSRTS), "RTS"},
		{"no qp state", QPStateName(-1), "-1"},
		{"no flags", SendFlagsString(0), "0"},
		{"signaled inline", SendFlagsString(SendSignaled | SendInline), "SIGNALED|INLINE"},
		{"unknown flag bit", SendFlagsString(SendFence | 0x100), "FENCE|0x100"},
		{"ENOMEM", ErrnoName(ENOMEM), "ENOMEM"},
		{"EINVAL", ErrnoName(EINVAL), "EINVAL"},
		{"EOPNOTSUPP", ErrnoName(EOPNOTSUPP), "EOPNOTSUPP"},
		{"other errno", ErrnoName(5), "input/output error"},
		{"negative", ErrnoName(-12), "error -12"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestIsRecvWC(t *testing.T) {
	for _, tt := range []struct {
		op   uint8
		want bool
	}{
		{WCSend, false}, {WCTSO, false}, {127, false},
		{WCRecv, true}, {WCRecvRDMAWithImm, true}, {255, true},
	} {
		if got := IsRecvWC(tt.op); got != tt.want {
			t.Errorf("IsRecvWC(%d) = %v, want %v", tt.op, got, tt.want)
		}
	}
}

// TestNoProjectImports keeps this package a leaf any package may use.
func TestNoProjectImports(t *testing.T) {
	paths, _ := filepath.Glob("*.go")
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			if p := strings.Trim(im.Path.Value, `"`); p == "C" || strings.HasPrefix(p, "github.com/sqscope/") {
				t.Errorf("%s imports %s", path, p)
			}
		}
	}
}
