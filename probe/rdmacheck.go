package probe

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sqscope/sqscope/ibv"
)

// The QPs a memory scan found in a process whose provider is a kernel
// driver's (libmlx5, librxe: every QP a kernel object) are checked
// against the kernel's own list (RdmaQPs): number, type, state and
// process. The kernel's list adds what memory does not hold: the device
// and port of each.

// maxNamedQPs bounds the QPs a cross-check's line names one by one.
const maxNamedQPs = 4

// crossCheck compares the QPs the scan of process pid found (res) with
// the kernel's list (kqps, or its error kerr). It returns one line saying
// what the kernel's list showed, and whether it disagrees; "" when the
// scan found no QP of a kernel driver's provider to check.
func crossCheck(pid int, res *ScanResult, kqps []RdmaQP, kerr error) (line string, disagrees bool) {
	mine := kernelQPs(res)
	if len(mine) == 0 {
		return "", false
	}
	if kerr != nil {
		if errors.Is(kerr, ErrNoRdmaNetlink) {
			return fmt.Sprintf("not cross-checked with the kernel's QP list: %v", kerr), false
		}
		return fmt.Sprintf("not cross-checked with the kernel's QP list: RDMA netlink: %v", kerr), false
	}
	kernel := map[uint32]RdmaQP{}
	for _, k := range kqps {
		if !k.Kernel && k.PID == uint32(pid) {
			kernel[k.QPNum] = k
		}
	}
	var bad, good []string
	seen := map[uint32]bool{}
	for _, q := range mine {
		seen[q.QPNum] = true
		k, ok := kernel[q.QPNum]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("QP %#x found in memory is not the kernel's for process %d", q.QPNum, pid))
		case k.Type != q.Type || uint32(k.State) != q.State:
			bad = append(bad, fmt.Sprintf("QP %#x: %s %s in memory, %s %s by the kernel", q.QPNum,
				ibv.QPTypeName(q.Type), ibv.QPStateName(int32(q.State)), ibv.QPTypeName(k.Type), ibv.QPStateName(int32(k.State))))
		default:
			good = append(good, describeKernelQP(k))
		}
	}
	var missed []uint32
	for n := range kernel {
		if !seen[n] {
			missed = append(missed, n)
		}
	}
	sort.Slice(missed, func(i, j int) bool { return missed[i] < missed[j] })
	for _, n := range missed {
		bad = append(bad, fmt.Sprintf("QP %#x (%s) the kernel lists for process %d was not found in memory (made since the scan, or missed by it)",
			n, describeKernelQP(kernel[n]), pid))
	}
	if len(bad) > 0 {
		return fmt.Sprintf("the kernel's QP list (RDMA netlink) DISAGREES: %s", namedList(bad)), true
	}
	return fmt.Sprintf("the kernel's QP list (RDMA netlink) agrees on all %d QP(s) (number, type, state, pid): %s", len(good), namedList(good)), false
}

// kernelQPs are the QPs of res whose context's provider is a kernel
// driver's: those the kernel lists too.
func kernelQPs(res *ScanResult) []ScanQP {
	kernelBacked := map[uint64]bool{}
	for _, c := range res.Contexts {
		if providerFile(c.Provider) {
			kernelBacked[c.Addr] = true
		}
	}
	var mine []ScanQP
	for _, q := range res.QPs {
		if kernelBacked[q.Context] {
			mine = append(mine, q)
		}
	}
	return mine
}

// checkWithKernel cross-checks what the scan of process pid found with
// the kernel's QP list, when it found QPs the kernel has; a disagreement
// is warned of too.
func (t *Tracer) checkWithKernel(pid int, res *ScanResult) string {
	if len(kernelQPs(res)) == 0 {
		return ""
	}
	kqps, kerr := RdmaQPs()
	line, bad := crossCheck(pid, res, kqps, kerr)
	if bad {
		t.warn(fmt.Sprintf("process %d: %s", pid, line))
	}
	return line
}

// describeKernelQP is a QP as the kernel lists it.
func describeKernelQP(k RdmaQP) string {
	s := fmt.Sprintf("%#x %s %s on %s", k.QPNum, ibv.QPTypeName(k.Type), ibv.QPStateName(int32(k.State)), k.Device)
	if k.Port != 0 {
		s += fmt.Sprintf(" port %d", k.Port)
	}
	return s
}

func namedList(items []string) string {
	if len(items) > maxNamedQPs {
		return strings.Join(items[:maxNamedQPs], "; ") + fmt.Sprintf("; and %d more", len(items)-maxNamedQPs)
	}
	return strings.Join(items, "; ")
}
