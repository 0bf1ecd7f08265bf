package probe

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// nlMsg lays out one netlink message: header, then body.
func nlMsg(typ, flags uint16, seq uint32, body ...[]byte) []byte {
	var b []byte
	for _, p := range body {
		b = append(b, p...)
	}
	h := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(h[0:], uint32(len(h)+len(b)))
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], seq)
	binary.NativeEndian.PutUint32(h[12:], 4242)
	return append(h, b...)
}

// negErrno is an NLMSG_ERROR's error field: the errno, negated.
func negErrno(e unix.Errno) uint32 { return uint32(-int32(e)) }

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func nest(typ uint16, attrs ...[]byte) []byte {
	var b []byte
	for _, a := range attrs {
		b = append(b, a...)
	}
	return nlAttr(typ|unix.NLA_F_NESTED, b)
}

// The attributes in the order the kernel's nldev (fill_nldev_handle,
// fill_res_qp_entry, fill_res_name_pid) writes them for an rxe device:
// a user RC QP bound to port 1, and the kernel's GSI QP (a name, no
// pid); strings NUL-terminated, u8 values padded to four bytes.
var (
	rcEntry = nest(nldevAttrQPEntry,
		nlAttr(nldevAttrPort, u32(1)), nlAttr(nldevAttrLQPN, u32(0x11)), nlAttr(22, u32(0x12)),
		nlAttr(23, u32(0x2bd1a0)), nlAttr(24, u32(0x9c01f3)), nlAttr(25, []byte{0}),
		nlAttr(nldevAttrResType, []byte{2}), nlAttr(nldevAttrResState, []byte{3}),
		nlAttr(nldevAttrResPID, u32(311)))
	gsiEntry = nest(nldevAttrQPEntry,
		nlAttr(nldevAttrPort, u32(1)), nlAttr(nldevAttrLQPN, u32(1)), nlAttr(24, u32(0)),
		nlAttr(nldevAttrResType, []byte{1}), nlAttr(nldevAttrResState, []byte{3}),
		nlAttr(29, []byte("ib_core\x00")))
	rxeHandle = append(nlAttr(nldevAttrDevIndex, u32(1)), nlAttr(nldevAttrDevName, []byte("rxe0\x00"))...)
)

func TestParseQPDump(t *testing.T) {
	qpGet := nldevType(nldevCmdResQPGet)
	rc := RdmaQP{Device: "rxe0", Port: 1, QPNum: 0x11, Type: 2, State: 3, PID: 311}
	gsi := RdmaQP{Device: "rxe0", Port: 1, QPNum: 1, Type: 1, State: 3, Kernel: true}
	cases := []struct {
		name    string
		read    []byte
		want    []RdmaQP
		done    bool
		wantErr string
	}{
		{"a table and the end", append(nlMsg(qpGet, unix.NLM_F_MULTI, 2, rxeHandle, nest(nldevAttrResQP, gsiEntry, rcEntry)),
			nlMsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 2, u32(0))...), []RdmaQP{gsi, rc}, true, ""},
		{"more to read", nlMsg(qpGet, unix.NLM_F_MULTI, 2, rxeHandle, nest(nldevAttrResQP, rcEntry)), []RdmaQP{rc}, false, ""},
		{"a late reply to another request is skipped", append(nlMsg(qpGet, unix.NLM_F_MULTI, 1, rxeHandle, nest(nldevAttrResQP, gsiEntry)),
			nlMsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 2, u32(0))...), nil, true, ""},
		{"no QP", nlMsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 2, u32(0)), nil, true, ""},
		{"the kernel refuses", nlMsg(unix.NLMSG_ERROR, 0, 2, u32(negErrno(unix.EOPNOTSUPP))), nil, false, "operation not supported"},
		{"truncated message", nlMsg(qpGet, 0, 2, rxeHandle)[:20], nil, false, "netlink message of"},
		{"entry without a number", nlMsg(qpGet, 0, 2, rxeHandle, nest(nldevAttrResQP, nest(nldevAttrQPEntry, nlAttr(nldevAttrResType, []byte{2})))),
			nil, false, "without its number"},
		{"attribute past its message", nlMsg(qpGet, 0, 2, []byte{200, 0, 1, 0, 0, 0, 0, 0}), nil, false, "netlink attribute 1 of 200 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, done, err := parseNLReplies(c.read, 2, parseQPDump)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || done != c.done || !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, done %v, err %v; want %+v, done %v", got, done, err, c.want, c.done)
			}
		})
	}
}

func TestParseDevices(t *testing.T) {
	read := append(nlMsg(nldevType(nldevCmdGet), unix.NLM_F_MULTI, 1, rxeHandle, nlAttr(nldevAttrPort, u32(1)), nlAttr(5, []byte("1.0\x00"))),
		nlMsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 1, u32(0))...)
	got, done, err := parseNLReplies(read, 1, parseDevices)
	if err != nil || !done || !reflect.DeepEqual(got, []rdmaDev{{1, "rxe0"}}) {
		t.Errorf("got %+v, done %v, err %v", got, done, err)
	}
}

// On a kernel without RDMA (or without a device) the error says so, and
// is not taken for a failure of the check.
func TestRdmaQPsWithoutRdma(t *testing.T) {
	qps, err := RdmaQPs()
	if err == nil {
		t.Skipf("this kernel has RDMA netlink: %d QP(s) listed", len(qps))
	}
	if !errors.Is(err, ErrNoRdmaNetlink) {
		t.Fatalf("error %v does not say RDMA netlink is missing", err)
	}
}

func TestCrossCheck(t *testing.T) {
	const pid = 311
	res := ScanResult{
		Contexts: []ScanContext{{Addr: 0xc0, Provider: "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"},
			{Addr: 0xd0, Provider: "/usr/bin/sqscope"}},
		QPs: []ScanQP{{Context: 0xc0, QPNum: 0x11, Type: 2, State: 3}, {Context: 0xd0, QPNum: 0x40, Type: 2, State: 3}},
	}
	rc := RdmaQP{Device: "rxe0", Port: 1, QPNum: 0x11, Type: 2, State: 3, PID: pid}
	errQP := rc
	errQP.State = 6
	other := RdmaQP{Device: "rxe0", Port: 1, QPNum: 0x12, Type: 2, State: 3, PID: pid}
	gsi := RdmaQP{Device: "rxe0", Port: 1, QPNum: 1, Type: 1, State: 3, Kernel: true}
	cases := []struct {
		name string
		res  ScanResult
		kqps []RdmaQP
		kerr error
		want string
		bad  bool
	}{
		{"agrees, with device and port", res, []RdmaQP{gsi, rc, {QPNum: 0x11, PID: pid + 1, Type: 4}}, nil,
			"the kernel's QP list (RDMA netlink) agrees on all 1 QP(s) (number, type, state, pid): 0x11 RC RTS on rxe0 port 1", false},
		{"state differs", res, []RdmaQP{errQP}, nil,
			"the kernel's QP list (RDMA netlink) DISAGREES: QP 0x11: RC RTS in memory, RC ERR by the kernel", true},
		{"not the kernel's", res, []RdmaQP{gsi}, nil,
			"the kernel's QP list (RDMA netlink) DISAGREES: QP 0x11 found in memory is not the kernel's for process 311", true},
		{"one more in the kernel", res, []RdmaQP{rc, other}, nil,
			"the kernel's QP list (RDMA netlink) DISAGREES: QP 0x12 (0x12 RC RTS on rxe0 port 1) the kernel lists for process 311 was not found in memory (made since the scan, or missed by it)", true},
		{"no RDMA netlink", res, nil, ErrNoRdmaNetlink,
			"not cross-checked with the kernel's QP list: RDMA netlink not available", false},
		{"only the simulated HCA's QPs", ScanResult{Contexts: res.Contexts[1:], QPs: res.QPs[1:]}, nil, ErrNoRdmaNetlink, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, bad := crossCheck(pid, &c.res, c.kqps, c.kerr)
			if got != c.want || bad != c.bad {
				t.Errorf("got %q (disagrees %v)\nwant %q (disagrees %v)", got, bad, c.want, c.bad)
			}
		})
	}
}

// The parser takes whatever the kernel sends: it never panics and never
// reads past a message.
func FuzzParseQPDump(f *testing.F) {
	f.Add(nlMsg(nldevType(nldevCmdResQPGet), unix.NLM_F_MULTI, 2, rxeHandle, nest(nldevAttrResQP, gsiEntry, rcEntry)))
	f.Add(nlMsg(unix.NLMSG_ERROR, 0, 2, u32(negErrno(unix.EINVAL))))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseNLReplies(b, 2, parseQPDump)
		parseNLReplies(b, 2, parseDevices)
	})
}
