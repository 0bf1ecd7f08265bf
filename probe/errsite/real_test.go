package errsite

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sqscope/sqscope/bpf"
	"github.com/sqscope/sqscope/ibv"
	"golang.org/x/arch/x86/x86asm"
)

// The providers of the installed rdma-core (ibverbs-providers and
// libibverbs-dev, which the Makefile's deps install). The tests find
// post_send and wr_complete in the stripped libraries without this
// package: the field offsets of struct verbs_context_ops are read from
// libmlx5.a's relocations (the static archive keeps its symbols), and
// each library's ops table from its own RELATIVE relocations.
const (
	libDir  = "/usr/lib/x86_64-linux-gnu/"
	mlx5SO  = libDir + "libmlx5.so.1"
	mlx5A   = libDir + "libmlx5.a"
	rxeSO   = libDir + "libibverbs/librxe-rdmav34.so"
	relaSz  = 24
	relRela = 8 // R_X86_64_RELATIVE
)

func requireFile(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("SQSCOPE_REQUIRE_BPF") == "1" {
			t.Fatalf("%s: %v (make deps installs rdma-core's providers)", p, err)
		}
		t.Skipf("%s: %v", p, err)
	}
}

// arMember returns one member of an ar archive.
func arMember(t *testing.T, path, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("!<arch>\n")) {
		t.Fatalf("%s is not an ar archive", path)
	}
	var long []byte
	for off := 8; off+60 <= len(b); {
		h := b[off : off+60]
		size, err := strconv.Atoi(strings.TrimSpace(string(h[48:58])))
		if err != nil || off+60+size > len(b) {
			t.Fatalf("%s: bad member header at %d", path, off)
		}
		data := b[off+60 : off+60+size]
		n := strings.TrimSpace(string(h[:16]))
		switch {
		case n == "//":
			long = data
		case strings.HasPrefix(n, "/") && len(n) > 1 && long != nil:
			i, _ := strconv.Atoi(n[1:])
			n = string(long[i:])
			n = n[:strings.Index(n, "/\n")]
		default:
			n = strings.TrimSuffix(n, "/")
		}
		if n == name {
			return data
		}
		off += 60 + size + size%2
	}
	t.Fatalf("%s has no member %s", path, name)
	return nil
}

// opsLayout reads, from libmlx5.a's mlx5.c.o, the offsets in struct
// verbs_context_ops of post_send, poll_cq and post_recv: the relocations
// of the ops table mlx5_ctx_common_ops name the functions.
func opsLayout(t *testing.T) (send, poll, recv, size int64, fields map[int64]bool) {
	f, err := elf.NewFile(bytes.NewReader(arMember(t, mlx5A, "mlx5.c.o")))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var table *elf.Symbol
	for i, s := range syms {
		if s.Name == "mlx5_ctx_common_ops" {
			table = &syms[i]
		}
	}
	rel := f.Section(".rela" + f.Sections[table.Section].Name)
	if table == nil || rel == nil {
		t.Fatal("mlx5.c.o: no mlx5_ctx_common_ops or no relocations for it")
	}
	data, _ := rel.Data()
	found := map[string]int64{}
	fields = map[int64]bool{}
	for i := 0; i+relaSz <= len(data); i += relaSz {
		off := binary.LittleEndian.Uint64(data[i:])
		sym := binary.LittleEndian.Uint64(data[i+8:]) >> 32
		if off < table.Value || off >= table.Value+table.Size || sym == 0 {
			continue
		}
		fields[int64(off-table.Value)] = true
		for _, fn := range []string{"mlx5_post_send", "mlx5_poll_cq", "mlx5_post_recv"} {
			if strings.HasSuffix(syms[sym-1].Name, "_"+fn) || syms[sym-1].Name == fn {
				found[fn] = int64(off - table.Value)
			}
		}
	}
	if len(found) != 3 {
		t.Fatalf("mlx5_ctx_common_ops: found %v of post_send, poll_cq, post_recv", found)
	}
	return found["mlx5_post_send"], found["mlx5_poll_cq"], found["mlx5_post_recv"], int64(table.Size), fields
}

// opsPostSend finds the library's ops table (a struct of the layout's
// size holding only function pointers, as RELATIVE relocations to
// functions' first instructions, and nulls, three different functions at
// post_send, poll_cq and post_recv) and returns the file offset of its
// post_send. For libmlx5 itself the table's pointers must be exactly at
// the fields mlx5.c.o sets (same sets a library with many such tables
// apart).
func opsPostSend(t *testing.T, b *Binary, sameFields bool) uint64 {
	send, poll, recv, size, fields := opsLayout(t)
	if !sameFields {
		fields = nil
	}
	rel := b.f.Section(".rela.dyn")
	if rel == nil {
		t.Fatal("no .rela.dyn")
	}
	data, _ := rel.Data()
	relative := map[uint64]uint64{}
	for i := 0; i+relaSz <= len(data); i += relaSz {
		if binary.LittleEndian.Uint64(data[i+8:])&0xffffffff == relRela {
			relative[binary.LittleEndian.Uint64(data[i:])] = binary.LittleEndian.Uint64(data[i+16:])
		}
	}
	targets := map[uint64]bool{}
	for at, to := range relative {
		base := at - uint64(send)
		p, ok1 := relative[base+uint64(poll)]
		r, ok2 := relative[base+uint64(recv)]
		if ok1 && ok2 && p != to && r != to && p != r && funcTable(b, relative, base, size, fields) {
			targets[to] = true
		}
	}
	if len(targets) != 1 {
		t.Fatalf("found %d ops tables' post_send, want one", len(targets))
	}
	for to := range targets {
		off, err := b.FileOffset(to)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	return 0
}

// funcTable says whether every word of [base, base+size) is null or a
// relocated pointer to a function's first instruction.
func funcTable(b *Binary, relative map[uint64]uint64, base uint64, size int64, fields map[int64]bool) bool {
	data, ok := b.readData(base, int(size))
	if !ok {
		return false
	}
	for k := int64(0); k < size; k += 8 {
		to, isRel := relative[base+uint64(k)]
		if fields != nil && isRel != fields[k] {
			return false
		}
		if !isRel {
			if binary.LittleEndian.Uint64(data[k:]) != 0 {
				return false
			}
			continue
		}
		if f, ok := b.frames.Covering(to); !ok || f.Start != to {
			return false
		}
	}
	return true
}

// storedAt lists the functions (lea of a RIP-relative address) the code
// stores at displacement disp of a pointer, directly or as a half of a
// 16-byte vector store: how a provider fills an ibv_qp_ex.
func storedAt(t *testing.T, b *Binary, disp int64) map[uint64]bool {
	out := map[uint64]bool{}
	for _, f := range b.frames.FDEs {
		code, err := b.code(f.Start, f.End)
		if err != nil {
			continue
		}
		gp := map[x86asm.Reg]uint64{}
		vec := map[x86asm.Reg][2]uint64{}
		for i := 0; i < len(code); {
			in, err := x86asm.Decode(code[i:], 64)
			if err != nil {
				break
			}
			pc := f.Start + uint64(i)
			i += in.Len
			d, _ := in.Args[0].(x86asm.Reg)
			switch m, isMem := in.Args[0].(x86asm.Mem); {
			case in.Op == x86asm.LEA:
				if src := in.Args[1].(x86asm.Mem); src.Base == x86asm.RIP {
					gp[d] = uint64(int64(pc) + int64(in.Len) + src.Disp)
					continue
				}
			case in.Op == x86asm.MOVQ && gp[regOf(in.Args[1])] != 0:
				vec[d] = [2]uint64{gp[regOf(in.Args[1])]}
				continue
			case in.Op == x86asm.PUNPCKLQDQ:
				v := vec[d]
				v[1] = vec[regOf(in.Args[1])][0]
				vec[d] = v
				continue
			case isMem && in.Op == x86asm.MOV && m.Disp == disp && gp[regOf(in.Args[1])] != 0:
				out[gp[regOf(in.Args[1])]] = true
			case isMem && in.Op == x86asm.MOVUPS && vec[regOf(in.Args[1])][0] != 0:
				v := vec[regOf(in.Args[1])]
				if m.Disp == disp && v[0] != 0 {
					out[v[0]] = true
				}
				if m.Disp+8 == disp && v[1] != 0 {
					out[v[1]] = true
				}
			}
			delete(gp, d)
			delete(vec, d)
		}
	}
	return out
}

// qpxWRComplete is the offset of wr_complete in struct ibv_qp_ex.
func qpxWRComplete(t *testing.T) int64 {
	for _, f := range bpf.QPXFuncs {
		if f.Role == "wr_complete" {
			return int64(f.Off)
		}
	}
	t.Fatal("bpf.QPXFuncs has no wr_complete")
	return 0
}

func analyzeLogged(t *testing.T, b *Binary, name string, fn Func) *Report {
	t.Helper()
	r, err := b.Analyze(fn)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s:\n%s", name, r)
	if r.CFAMismatch != 0 || r.CFAChecked != r.Reached {
		t.Errorf("%s: stack depth checked at %d of %d reached instructions, %d disagree with the unwind table", name, r.CFAChecked, r.Reached, r.CFAMismatch)
	}
	return r
}

// sitesWith lists the sites of errno errno whose causes include c.
func sitesWith(r *Report, errno int, c Cause) []Site {
	var out []Site
	for _, s := range r.Sites {
		if s.Errno == errno && containsCause(s.Causes, c) {
			out = append(out, s)
		}
	}
	return out
}

// TestInstalledProviders analyses the installed libmlx5 and librxe and
// holds the result to what rdma-core's source says each returns, and
// why (providers/mlx5/qp.c _mlx5_post_send, mlx5_send_wr_complete;
// providers/rxe/rxe.c rxe_post_send, validate_send_wr, wr_complete).
func TestInstalledProviders(t *testing.T) {
	for _, p := range []string{mlx5SO, mlx5A, rxeSO} {
		requireFile(t, p)
	}
	t.Run("mlx5/post_send", func(t *testing.T) {
		b, err := Open(mlx5SO)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		r := analyzeLogged(t, b, "libmlx5 post_send", Func{Start: opsPostSend(t, b, true), Role: PostSend})
		for _, w := range []struct {
			errno int
			cause Cause
		}{{ibv.ENOMEM, CauseQueueFull}, {ibv.ENOMEM, CauseTooManySGE}, {ibv.ENOMEM, CauseInline}, {ibv.EINVAL, CauseOpcode}} {
			got := sitesWith(r, w.errno, w.cause)
			if len(got) == 0 {
				t.Errorf("no %s site with cause %s", ibv.ErrnoName(int32(w.errno)), w.cause)
			}
			for _, s := range got {
				if !s.Exact || s.WR.Kind == Unknown || s.QP.Kind == Unknown {
					t.Errorf("site %#x: exact %v, QP in %s, WR in %s: mlx5 returns the error it set, *bad_wr the WR", s.Offset, s.Exact, s.QP, s.WR)
				}
			}
		}
	})
	t.Run("mlx5/wr_complete", func(t *testing.T) {
		b, err := Open(mlx5SO)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		// libmlx5.a's qp.c.o gives the sizes of mlx5_send_wr_complete and
		// of mlx5_send_wr_complete_error (installed outside RTS); the .so
		// stores both at wr_complete, and a size tells which is which.
		o, err := elf.NewFile(bytes.NewReader(arMember(t, mlx5A, "qp.c.o")))
		if err != nil {
			t.Fatal(err)
		}
		syms, _ := o.Symbols()
		size := map[string]uint64{}
		for _, s := range syms {
			size[s.Name] = s.Size
		}
		stored := storedAt(t, b, qpxWRComplete(t)+8) // the ibv_qp_ex follows mlx5's 8-byte resource header
		byName := map[string]uint64{}
		for v := range stored {
			f, ok := b.frames.Covering(v)
			if !ok || f.Start != v {
				continue
			}
			for _, n := range []string{"mlx5_send_wr_complete", "mlx5_send_wr_complete_error"} {
				if f.End-f.Start == size[n] {
					byName[n], _ = b.FileOffset(v)
				}
			}
		}
		if len(byName) != 2 {
			t.Fatalf("found %v among the functions stored at wr_complete (%d)", byName, len(stored))
		}
		r := analyzeLogged(t, b, "libmlx5 wr_complete", Func{Start: byName["mlx5_send_wr_complete"], Role: WRComplete})
		if len(r.Sites) != 1 || r.Sites[0].Errno != 0 || r.Sites[0].ErrnoAt.Kind != InReg || r.Sites[0].QP.Kind == Unknown || !containsCause(r.Sites[0].Causes, CauseQPState) {
			t.Errorf("want one site returning the error the QP recorded, read from a register: %+v", r.Sites)
		}
		r = analyzeLogged(t, b, "libmlx5 wr_complete outside RTS", Func{Start: byName["mlx5_send_wr_complete_error"], Role: WRComplete})
		// Every return gives EINVAL: the sites' guards, if any, choose
		// only how the QP's lock is released.
		qpKnown := 0
		for _, s := range r.Sites {
			if s.Errno != ibv.EINVAL || !s.Exact {
				t.Errorf("site %#x: %s, exact %v: this function always returns EINVAL", s.Offset, s.ErrnoName(), s.Exact)
			}
			if s.QP.Kind != Unknown {
				qpKnown++
			}
		}
		if len(r.Sites) == 0 || qpKnown == 0 {
			t.Errorf("want EINVAL sites, one at least with the QP: %+v", r.Sites)
		}
	})
	t.Run("rxe/post_send", func(t *testing.T) {
		b, err := Open(rxeSO)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		r := analyzeLogged(t, b, "librxe post_send", Func{Start: opsPostSend(t, b, false), Role: PostSend})
		full := sitesWith(r, ibv.ENOMEM, CauseQueueFull)
		if len(full) != 1 || full[0].Exact || full[0].WR.Kind == Unknown || full[0].QP.Kind == Unknown {
			t.Errorf("want one ENOMEM site of a full ring, not exact (the doorbell write's error replaces it), with the WR: %+v", full)
		}
		for _, c := range []Cause{CauseTooManySGE, CauseInline} {
			if len(sitesWith(r, ibv.EINVAL, c)) == 0 {
				t.Errorf("no EINVAL site with cause %s (rxe's validate_send_wr)", c)
			}
		}
		if len(sitesWith(r, ibv.ENOMEM, CauseInline))+len(sitesWith(r, ibv.ENOMEM, CauseTooManySGE)) != 0 {
			t.Error("an ENOMEM site for inline or SGEs: rxe returns EINVAL for those")
		}
	})
	t.Run("rxe/wr_complete", func(t *testing.T) {
		b, err := Open(rxeSO)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		stored := storedAt(t, b, qpxWRComplete(t))
		if len(stored) != 1 {
			t.Fatalf("%d functions stored at wr_complete, want 1", len(stored))
		}
		for v := range stored {
			off, _ := b.FileOffset(v)
			r := analyzeLogged(t, b, "librxe wr_complete", Func{Start: off, Role: WRComplete})
			// rxe's wr_complete returns qp->err read again after the
			// unlock call: no value is proven non-zero at the return.
			if len(r.Sites) != 0 {
				t.Errorf("sites %+v: rxe returns a value it reads again after a call", r.Sites)
			}
		}
	})
}
