package probe

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/sqscope/sqscope/bpf"
)

// The memory scan finds the verbs objects a running process made before
// sqscope attached, when no symbol names its provider's data path (a
// stripped libmlx5 or librxe, or the simulated HCA in a stripped binary):
// a struct ibv_context is recognised by its ops table, whose post_send,
// post_recv and poll_cq all point into one executable file mapping, and a
// struct ibv_qp by its context pointer, its protection domain and CQs of
// that context, and a QP type and state verbs knows.

// ScanBounds limit a memory scan. Zero fields take the defaults.
type ScanBounds struct {
	MaxBytes int64         // bytes read at most; default DefaultScanBytes
	MaxTime  time.Duration // time spent at most; default DefaultScanTime
	// byteCut and timeCut name the bounds in ScanResult.Cut when they are
	// not the process's own (a host-wide trace's total, hostscan.go)
	byteCut, timeCut string
	// done, once closed, ends the scan at the next chunk (the tracer's
	// Options.Context)
	done <-chan struct{}
}

const (
	// DefaultScanBytes and DefaultScanTime bound a scan unless raised.
	DefaultScanBytes = 4 << 30
	DefaultScanTime  = 10 * time.Second
	scanChunk        = 4 << 20
	// scanOverlap keeps the end of a chunk for the next: an object that
	// straddles two reads is still seen whole.
	scanOverlap = bpf.IBVQPXSize
	// maxQPCandidates bounds the words kept as possible QPs until their
	// context is known.
	maxQPCandidates = 1 << 20
)

// maxContextCandidates bounds the would-be contexts kept during a scan;
// past it a QP's context is read when the QP is matched (a variable for
// the tests).
var maxContextCandidates = 1 << 16

// ScanContext is a struct ibv_context found in memory.
type ScanContext struct {
	Addr        uint64
	Provider    string // the file its ops point into
	PostSend    uint64
	PostRecv    uint64
	PollCQ      uint64
	PostSRQRecv uint64 // 0 when not in the provider's mapping
}

// ScanQP is a struct ibv_qp found in memory.
type ScanQP struct {
	Addr    uint64
	Context uint64
	QPNum   uint32
	Type    uint8 // enum ibv_qp_type
	State   uint32
	SendCQ  uint64
	RecvCQ  uint64
	// WRFuncs are the ibv_qp_ex builders (by role name) when the QP is an
	// extended one whose builders point into its provider's mapping.
	WRFuncs map[string]uint64
	// CQFuncs are the ibv_cq_ex functions of its send CQ (by role name)
	// when that CQ is an extended one (ibv_start_poll...).
	CQFuncs map[string]uint64
}

// ScanResult says what a scan found and what it read.
type ScanResult struct {
	PID      int
	Bytes    int64 // bytes read
	Mappings int   // mappings read (whole or in part)
	Skipped  int   // readable mappings left unread: shared, device or special
	Duration time.Duration
	Contexts []ScanContext
	QPs      []ScanQP
	// Cut names the bound that ended the scan early ("" when it read
	// every mapping it reads): objects past it were not seen.
	Cut string
}

// ErrScanBound is wrapped by the error of a scan that hit a bound; its
// ScanResult holds what was found before.
var ErrScanBound = errors.New("memory scan bound reached")

// ScanDataPath scans the writable private memory of process pid for
// verbs contexts and QPs. It reads /proc/PID/mem, which needs ptrace
// access to pid. The process keeps running; objects it makes during the
// scan may be missed.
func ScanDataPath(pid int, b ScanBounds) (res ScanResult, err error) {
	if b.MaxBytes <= 0 {
		b.MaxBytes = DefaultScanBytes
	}
	if b.MaxTime <= 0 {
		b.MaxTime = DefaultScanTime
	}
	res.PID = pid
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	if err := checkPID(pid); err != nil {
		return res, err
	}
	maps, err := readMaps(pid)
	if err != nil {
		return res, scanGone(pid, fmt.Errorf("reading the mappings of process %d: %w", pid, err))
	}
	mem, err := os.Open(ProcDir(pid) + "/mem")
	if err != nil {
		return res, memAccessErr(pid, err)
	}
	defer mem.Close()

	s := scanner{exec: execMappings(maps), mem: mem}
	buf := make([]byte, scanOverlap+scanChunk)
	for _, m := range scanOrder(maps, &res) {
		res.Mappings++
		carry := 0
		for addr := m.Start; addr < m.End; {
			if interrupted(b.done) {
				s.finish(&res)
				res.Cut = "interruption"
				return res, fmt.Errorf("%w: the memory scan of process %d, after %d MiB", ErrInterrupted, pid, res.Bytes>>20)
			}
			if res.Bytes >= b.MaxBytes {
				res.Cut = cmp.Or(b.byteCut, fmt.Sprintf("byte bound %d MiB (--scan-mib)", b.MaxBytes>>20))
			} else if time.Since(start) >= b.MaxTime {
				res.Cut = cmp.Or(b.timeCut, fmt.Sprintf("time bound %v (--scan-time)", b.MaxTime))
			}
			if res.Cut != "" {
				s.finish(&res)
				return res, fmt.Errorf("%w: %s after %d MiB of process %d", ErrScanBound, res.Cut, res.Bytes>>20, pid)
			}
			n := min(uint64(scanChunk), m.End-addr, uint64(b.MaxBytes-res.Bytes))
			got, err := mem.ReadAt(buf[carry:carry+int(n)], int64(addr))
			res.Bytes += int64(got)
			if got > 0 {
				s.words(buf[:carry+got], addr-uint64(carry), addr+uint64(got) >= m.End)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				if exiting(pid) {
					return res, scanGone(pid, err)
				}
				if errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EFAULT) {
					break // a hole (unpopulated device memory, a guard): go on
				}
				return res, memAccessErr(pid, err)
			}
			if got == 0 {
				if exiting(pid) {
					return res, scanGone(pid, io.ErrUnexpectedEOF)
				}
				break
			}
			addr += uint64(got)
			tail := min(scanOverlap, carry+got)
			copy(buf, buf[carry+got-tail:carry+got])
			carry = tail
		}
	}
	s.finish(&res)
	if exiting(pid) {
		return res, scanGone(pid, io.ErrUnexpectedEOF)
	}
	return res, nil
}

// exiting reports whether pid has ended or is on its way: its memory is
// released (no mappings left) before the kernel says it ended.
func exiting(pid int) bool {
	if Ended(pid) {
		return true
	}
	maps, err := readMaps(pid)
	return err != nil || len(maps) == 0
}

// scanGone is the error of a process that exited during the scan.
func scanGone(pid int, err error) error {
	if exiting(pid) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("process %d exited during the memory scan", pid)
	}
	return err
}

// memAccessErr says what access to the memory of pid lacks.
func memAccessErr(pid int, err error) error {
	if exiting(pid) || errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("process %d exited during the memory scan", pid)
	}
	if errors.Is(err, os.ErrPermission) {
		scope := "unknown"
		if b, e := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); e == nil {
			scope = strings.TrimSpace(string(b))
		}
		why := "needs CAP_SYS_PTRACE, or the same user as the process"
		switch scope {
		case "1":
			why = "needs CAP_SYS_PTRACE (kernel.yama.ptrace_scope is 1: only a parent may read a process's memory without it)"
		case "2":
			why = "needs CAP_SYS_PTRACE (kernel.yama.ptrace_scope is 2)"
		case "3":
			why = "is impossible: kernel.yama.ptrace_scope is 3 (no process may attach; only a reboot lowers it)"
		}
		return fmt.Errorf("cannot read the memory of process %d: reading /proc/%d/mem %s", pid, pid, why)
	}
	return fmt.Errorf("reading the memory of process %d: %w", pid, err)
}

// scanOrder lists the mappings a scan reads: readable, writable and
// private (the heap, anonymous memory, data of files), the heap first,
// where contexts and QPs are allocated. Shared, device and special
// mappings are skipped and counted.
func scanOrder(maps []mapping, res *ScanResult) []mapping {
	var out []mapping
	for _, m := range maps {
		if m.Perms[0] != 'r' {
			continue
		}
		special := strings.HasPrefix(m.Path, "[") && m.Path != "[heap]"
		if m.Perms[1] != 'w' || m.Perms[3] != 'p' || special || strings.HasPrefix(m.Path, "/dev/") {
			res.Skipped++
			continue
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path == "[heap]" && out[j].Path != "[heap]" })
	return out
}

// execMappings are the executable file mappings, sorted by address.
func execMappings(maps []mapping) []mapping {
	var out []mapping
	for _, m := range maps {
		if m.Perms[2] == 'x' && m.Path != "" && !strings.HasPrefix(m.Path, "[") {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// qpCand is a word that may start a struct ibv_qp.
type qpCand struct {
	addr, ctx, pd, sendCQ, recvCQ uint64
	qpNum, state                  uint32
	typ                           uint8
}

type scanner struct {
	exec     []mapping
	lo, hi   uint64
	mem      io.ReaderAt
	contexts map[uint64]ScanContext
	// contextsFull: more would-be contexts than maxContextCandidates
	contextsFull bool
	cands        []qpCand
	seen         map[uint64]bool
}

// execIndex returns the index of the executable mapping holding v, or -1.
func (s *scanner) execIndex(v uint64) int {
	if len(s.exec) == 0 || v < s.exec[0].Start || v >= s.exec[len(s.exec)-1].End {
		return -1
	}
	i := sort.Search(len(s.exec), func(i int) bool { return s.exec[i].End > v })
	if i < len(s.exec) && s.exec[i].Start <= v {
		return i
	}
	return -1
}

// sameFile reports whether v lies in an executable mapping of the file
// of exec[i] (a file can be mapped in several executable pieces).
func (s *scanner) sameFile(i int, v uint64) bool {
	j := s.execIndex(v)
	return j >= 0 && s.exec[j].Path == s.exec[i].Path && s.exec[j].Inode == s.exec[i].Inode
}

const (
	ctxPostSend = bpf.IBVContextOps + bpf.IBVOpsPostSend
	ctxPostRecv = bpf.IBVContextOps + bpf.IBVOpsPostRecv
	ctxPollCQ   = bpf.IBVContextOps + bpf.IBVOpsPollCQ
	ctxSRQRecv  = bpf.IBVContextOps + bpf.IBVOpsPostSRQRecv
)

// words looks at every 8-byte aligned word of buf, which holds the
// target's memory from addr on; last says it ends its mapping (else its
// end is looked at again with the next chunk).
func (s *scanner) words(buf []byte, addr uint64, last bool) {
	if s.contexts == nil {
		s.contexts, s.seen = map[uint64]ScanContext{}, map[uint64]bool{}
		if len(s.exec) > 0 {
			s.lo, s.hi = s.exec[0].Start, s.exec[len(s.exec)-1].End
		}
	}
	le := binary.LittleEndian
	span := s.hi - s.lo
	end := len(buf) - bpf.IBVQPXSize
	if last {
		end = len(buf) - bpf.IBVQPSize
	}
	// p is the offset of the post_send slot of a would-be context: the
	// one word tested at every position, the others only after it.
	for p := ctxPostSend; p+8 <= len(buf); p += 8 {
		v := le.Uint64(buf[p:])
		if v-s.lo < span {
			s.context(buf, p-ctxPostSend, addr, v)
		}
		// a QP: its qp_type and state are small, its pointers not null
		q := p - ctxPostSend
		if q >= end || !qpTypeValid(le.Uint32(buf[q+bpf.IBVQPQPType:])) ||
			le.Uint32(buf[q+bpf.IBVQPState:]) > 7 {
			continue
		}
		c := qpCand{addr: addr + uint64(q), ctx: le.Uint64(buf[q+bpf.IBVQPContext:]),
			pd: le.Uint64(buf[q+16:]), sendCQ: le.Uint64(buf[q+bpf.IBVQPSendCQ:]),
			recvCQ: le.Uint64(buf[q+bpf.IBVQPRecvCQ:]), qpNum: le.Uint32(buf[q+bpf.IBVQPQPNum:]),
			state: le.Uint32(buf[q+bpf.IBVQPState:]), typ: buf[q+bpf.IBVQPQPType]}
		if c.ctx&7 != 0 || c.ctx == 0 || c.pd&7 != 0 || c.pd == 0 || c.sendCQ&7 != 0 || c.sendCQ == 0 ||
			c.recvCQ&7 != 0 || c.qpNum == 0 || c.qpNum >= 1<<24 || len(s.cands) >= maxQPCandidates || s.seen[c.addr] {
			continue
		}
		s.seen[c.addr] = true
		s.cands = append(s.cands, c)
	}
}

// context keeps the would-be struct ibv_context at buf[c:] (address
// addr+c) whose post_send is v, if it is one.
func (s *scanner) context(buf []byte, c int, addr, v uint64) {
	ctx, ok := s.checkContext(buf, c, addr, v)
	if !ok {
		return
	}
	if len(s.contexts) >= maxContextCandidates {
		s.contextsFull = true // the others are read again if a QP names them
		return
	}
	s.contexts[ctx.Addr] = ctx
}

// checkContext tests the would-be context at buf[c:]: its post_send v,
// post_recv and poll_cq three different functions of one file.
func (s *scanner) checkContext(buf []byte, c int, addr, v uint64) (ScanContext, bool) {
	if c < 0 || c+ctxPostRecv+8 > len(buf) {
		return ScanContext{}, false
	}
	i := s.execIndex(v)
	if i < 0 {
		return ScanContext{}, false
	}
	le := binary.LittleEndian
	recv, poll := le.Uint64(buf[c+ctxPostRecv:]), le.Uint64(buf[c+ctxPollCQ:])
	if recv == v || poll == v || recv == poll || !s.sameFile(i, recv) || !s.sameFile(i, poll) {
		return ScanContext{}, false
	}
	ctx := ScanContext{Addr: addr + uint64(c), Provider: s.exec[i].Path, PostSend: v, PostRecv: recv, PollCQ: poll}
	if srq := le.Uint64(buf[c+ctxSRQRecv:]); s.sameFile(i, srq) {
		ctx.PostSRQRecv = srq
	}
	return ctx, true
}

// readContext is the context at addr that a QP names: one kept by the
// scan, or, when there were more would-be contexts than were kept, read
// and checked now.
func (s *scanner) readContext(addr uint64) (ScanContext, bool) {
	if ctx, ok := s.contexts[addr]; ok || !s.contextsFull {
		return ctx, ok
	}
	b := make([]byte, ctxPostRecv+8)
	if n, _ := s.mem.ReadAt(b, int64(addr)); n != len(b) {
		return ScanContext{}, false
	}
	return s.checkContext(b, 0, addr, binary.LittleEndian.Uint64(b[ctxPostSend:]))
}

func qpTypeValid(t uint32) bool {
	switch t {
	case 2, 3, 4, 8, 9, 10, 0xff: // RC, UC, UD, RAW_PACKET, XRC_SEND, XRC_RECV, DRIVER
		return true
	}
	return false
}

// finish keeps the QP candidates of the would-be contexts whose protection
// domain and CQs belong to the same context, and the contexts that have
// such a QP: any table of three functions of one file looks like an ops
// table (Go's, libc's), but only a verbs context has QPs, PDs and CQs
// pointing back at it. It reads the builders of extended QPs.
func (s *scanner) finish(res *ScanResult) {
	keep := map[uint64]ScanContext{}
	for _, c := range s.cands {
		ctx, ok := s.readContext(c.ctx)
		if !ok || s.word(c.pd) != c.ctx || s.word(c.sendCQ) != c.ctx ||
			(c.recvCQ != 0 && s.word(c.recvCQ) != c.ctx) {
			continue // ibv_pd and ibv_cq start with their context too
		}
		q := ScanQP{Addr: c.addr, Context: c.ctx, QPNum: c.qpNum, Type: c.typ, State: c.state,
			SendCQ: c.sendCQ, RecvCQ: c.recvCQ}
		q.WRFuncs = s.funcs(c.addr, bpf.IBVQPXSize, ctx, bpf.QPXFuncs, "wr_start", "wr_complete", "wr_abort")
		q.CQFuncs = s.funcs(c.sendCQ, bpf.IBVCQXSize, ctx, bpf.CQXFuncs, "start_poll", "next_poll", "end_poll")
		res.QPs = append(res.QPs, q)
		keep[c.ctx] = ctx
	}
	for _, ctx := range keep {
		res.Contexts = append(res.Contexts, ctx)
	}
	sort.Slice(res.Contexts, func(i, j int) bool { return res.Contexts[i].Addr < res.Contexts[j].Addr })
	sort.Slice(res.QPs, func(i, j int) bool { return res.QPs[i].QPNum < res.QPs[j].QPNum })
}

// word reads one 8-byte word of the target, 0 when it cannot.
func (s *scanner) word(addr uint64) uint64 {
	var b [8]byte
	if addr == 0 {
		return 0
	}
	if n, _ := s.mem.ReadAt(b[:], int64(addr)); n != 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

// funcs reads the function pointers of an extended object at addr (an
// ibv_qp_ex's builders, an ibv_cq_ex's polling functions): those that
// point into its context's provider file, by role, when at least the
// needed ones do; a plain ibv_qp or ibv_cq has provider data there.
func (s *scanner) funcs(addr uint64, size int, ctx ScanContext, table []struct {
	Role   string
	Define string
	Off    int
}, need ...string) map[string]uint64 {
	b := make([]byte, size)
	if n, _ := s.mem.ReadAt(b, int64(addr)); n != len(b) {
		return nil
	}
	i := s.execIndex(ctx.PostSend)
	out := map[string]uint64{}
	for _, f := range table {
		v := binary.LittleEndian.Uint64(b[f.Off:])
		if v != 0 && s.sameFile(i, v) {
			out[f.Role] = v
		}
	}
	seen := map[uint64]bool{}
	for _, n := range need {
		if out[n] == 0 || seen[out[n]] {
			return nil
		}
		seen[out[n]] = true
	}
	return out
}
