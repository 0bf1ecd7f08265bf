package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The guest's boot files: modules in load order, the initramfs, the
// kernel in a form QEMU boots.

// modName turns kernel/fs/9p/9p.ko(.xz) into 9p, with '-' as '_' as
// modprobe does.
func modName(file string) string {
	b := filepath.Base(file)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

// readModule returns a module file's contents uncompressed: busybox insmod
// takes plain .ko files only.
func readModule(path string) ([]byte, error) {
	switch {
	case strings.HasSuffix(path, ".ko"):
		return os.ReadFile(path)
	case strings.HasSuffix(path, ".ko.gz"):
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return io.ReadAll(z)
	case strings.HasSuffix(path, ".ko.xz"):
		return exec.Command("xz", "-dc", path).Output()
	case strings.HasSuffix(path, ".ko.zst"):
		return exec.Command("zstd", "-dc", path).Output()
	}
	return nil, fmt.Errorf("module %s: unknown compression", path)
}

// cpioWriter writes a "newc" cpio archive, the format the kernel unpacks as
// an initramfs. Uncompressed: the kernel unpacks it faster than it inflates
// a gzip under TCG.
type cpioWriter struct {
	w   *bufio.Writer
	ino int
	err error
}

func (c *cpioWriter) entry(name string, mode uint32, rdevMajor, rdevMinor int, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.w.WriteString(hdr)
	c.w.WriteString(name)
	c.w.WriteByte(0)
	c.pad(len(hdr) + len(name) + 1)
	c.w.Write(data)
	_, c.err = c.w.Write(make([]byte, (4-len(data)%4)%4))
}

func (c *cpioWriter) pad(n int) { c.w.Write(make([]byte, (4-n%4)%4)) }

func (c *cpioWriter) dir(name string) { c.entry(name, syscall.S_IFDIR|0o755, 0, 0, nil) }
func (c *cpioWriter) file(name string, perm uint32, data []byte) {
	c.entry(name, syscall.S_IFREG|perm, 0, 0, data)
}

func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, 0, 0, nil)
	if c.err != nil {
		return c.err
	}
	return c.w.Flush()
}

// writeInitramfs builds the busybox initramfs: /init, /bin/busybox, the
// modules of initModules with their dependencies and /mods/order.
func writeInitramfs(k *guestKit, path string) error {
	mods, err := moduleOrder(k.modDir, initModules)
	if err != nil {
		return err
	}
	initScript, err := guestFiles.ReadFile("guest/init")
	if err != nil {
		return err
	}
	bb, err := os.ReadFile(k.busybox)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	c := &cpioWriter{w: bufio.NewWriterSize(f, 1<<20)}
	for _, d := range []string{"bin", "dev", "proc", "sys", "newroot", "mods"} {
		c.dir(d)
	}
	// The kernel opens /dev/console for init before init can mount devtmpfs.
	c.entry("dev/console", syscall.S_IFCHR|0o600, 5, 1, nil)
	c.file("init", 0o755, initScript)
	c.file("bin/busybox", 0o755, bb)
	var order strings.Builder
	for _, m := range mods {
		data, err := readModule(filepath.Join(k.modDir, m))
		if err != nil {
			return fmt.Errorf("reading module %s: %w", m, err)
		}
		n := modName(m) + ".ko"
		c.file("mods/"+n, 0o644, data)
		order.WriteString(n + "\n")
	}
	c.file("mods/order", 0o644, []byte(order.String()))
	if err := c.close(); err != nil {
		return err
	}
	return f.Close()
}

// extractVmlinux writes the ELF kernel inside a bzImage to path. QEMU boots
// it through its PVH entry point, skipping the real-mode setup and the
// in-guest decompression, which are slow under TCG.
func extractVmlinux(bzImage, path string) error {
	b, err := os.ReadFile(bzImage)
	if err != nil {
		return err
	}
	if len(b) < 0x250 || string(b[0x202:0x206]) != "HdrS" || binary.LittleEndian.Uint16(b[0x206:]) < 0x208 {
		return errors.New("not a bzImage with boot protocol 2.08 or newer")
	}
	setup := int(b[0x1f1])
	if setup == 0 {
		setup = 4
	}
	off := (setup+1)*512 + int(binary.LittleEndian.Uint32(b[0x248:]))
	n := int(binary.LittleEndian.Uint32(b[0x24c:]))
	if off+n > len(b) || n < 8 {
		return errors.New("payload out of range")
	}
	payload := b[off : off+n]
	var cmd *exec.Cmd
	switch {
	case bytes.HasPrefix(payload, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		cmd = exec.Command("xz", "-dc", "--single-stream")
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// The build appends the 4-byte uncompressed size after the frame.
		payload = payload[:len(payload)-4]
		cmd = exec.Command("zstd", "-dc")
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		z, err := gzip.NewReader(bytes.NewReader(payload))
		if err != nil {
			return err
		}
		z.Multistream(false)
		out, err := io.ReadAll(z)
		if err != nil {
			return err
		}
		return checkPVH(path, out)
	default:
		return fmt.Errorf("payload compression % x not handled", payload[:4])
	}
	cmd.Stdin = bytes.NewReader(payload)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", cmd.Path, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return checkPVH(path, out)
}

// checkPVH writes the ELF kernel when it has the Xen PVH entry note QEMU
// needs to boot it.
func checkPVH(path string, vmlinux []byte) error {
	f, err := elf.NewFile(bytes.NewReader(vmlinux))
	if err != nil {
		return fmt.Errorf("decompressed kernel: %w", err)
	}
	const xenElfnotePhys32Entry = 18
	found := false
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(p.Open())
		if err != nil {
			continue
		}
		for len(notes) >= 12 {
			nsz := int(binary.LittleEndian.Uint32(notes))
			dsz := int(binary.LittleEndian.Uint32(notes[4:]))
			typ := binary.LittleEndian.Uint32(notes[8:])
			name := notes[12:min(len(notes), 12+nsz)]
			if typ == xenElfnotePhys32Entry && bytes.HasPrefix(name, []byte("Xen")) {
				found = true
			}
			adv := 12 + (nsz+3)&^3 + (dsz+3)&^3
			if adv > len(notes) {
				break
			}
			notes = notes[adv:]
		}
	}
	if !found {
		return errors.New("decompressed kernel has no PVH entry note (CONFIG_PVH)")
	}
	return os.WriteFile(path, vmlinux, 0o644)
}
