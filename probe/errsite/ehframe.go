package errsite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// The unwind tables (.eh_frame, the LSB's form of DWARF call frame
// information) are the one list of function bounds a stripped library
// keeps: every function the compiler emitted has an FDE (frame
// description entry) giving its first address and length, and the CFA
// rule at each of its instructions. Go's debug/elf and debug/dwarf read
// neither, so this file parses the records: CIEs (the common part: code
// and data alignment, the pointer encoding of the FDEs) and FDEs.

// FDE is one frame description entry: the code range [Start, End) in the
// file's virtual addresses, and the call frame instructions that say
// where the CFA (the stack pointer before the call) is at each address.
type FDE struct {
	Start, End uint64
	cie        *cie
	insns      []byte
}

// cie is a common information entry, the part its FDEs share.
type cie struct {
	codeAlign uint64
	dataAlign int64
	fdeEnc    byte // DW_EH_PE_* encoding of the FDEs' addresses
	lsdaEnc   byte
	hasAug    bool // augmentation "z...": FDEs carry augmentation data
	signal    bool // 'S': a signal frame
	insns     []byte
}

// Frames is a parsed .eh_frame, its FDEs sorted by Start.
type Frames struct {
	FDEs []FDE
}

// Pointer encodings (DW_EH_PE_*) of .eh_frame.
const (
	peAbsptr  = 0x00
	peULEB128 = 0x01
	peUData2  = 0x02
	peUData4  = 0x03
	peUData8  = 0x04
	peSLEB128 = 0x09
	peSData2  = 0x0a
	peSData4  = 0x0b
	peSData8  = 0x0c
	pePCRel   = 0x10
	peDataRel = 0x30
	peOmit    = 0xff
)

// errShort is a record that ends before its fields do.
var errShort = errors.New("truncated record")

// reader walks one record's bytes; addr is the virtual address of b[0],
// for PC-relative pointers.
type reader struct {
	b    []byte
	i    int
	addr uint64
	err  error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) u8() byte {
	if r.i >= len(r.b) {
		r.fail(errShort)
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.i+n > len(r.b) {
		r.fail(errShort)
		return nil
	}
	r.i += n
	return r.b[r.i-n : r.i]
}

func (r *reader) uleb() uint64 {
	var v uint64
	for shift := 0; ; shift += 7 {
		c := r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) sleb() int64 {
	var v int64
	shift := 0
	for {
		c := r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
}

func (r *reader) cstring() string {
	start := r.i
	for r.i < len(r.b) && r.b[r.i] != 0 {
		r.i++
	}
	if r.i >= len(r.b) {
		r.fail(errShort)
		return ""
	}
	r.i++
	return string(r.b[start : r.i-1])
}

// pointer reads a value in encoding enc; datarel is the base of
// DW_EH_PE_datarel (the .eh_frame_hdr or GOT, unused by .eh_frame on
// x86-64: an error there).
func (r *reader) pointer(enc byte) uint64 {
	if enc == peOmit {
		return 0
	}
	at := r.addr + uint64(r.i)
	var v uint64
	switch enc & 0x0f {
	case peAbsptr, peUData8, peSData8:
		v = r.fixedBytes(8)
	case peULEB128:
		v = r.uleb()
	case peUData2:
		v = r.fixedBytes(2)
	case peUData4:
		v = r.fixedBytes(4)
	case peSLEB128:
		v = uint64(r.sleb())
	case peSData2:
		v = uint64(int64(int16(r.fixedBytes(2))))
	case peSData4:
		v = uint64(int64(int32(r.fixedBytes(4))))
	default:
		r.fail(fmt.Errorf("pointer encoding %#x not known", enc))
		return 0
	}
	if r.err != nil {
		return 0
	}
	switch enc & 0x70 {
	case 0:
	case pePCRel:
		v += at
	default:
		r.fail(fmt.Errorf("pointer encoding %#x (relative to a base .eh_frame does not have) not supported", enc))
	}
	return v
}

// fixedBytes reads an n-byte little-endian value (0 past the end, with
// the error kept).
func (r *reader) fixedBytes(n int) uint64 {
	b := r.bytes(n)
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// fixed reads a length of encoding enc (the low four bits only: an FDE's
// range is never relative).
func (r *reader) fixed(enc byte) uint64 {
	return r.pointer(enc & 0x0f)
}

// ParseEHFrame parses the bytes of an .eh_frame section loaded at virtual
// address addr. Every record must parse: a malformed one is an error
// naming its offset, not a shorter list.
func ParseEHFrame(b []byte, addr uint64) (*Frames, error) {
	cies := map[int]*cie{}
	fr := &Frames{}
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			return nil, fmt.Errorf(".eh_frame+%#x: %w", off, errShort)
		}
		length := uint64(binary.LittleEndian.Uint32(b[off:]))
		hdr := 4
		if length == 0 {
			break // the terminator
		}
		if length == 0xffffffff {
			if len(b)-off < 12 {
				return nil, fmt.Errorf(".eh_frame+%#x: %w", off, errShort)
			}
			length = binary.LittleEndian.Uint64(b[off+4:])
			hdr = 12
		}
		if length < 4 || length > uint64(len(b)-off-hdr) {
			return nil, fmt.Errorf(".eh_frame+%#x: length %d past the section's end", off, length)
		}
		body := b[off+hdr : off+hdr+int(length)]
		idField := off + hdr
		id := binary.LittleEndian.Uint32(body)
		r := &reader{b: body, i: 4, addr: addr + uint64(off+hdr)}
		if id == 0 {
			c, err := parseCIE(r)
			if err != nil {
				return nil, fmt.Errorf(".eh_frame+%#x: CIE: %w", off, err)
			}
			cies[off] = c
		} else {
			ciePos := idField - int(id)
			c, ok := cies[ciePos]
			if !ok {
				return nil, fmt.Errorf(".eh_frame+%#x: FDE names a CIE at %#x that is not one seen before it", off, ciePos)
			}
			f, err := parseFDE(r, c)
			if err != nil {
				return nil, fmt.Errorf(".eh_frame+%#x: FDE: %w", off, err)
			}
			if f.End > f.Start {
				fr.FDEs = append(fr.FDEs, f)
			}
		}
		off += hdr + int(length)
	}
	sort.Slice(fr.FDEs, func(i, j int) bool { return fr.FDEs[i].Start < fr.FDEs[j].Start })
	return fr, nil
}

func parseCIE(r *reader) (*cie, error) {
	c := &cie{fdeEnc: peAbsptr, lsdaEnc: peOmit}
	version := r.u8()
	if version != 1 && version != 3 {
		return nil, fmt.Errorf("version %d not known", version)
	}
	aug := r.cstring()
	if len(aug) >= 2 && aug[:2] == "eh" {
		r.bytes(8) // eh_data, of GCC 2.x
		aug = aug[2:]
	}
	c.codeAlign = r.uleb()
	c.dataAlign = r.sleb()
	if version == 1 {
		r.u8()
	} else {
		r.uleb()
	}
	if len(aug) > 0 && aug[0] == 'z' {
		c.hasAug = true
		n := r.uleb()
		if r.err != nil {
			return nil, r.err
		}
		data := r.bytes(int(min(n, uint64(len(r.b)))))
		ar := &reader{b: data, addr: r.addr + uint64(r.i-len(data))}
		for _, ch := range aug[1:] {
			switch ch {
			case 'R':
				c.fdeEnc = ar.u8()
			case 'L':
				c.lsdaEnc = ar.u8()
			case 'P':
				ar.pointer(ar.u8())
			case 'S':
				c.signal = true
			case 'B', 'G':
			default:
				return nil, fmt.Errorf("augmentation %q not known", aug)
			}
		}
		if ar.err != nil {
			return nil, ar.err
		}
	} else if aug != "" {
		return nil, fmt.Errorf("augmentation %q not known", aug)
	}
	if r.err != nil {
		return nil, r.err
	}
	c.insns = r.b[r.i:]
	return c, nil
}

func parseFDE(r *reader, c *cie) (FDE, error) {
	start := r.pointer(c.fdeEnc)
	n := r.fixed(c.fdeEnc)
	if c.hasAug {
		r.bytes(int(min(r.uleb(), uint64(len(r.b)))))
	}
	if r.err != nil {
		return FDE{}, r.err
	}
	if start+n < start {
		return FDE{}, fmt.Errorf("range %#x+%#x wraps", start, n)
	}
	return FDE{Start: start, End: start + n, cie: c, insns: r.b[r.i:]}, nil
}

// Covering returns the FDE whose range holds the virtual address pc.
func (fr *Frames) Covering(pc uint64) (FDE, bool) {
	i := sort.Search(len(fr.FDEs), func(i int) bool { return fr.FDEs[i].End > pc })
	for ; i < len(fr.FDEs) && fr.FDEs[i].Start <= pc; i++ {
		if pc < fr.FDEs[i].End {
			return fr.FDEs[i], true
		}
	}
	return FDE{}, false
}
