package probe

import (
	"debug/elf"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ExplicitProbe is a user-given data-path function location
// (--probe post_send=LIB:0xOFFSET): for providers whose functions neither a
// symbol nor ops-table discovery can find.
type ExplicitProbe struct {
	Func   string // post_send, poll_cq, post_recv, wr_start, ...
	Path   string // the ELF file
	Offset uint64 // file offset of the function's first instruction
}

func (p ExplicitProbe) String() string {
	return fmt.Sprintf("%s=%s:%#x", p.Func, p.Path, p.Offset)
}

// ParseProbe parses FUNC=LIB:OFFSET, OFFSET in hex with 0x or in decimal.
// It checks the syntax only; Open checks the file (CheckProbe).
func ParseProbe(s string) (ExplicitProbe, error) {
	const want = "want FUNC=LIB:0xOFFSET, e.g. post_send=/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so:0x1a2b0"
	fn, rest, ok := strings.Cut(s, "=")
	if !ok {
		return ExplicitProbe{}, fmt.Errorf("probe %q: no '=': %s", s, want)
	}
	fn = strings.TrimSpace(fn)
	if r, ok := roleByName(fn); !ok || !r.probed() {
		return ExplicitProbe{}, fmt.Errorf("probe %q: unknown function %q (want one of %s)", s, fn, strings.Join(dataRoleNames(), ", "))
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return ExplicitProbe{}, fmt.Errorf("probe %q: no ':' before the offset: %s", s, want)
	}
	path, offs := strings.TrimSpace(rest[:i]), strings.TrimSpace(rest[i+1:])
	if path == "" {
		return ExplicitProbe{}, fmt.Errorf("probe %q: empty library path: %s", s, want)
	}
	if offs == "" {
		return ExplicitProbe{}, fmt.Errorf("probe %q: empty offset: %s", s, want)
	}
	var off uint64
	var err error
	if strings.HasPrefix(offs, "0x") || strings.HasPrefix(offs, "0X") {
		off, err = strconv.ParseUint(offs[2:], 16, 64)
	} else {
		off, err = strconv.ParseUint(offs, 10, 64)
	}
	if err != nil {
		return ExplicitProbe{}, fmt.Errorf("probe %q: bad offset %q: want hex like 0x1a2b0 or decimal", s, offs)
	}
	return ExplicitProbe{Func: fn, Path: path, Offset: off}, nil
}

// CheckProbe checks that p's offset lies inside an executable segment of
// its file and, unless anywhere, at a function's start where the file's
// symbols cover it: a probe one byte into a function sees its registers
// after the first instruction changed them.
func CheckProbe(p ExplicitProbe, anywhere bool) error {
	f, err := elf.Open(p.Path)
	if err != nil {
		return fmt.Errorf("probe %s: %w", p, err)
	}
	defer f.Close()
	rs := execRanges(f)
	for _, r := range rs {
		if r[0] <= p.Offset && p.Offset < r[1] {
			if anywhere {
				return nil
			}
			return checkFuncStart(f, p)
		}
	}
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%#x-%#x", r[0], r[1]))
	}
	if len(parts) == 0 {
		return fmt.Errorf("probe %s: %s has no executable segment", p, p.Path)
	}
	return fmt.Errorf("probe %s: offset %#x is outside the executable segments of %s (%s)", p, p.Offset, p.Path, strings.Join(parts, ", "))
}

func dataRoleNames() []string {
	var names []string
	for _, r := range roles {
		if r.probed() {
			names = append(names, r.name)
		}
	}
	sort.Strings(names)
	return names
}

// checkFuncStart refuses an offset inside a function the symbol tables
// know; an offset no symbol covers (a stripped file) passes.
func checkFuncStart(f *elf.File, p ExplicitProbe) error {
	var syms []elf.Symbol
	if s, err := f.Symbols(); err == nil {
		syms = s
	}
	if s, err := f.DynamicSymbols(); err == nil {
		syms = append(syms, s...)
	}
	for _, s := range syms {
		if !isDefinedFunc(s) || s.Size == 0 {
			continue
		}
		start, err := fileOffset(f, s.Value)
		if err != nil || p.Offset < start || p.Offset >= start+s.Size {
			continue
		}
		if p.Offset == start {
			return nil
		}
		return fmt.Errorf("probe %s: offset %#x is %d bytes into %s, which starts at %#x: give the function's start (or --force-probe to probe there anyway)",
			p, p.Offset, p.Offset-start, s.Name, start)
	}
	return nil
}
