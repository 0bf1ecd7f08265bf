package errsite

import (
	"bytes"
	"encoding/binary"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// ehRecord builds one .eh_frame record: length, id, body.
func ehRecord(id uint32, body []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(4+len(body)))
	b = binary.LittleEndian.AppendUint32(b, id)
	return append(b, body...)
}

// syntheticEHFrame is a CIE ("zR", pcrel sdata4 addresses, CFA rsp+8)
// and two FDEs, the second moving the CFA by a push and a remembered
// state, as GCC writes them.
func syntheticEHFrame(addr uint64) []byte {
	cie := []byte{1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b, // version, aug, code 1, data -8, ra 16, aug len 1, enc
		0x0c, 7, 8, // def_cfa rsp+8
		0x90, 1} // offset r16 at cfa-8
	out := ehRecord(0, cie)
	fde := func(start, n uint32, insns []byte) {
		at := len(out) + 4 // the id field
		pcField := addr + uint64(len(out)+8)
		body := binary.LittleEndian.AppendUint32(nil, uint32(int64(start)-int64(pcField)))
		body = binary.LittleEndian.AppendUint32(body, n)
		body = append(body, 0) // no augmentation data
		body = append(body, insns...)
		out = append(out, ehRecord(uint32(at), body)...)
	}
	fde(0x1000, 0x20, nil)
	fde(0x1040, 0x40, []byte{
		0x41,     // advance 1
		0x0e, 16, // def_cfa_offset 16
		0x0a,       // remember_state
		0x44,       // advance 4
		0x0e, 0x20, // def_cfa_offset 32
		0x48, // advance 8
		0x0b, // restore_state
	})
	return append(out, 0, 0, 0, 0)
}

func TestParseEHFrame(t *testing.T) {
	const addr = 0x2000
	fr, err := ParseEHFrame(syntheticEHFrame(addr), addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.FDEs) != 2 || fr.FDEs[0].Start != 0x1000 || fr.FDEs[0].End != 0x1020 || fr.FDEs[1].Start != 0x1040 || fr.FDEs[1].End != 0x1080 {
		t.Fatalf("FDEs %+v", fr.FDEs)
	}
	for _, c := range []struct {
		name  string
		pc    uint64
		found bool
		start uint64
	}{{"first byte", 0x1000, true, 0x1000}, {"last byte", 0x101f, true, 0x1000}, {"gap", 0x1030, false, 0}, {"second", 0x107f, true, 0x1040}, {"past", 0x1080, false, 0}} {
		t.Run(c.name, func(t *testing.T) {
			f, ok := fr.Covering(c.pc)
			if ok != c.found || ok && f.Start != c.start {
				t.Errorf("Covering(%#x) = %#x, %v", c.pc, f.Start, ok)
			}
		})
	}
	f := fr.FDEs[1]
	for _, c := range []struct {
		pc  uint64
		off int64
	}{{0x1040, 8}, {0x1041, 16}, {0x1044, 16}, {0x1045, 32}, {0x104c, 32}, {0x104d, 16}, {0x107f, 16}} {
		got, err := f.CFAAt(c.pc)
		if err != nil || got.Reg != dwarfRSP || got.Off != c.off {
			t.Errorf("CFA at %#x = %+v, %v; want rsp+%d", c.pc, got, err, c.off)
		}
	}
	for _, bad := range [][]byte{
		ehRecord(0, []byte{9}),                   // CIE version 9
		ehRecord(0, []byte{1, 'x', 0}),           // augmentation not known
		ehRecord(8, []byte{0, 0, 0, 0, 0, 0, 0}), // FDE with no CIE before it
		{0x10, 0, 0, 0, 0},                       // length past the end
	} {
		if _, err := ParseEHFrame(bad, 0); err == nil {
			t.Errorf("% x parsed", bad)
		}
	}
}

// TestEHFrameMatchesReadelf holds the parser to binutils' readelf on
// the installed libmlx5: the same FDE ranges, every one.
func TestEHFrameMatchesReadelf(t *testing.T) {
	requireFile(t, mlx5SO)
	out, err := exec.Command("readelf", "--debug-dump=frames", mlx5SO).Output()
	if err != nil {
		t.Skipf("readelf: %v", err)
	}
	want := map[[2]uint64]bool{}
	for _, m := range regexp.MustCompile(`FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)`).FindAllSubmatch(out, -1) {
		s, _ := strconv.ParseUint(string(m[1]), 16, 64)
		e, _ := strconv.ParseUint(string(m[2]), 16, 64)
		if e > s {
			want[[2]uint64{s, e}] = true
		}
	}
	b, err := Open(mlx5SO)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := b.Frames().FDEs
	if len(want) < 100 || len(got) != len(want) {
		t.Fatalf("%d FDEs parsed, readelf lists %d", len(got), len(want))
	}
	for _, f := range got {
		if !want[[2]uint64{f.Start, f.End}] {
			t.Errorf("FDE %#x-%#x is not readelf's", f.Start, f.End)
		}
	}
	t.Logf("%d FDEs, all as readelf reads them", len(got))
}

// FuzzParseEHFrame: any bytes give FDEs or an error, never a panic, and
// every rule a parsed FDE holds can be run.
func FuzzParseEHFrame(f *testing.F) {
	f.Add(syntheticEHFrame(0x2000))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ParseEHFrame(b, 0x2000)
		if err != nil {
			return
		}
		for _, fde := range fr.FDEs {
			if fde.End <= fde.Start {
				t.Fatalf("empty FDE kept: %+v", fde)
			}
			fde.CFAAt(fde.Start)
			fde.CFAAt(fde.End - 1)
		}
	})
}
