package probe

import (
	"debug/elf"
	"fmt"
	"strings"
)

// Symbol is a function resolved in an ELF file.
type Symbol struct {
	Name string
	// Version is the symbol version ("IBVERBS_1.1") when the file has
	// version information for it; Default is true for the default version
	// (name@@VERSION), the one the dynamic linker binds new programs to.
	Version string
	Default bool
	Value   uint64 // st_value: the virtual address in the file's own layout
	Offset  uint64 // file offset of the first instruction (what a uprobe takes)
}

// ResolveSymbol finds function name in the ELF file at path, in .dynsym and
// .symtab, and returns its file offset.
//
// Shared libraries often export several versions of one name:
// libibverbs.so.1 has ibv_create_qp@IBVERBS_1.0 (a compatibility shim) and
// ibv_create_qp@@IBVERBS_1.1 (the default, which programs linked today
// call). ResolveSymbol picks the default version; a lookup that ignored
// versions could land on the shim and see nothing.
func ResolveSymbol(path, name string) (Symbol, error) {
	f, err := elf.Open(path)
	if err != nil {
		return Symbol{}, fmt.Errorf("reading ELF %s: %w", path, err)
	}
	defer f.Close()
	return resolveSymbol(f, path, name)
}

func resolveSymbol(f *elf.File, path, name string) (Symbol, error) {
	best, ok := bestSymbol(f, name)
	if !ok {
		return Symbol{}, fmt.Errorf("symbol %s not found in %s", name, path)
	}
	off, err := fileOffset(f, best.Value)
	if err != nil {
		return Symbol{}, fmt.Errorf("symbol %s in %s: %w", name, path, err)
	}
	best.Offset = off
	return best, nil
}

// bestSymbol finds function name in f's .dynsym and .symtab, the default
// version first; its Offset is left for the caller (a debug file's
// symbols are placed by the binary's segments).
func bestSymbol(f *elf.File, name string) (Symbol, bool) {
	var cands []Symbol
	dyn, _ := f.DynamicSymbols() // none is no error here: .symtab may have it
	for _, s := range dyn {
		if s.Name != name || !isDefinedFunc(s) {
			continue
		}
		c := Symbol{Name: s.Name, Value: s.Value, Version: s.Version}
		// Default unless the version index is marked hidden (name@VER).
		c.Default = !s.HasVersion || !s.VersionIndex.IsHidden()
		cands = append(cands, c)
	}
	// .symtab spells versions into the name: name@VER or name@@VER.
	syms, _ := f.Symbols()
	for _, s := range syms {
		if !isDefinedFunc(s) {
			continue
		}
		base, ver, def := splitVersioned(s.Name)
		if base != name {
			continue
		}
		cands = append(cands, Symbol{Name: base, Version: ver, Default: def, Value: s.Value})
	}
	if len(cands) == 0 {
		return Symbol{}, false
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if c.Default && !best.Default {
			best = c
		}
	}
	return best, true
}

func isDefinedFunc(s elf.Symbol) bool {
	return (elf.ST_TYPE(s.Info) == elf.STT_FUNC || elf.ST_TYPE(s.Info) == elf.STT_GNU_IFUNC) &&
		s.Section != elf.SHN_UNDEF && s.Value != 0
}

// splitVersioned splits "name@@VER" / "name@VER" / "name".
func splitVersioned(s string) (name, version string, isDefault bool) {
	i := strings.IndexByte(s, '@')
	if i < 0 {
		return s, "", true
	}
	if strings.HasPrefix(s[i:], "@@") {
		return s[:i], s[i+2:], true
	}
	return s[:i], s[i+1:], false
}

// fileOffset converts a virtual address of the file's layout into a file
// offset through the executable PT_LOAD segment that holds it.
func fileOffset(f *elf.File, vaddr uint64) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		if p.Vaddr <= vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x is in no executable segment", vaddr)
}

// execRanges lists the file-offset ranges of the executable segments.
func execRanges(f *elf.File) [][2]uint64 {
	var r [][2]uint64
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Filesz > 0 {
			r = append(r, [2]uint64{p.Off, p.Off + p.Filesz})
		}
	}
	return r
}
