package errsite

import (
	"debug/elf"
	"encoding/binary"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// Binary is an x86-64 ELF file opened for analysis: its unwind table,
// its executable segments, and the names of the functions its PLT calls.
type Binary struct {
	f      *elf.File
	frames *Frames
	plt    map[uint64]string // PLT entry address -> the symbol it jumps to
}

// Open reads the ELF file at path.
func Open(path string) (*Binary, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading ELF %s: %w", path, err)
	}
	b, err := NewBinary(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// NewBinary takes an ELF file already open; Close closes it.
func NewBinary(f *elf.File) (*Binary, error) {
	if f.Machine != elf.EM_X86_64 || f.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("not an x86-64 ELF file (%v, %v)", f.Machine, f.Class)
	}
	sec := f.Section(".eh_frame")
	if sec == nil || sec.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("no .eh_frame section: no function bounds to read")
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("reading .eh_frame: %w", err)
	}
	fr, err := ParseEHFrame(data, sec.Addr)
	if err != nil {
		return nil, err
	}
	b := &Binary{f: f, frames: fr}
	b.plt = pltNames(f)
	return b, nil
}

// Close closes the file.
func (b *Binary) Close() error { return b.f.Close() }

// Frames returns the file's parsed unwind table.
func (b *Binary) Frames() *Frames { return b.frames }

// FileOffset converts a virtual address into the file offset a uprobe
// takes, through the executable segment that holds it.
func (b *Binary) FileOffset(vaddr uint64) (uint64, error) {
	for _, p := range b.f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x is in no executable segment", vaddr)
}

// VAddr converts a file offset in an executable segment into the
// virtual address of the file's layout.
func (b *Binary) VAddr(off uint64) (uint64, error) {
	for _, p := range b.f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Off <= off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, nil
		}
	}
	return 0, fmt.Errorf("file offset %#x is in no executable segment", off)
}

// code reads the bytes at virtual addresses [start, end) of an
// executable segment.
func (b *Binary) code(start, end uint64) ([]byte, error) {
	off, err := b.FileOffset(start)
	if err != nil {
		return nil, err
	}
	if lastOff, err := b.FileOffset(end - 1); err != nil || lastOff-off != end-1-start {
		return nil, fmt.Errorf("code %#x-%#x crosses the end of its segment", start, end)
	}
	buf := make([]byte, end-start)
	for _, p := range b.f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= start && start < p.Vaddr+p.Filesz {
			if _, err := p.ReadAt(buf, int64(start-p.Vaddr)); err != nil {
				return nil, fmt.Errorf("reading code at %#x: %w", start, err)
			}
			return buf, nil
		}
	}
	return nil, fmt.Errorf("address %#x is in no executable segment", start)
}

// readData reads n bytes at a virtual address of any loaded segment (a
// jump table in .rodata).
func (b *Binary) readData(vaddr uint64, n int) ([]byte, bool) {
	for _, p := range b.f.Progs {
		if p.Type == elf.PT_LOAD && p.Vaddr <= vaddr && vaddr+uint64(n) <= p.Vaddr+p.Filesz {
			buf := make([]byte, n)
			if _, err := p.ReadAt(buf, int64(vaddr-p.Vaddr)); err != nil {
				return nil, false
			}
			return buf, true
		}
	}
	return nil, false
}

// pltNames maps each PLT entry (in .plt or .plt.sec) to the symbol its
// GOT slot is relocated to, from .rela.plt: the entry's first indirect
// jump reads that slot. A file without them gives an empty map.
func pltNames(f *elf.File) map[uint64]string {
	out := map[uint64]string{}
	rel := f.Section(".rela.plt")
	if rel == nil {
		return out
	}
	data, err := rel.Data()
	if err != nil {
		return out
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return out
	}
	slot := map[uint64]string{} // GOT slot -> symbol
	for i := 0; i+24 <= len(data); i += 24 {
		off := binary.LittleEndian.Uint64(data[i:])
		info := binary.LittleEndian.Uint64(data[i+8:])
		if s := info >> 32; s >= 1 && int(s) <= len(syms) {
			slot[off] = syms[s-1].Name
		}
	}
	for _, name := range []string{".plt", ".plt.sec"} {
		sec := f.Section(name)
		if sec == nil {
			continue
		}
		code, err := sec.Data()
		if err != nil {
			continue
		}
		const entry = 16
		for i := 0; i+entry <= len(code); i += entry {
			for j := i; j < i+entry; {
				inst, err := x86asm.Decode(code[j:], 64)
				if err != nil {
					break
				}
				if inst.Op == x86asm.JMP {
					if m, ok := inst.Args[0].(x86asm.Mem); ok && m.Base == x86asm.RIP {
						got := sec.Addr + uint64(j+inst.Len) + uint64(m.Disp)
						if s, ok := slot[got]; ok {
							out[sec.Addr+uint64(i)] = s
						}
					}
					break
				}
				j += inst.Len
			}
		}
	}
	return out
}
