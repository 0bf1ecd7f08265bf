package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// mapping is one line of /proc/PID/maps.
type mapping struct {
	Start, End uint64
	Perms      string
	Offset     uint64 // file offset of Start
	Dev        string
	Inode      uint64
	Path       string // "" for anonymous memory
}

// parseMaps parses the text of /proc/PID/maps. Lines it cannot parse are
// an error: the kernel's format is fixed, so anything else is not maps.
func parseMaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseMapsLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseMapsLine parses "start-end perms offset dev inode [path]". The path
// may contain spaces; it starts after the run of blanks following inode.
func parseMapsLine(line string) (mapping, error) {
	var m mapping
	rest := line
	field := func() (string, bool) {
		rest = strings.TrimLeft(rest, " ")
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			f := rest
			rest = ""
			return f, f != ""
		}
		f := rest[:i]
		rest = rest[i:]
		return f, true
	}
	rng, ok1 := field()
	perms, ok2 := field()
	off, ok3 := field()
	dev, ok4 := field()
	ino, ok5 := field()
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return m, fmt.Errorf("too few fields in %q", line)
	}
	lo, hi, ok := strings.Cut(rng, "-")
	if !ok {
		return m, fmt.Errorf("bad address range %q", rng)
	}
	var err error
	if m.Start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return m, fmt.Errorf("bad start address %q", lo)
	}
	if m.End, err = strconv.ParseUint(hi, 16, 64); err != nil || m.End < m.Start {
		return m, fmt.Errorf("bad end address %q", hi)
	}
	if len(perms) != 4 {
		return m, fmt.Errorf("bad permissions %q", perms)
	}
	m.Perms = perms
	if m.Offset, err = strconv.ParseUint(off, 16, 64); err != nil {
		return m, fmt.Errorf("bad offset %q", off)
	}
	m.Dev = dev
	if m.Inode, err = strconv.ParseUint(ino, 10, 64); err != nil {
		return m, fmt.Errorf("bad inode %q", ino)
	}
	m.Path = strings.TrimLeft(rest, " ")
	return m, nil
}

func readMaps(pid int) ([]mapping, error) {
	f, err := os.Open(ProcDir(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMaps(f)
}

// findMapping returns the mapping holding addr.
func findMapping(maps []mapping, addr uint64) (mapping, bool) {
	for _, m := range maps {
		if m.Start <= addr && addr < m.End {
			return m, true
		}
	}
	return mapping{}, false
}

// fileOf maps an address of process pid to the file and file offset it
// came from, and a path this process can open: the mapped path when it
// still names the same file, else the kernel's map_files link to the very
// mapping (other mount namespace, file replaced on disk).
func fileOf(pid int, maps []mapping, addr uint64) (path, openPath string, off uint64, err error) {
	m, ok := findMapping(maps, addr)
	if !ok {
		return "", "", 0, fmt.Errorf("address %#x is not mapped in process %d", addr, pid)
	}
	if m.Path == "" || strings.HasPrefix(m.Path, "[") {
		return "", "", 0, fmt.Errorf("address %#x of process %d is in anonymous memory %s (JIT code?): no file to probe", addr, pid, m.Path)
	}
	if m.Perms[2] != 'x' {
		return "", "", 0, fmt.Errorf("address %#x of process %d is in a non-executable mapping of %s", addr, pid, m.Path)
	}
	off = addr - m.Start + m.Offset
	path = strings.TrimSuffix(m.Path, " (deleted)")
	openPath = path
	if st, err := os.Stat(path); err != nil || m.Path != path || inodeOf(st) != m.Inode {
		openPath = fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End)
		if leaderExited(pid) {
			// map_files went with the main thread: the path as a live
			// thread sees it
			openPath = ProcDir(pid) + "/root" + path
		}
	}
	return path, openPath, off, nil
}

// fileID identifies a file the way uprobes do: by device and inode.
type fileID struct {
	Dev, Ino uint64
}

func inodeOf(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}

func fileIDOf(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{Dev: st.Dev, Ino: st.Ino}, nil
}

// VerbsLoaded reports whether process pid has mapped libibverbs or runs a
// binary with the simulated HCA: whether there is anything to trace yet.
// It fails when that cannot be known: the process is gone, or exiting
// (its mappings are released before it is reported ended).
func VerbsLoaded(pid int) (bool, error) {
	maps, err := readMaps(pid)
	if err != nil {
		return false, err
	}
	if len(maps) == 0 { // every running process maps something
		return false, fmt.Errorf("process %d has no mappings: it is exiting", pid)
	}
	for _, m := range maps {
		if strings.Contains(m.Path, "libibverbs") {
			return true, nil
		}
	}
	exe, err := os.Readlink(ProcDir(pid) + "/exe")
	if err != nil {
		return false, err
	}
	_, err = ResolveSymbol(exe, "sqsim_create_qp")
	return err == nil, nil
}
