package probe

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/ulikunitz/xz"
)

// Separate debug information, looked up as gdb, perf and bcc do, for
// binaries whose symbol table was stripped (distributions ship libmlx5
// and librxe so):
//   - by build ID: DIR/.build-id/xx/yyyy.debug under each debug directory;
//   - by .gnu_debuglink (a file name and the CRC-32 of the debug file):
//     next to the binary, in its .debug/ directory, and under each debug
//     directory followed by the binary's own directory;
//   - the .gnu_debugaltlink of a debug file (the file dwz moved what
//     several debug files share to), by its path or its build ID;
//   - .gnu_debugdata (MiniDebugInfo): an xz-compressed ELF inside the
//     binary itself holding the symbols of its local functions.

// DefaultDebugDirs are searched when Options.DebugDirs is empty and
// SQSCOPE_DEBUG_DIR is not set (a list, like PATH).
var DefaultDebugDirs = []string{"/usr/lib/debug"}

// debugDirsEnv names the environment variable that replaces the default
// debug directories.
const debugDirsEnv = "SQSCOPE_DEBUG_DIR"

// debugDirs are the directories searched for debug files.
func debugDirs(opt []string) []string {
	if len(opt) > 0 {
		return opt
	}
	if v := os.Getenv(debugDirsEnv); v != "" {
		return filepath.SplitList(v)
	}
	return DefaultDebugDirs
}

// symFile is an ELF file whose symbols describe a binary: the binary
// itself, or one of its debug files (Debug names it then).
type symFile struct {
	f     *elf.File
	Debug string
	close func() error
}

// debugFiles opens the separate debug files of the binary f (read from
// path; dir is the directory it is known by in the target, for the
// debuglink search). Files that cannot be read or fail their check are
// skipped. The caller closes what it gets.
func debugFiles(f *elf.File, path, dir string, dirs []string) []symFile {
	var out []symFile
	seen := map[string]bool{}
	add := func(p string, check func(*elf.File) bool) *elf.File {
		if seen[p] {
			return nil
		}
		seen[p] = true
		df, err := elf.Open(p)
		if err != nil {
			return nil
		}
		if check != nil && !check(df) {
			df.Close()
			return nil
		}
		out = append(out, symFile{f: df, Debug: p, close: df.Close})
		return df
	}
	var found []*elf.File
	if id := buildID(f); id != "" && len(id) > 2 {
		for _, d := range dirs {
			p := filepath.Join(d, ".build-id", id[:2], id[2:]+".debug")
			if df := add(p, func(df *elf.File) bool { return buildID(df) == id }); df != nil {
				found = append(found, df)
			}
		}
	}
	if name, crc, ok := debugLink(f); ok {
		cands := []string{filepath.Join(dir, name), filepath.Join(dir, ".debug", name)}
		for _, d := range dirs {
			cands = append(cands, filepath.Join(d, dir, name))
		}
		for _, p := range cands {
			if df := add(p, func(*elf.File) bool { return fileCRC(p) == crc }); df != nil {
				found = append(found, df)
			}
		}
	}
	for _, df := range found {
		alt, id, ok := debugAltLink(df)
		if !ok {
			continue
		}
		var cands []string
		if filepath.IsAbs(alt) {
			cands = append(cands, alt)
		} else if len(out) > 0 {
			cands = append(cands, filepath.Join(filepath.Dir(out[len(out)-1].Debug), alt))
		}
		for _, d := range dirs {
			if len(id) > 2 {
				cands = append(cands, filepath.Join(d, ".build-id", id[:2], id[2:]+".debug"))
			}
		}
		for _, p := range cands {
			add(p, func(af *elf.File) bool { return buildID(af) == id })
		}
	}
	if mini, err := miniDebugInfo(f); err == nil && mini != nil {
		out = append(out, symFile{f: mini, Debug: path + ":.gnu_debugdata", close: mini.Close})
	}
	return out
}

// buildID is the hex GNU build ID of f, or "".
func buildID(f *elf.File) string {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		b, err := s.Data()
		if err != nil {
			continue
		}
		for len(b) >= 12 {
			nsz, dsz, typ := f.ByteOrder.Uint32(b), f.ByteOrder.Uint32(b[4:]), f.ByteOrder.Uint32(b[8:])
			b = b[12:]
			n, d := align4(nsz), align4(dsz)
			if uint64(len(b)) < uint64(n)+uint64(d) {
				break
			}
			if typ == 3 && nsz == 4 && string(b[:3]) == "GNU" { // NT_GNU_BUILD_ID
				return hex.EncodeToString(b[n : n+dsz])
			}
			b = b[n+d:]
		}
	}
	return ""
}

func align4(v uint32) uint32 { return (v + 3) &^ 3 }

// debugLink reads .gnu_debuglink: a file name, padding to 4 bytes, and
// the CRC-32 of the debug file.
func debugLink(f *elf.File) (name string, crc uint32, ok bool) {
	s := f.Section(".gnu_debuglink")
	if s == nil {
		return "", 0, false
	}
	b, err := s.Data()
	if err != nil {
		return "", 0, false
	}
	i := bytes.IndexByte(b, 0)
	if i <= 0 {
		return "", 0, false
	}
	off := align4(uint32(i + 1))
	if int(off)+4 > len(b) {
		return "", 0, false
	}
	return filepath.Base(string(b[:i])), f.ByteOrder.Uint32(b[off:]), true
}

// debugAltLink reads .gnu_debugaltlink: a path and the build ID of the
// file dwz made.
func debugAltLink(f *elf.File) (path, id string, ok bool) {
	s := f.Section(".gnu_debugaltlink")
	if s == nil {
		return "", "", false
	}
	b, err := s.Data()
	if err != nil {
		return "", "", false
	}
	i := bytes.IndexByte(b, 0)
	if i <= 0 || i+1 >= len(b) {
		return "", "", false
	}
	return string(b[:i]), hex.EncodeToString(b[i+1:]), true
}

// fileCRC is the CRC-32 (IEEE, as .gnu_debuglink stores it) of a file, or
// a value no file has when it cannot be read (0 is a valid CRC, so the
// check fails by a mismatch instead: see the ok of debugLink).
func fileCRC(p string) uint32 {
	fh, err := os.Open(p)
	if err != nil {
		return 0
	}
	defer fh.Close()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, fh); err != nil {
		return 0
	}
	return h.Sum32()
}

// maxMiniDebugInfo bounds the decompressed size of a .gnu_debugdata.
const maxMiniDebugInfo = 64 << 20

// miniDebugInfo opens the ELF in f's .gnu_debugdata, nil when there is
// none.
func miniDebugInfo(f *elf.File) (*elf.File, error) {
	s := f.Section(".gnu_debugdata")
	if s == nil {
		return nil, nil
	}
	b, err := s.Data()
	if err != nil {
		return nil, err
	}
	r, err := xz.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("reading .gnu_debugdata: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(r, maxMiniDebugInfo+1))
	if err != nil {
		return nil, fmt.Errorf("decompressing .gnu_debugdata: %w", err)
	}
	if len(data) > maxMiniDebugInfo {
		return nil, errors.New(".gnu_debugdata decompresses to more than 64 MiB")
	}
	mf, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("the ELF in .gnu_debugdata: %w", err)
	}
	return mf, nil
}

// FindFunc is a function found by name in a binary or its debug files.
type FindFunc struct {
	Symbol
	DebugFile string // "" when the binary's own symbols named it
}

// symbolFinder resolves names in one binary: its own symbols first, then
// its debug files'. The file offsets are the binary's.
type symbolFinder struct {
	bin   *elf.File
	path  string
	files []symFile
}

func openSymbolFinder(openPath, dir string, dirs []string) (*symbolFinder, error) {
	f, err := elf.Open(openPath)
	if err != nil {
		return nil, err
	}
	sf := &symbolFinder{bin: f, path: openPath}
	sf.files = append([]symFile{{f: f}}, debugFiles(f, openPath, dir, dirs)...)
	return sf, nil
}

func (sf *symbolFinder) Close() {
	sf.bin.Close()
	for _, s := range sf.files[1:] {
		s.close()
	}
}

// find resolves name, the binary's symbols first.
func (sf *symbolFinder) find(name string) (FindFunc, error) {
	for _, s := range sf.files {
		best, ok := bestSymbol(s.f, name)
		if !ok {
			continue
		}
		off, err := fileOffset(sf.bin, best.Value)
		if err != nil {
			continue // not where the binary has code: a stale debug file
		}
		best.Offset = off
		return FindFunc{Symbol: best, DebugFile: s.Debug}, nil
	}
	return FindFunc{}, fmt.Errorf("symbol %s not found in %s or its debug files", name, sf.path)
}

// ResolveWithDebug finds function name in the ELF file at path or in its
// separate debug files (searched under dirs, or the defaults when empty).
func ResolveWithDebug(path, name string, dirs []string) (FindFunc, error) {
	sf, err := openSymbolFinder(path, filepath.Dir(path), debugDirs(dirs))
	if err != nil {
		return FindFunc{}, fmt.Errorf("reading ELF %s: %w", path, err)
	}
	defer sf.Close()
	return sf.find(name)
}
