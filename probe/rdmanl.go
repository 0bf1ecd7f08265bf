package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel lists the QPs of every RDMA device through its RDMA netlink
// resource dump (what `rdma res show qp` prints): the nldev client of
// NETLINK_RDMA, RDMA_NLDEV_CMD_GET to list the devices, then
// RDMA_NLDEV_CMD_RES_QP_GET per device. The numbers are the kernel's ABI,
// from include/uapi/rdma/rdma_netlink.h.
const (
	rdmaNLNldev       = 5 // RDMA_NL_NLDEV
	nldevCmdGet       = 1 // RDMA_NLDEV_CMD_GET
	nldevCmdResQPGet  = 10
	nldevAttrDevIndex = 1 // u32
	nldevAttrDevName  = 2 // string
	nldevAttrPort     = 3 // u32
	nldevAttrResQP    = 19
	nldevAttrQPEntry  = 20
	nldevAttrLQPN     = 21 // u32
	nldevAttrResType  = 26 // u8, enum ib_qp_type (ibv_qp_type's numbers)
	nldevAttrResState = 27 // u8, enum ib_qp_state (ibv_qp_state's numbers)
	nldevAttrResPID   = 28 // u32; absent for a kernel QP
	nlaTypeMask       = 0x3fff
	rdmaNLTimeout     = 2 * time.Second
)

// nldevType is the netlink message type of an nldev command.
func nldevType(cmd uint16) uint16 { return rdmaNLNldev<<10 | cmd }

// RdmaQP is a QP the kernel lists.
type RdmaQP struct {
	Device string `json:"device"`
	Port   uint32 `json:"port"` // 0 until the QP is bound to a port
	QPNum  uint32 `json:"qp_num"`
	Type   uint8  `json:"type"`  // enum ibv_qp_type
	State  uint8  `json:"state"` // enum ibv_qp_state
	PID    uint32 `json:"pid"`
	Kernel bool   `json:"kernel,omitempty"` // made by a kernel consumer: no PID
}

// ErrNoRdmaNetlink is wrapped by RdmaQPs's error when the kernel has no
// RDMA netlink (no RDMA core loaded) or no RDMA device.
var ErrNoRdmaNetlink = errors.New("RDMA netlink not available")

// RdmaQPs asks the kernel for every QP of every RDMA device.
func RdmaQPs() ([]RdmaQP, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_RDMA)
	if err != nil {
		return nil, fmt.Errorf("%w: opening a NETLINK_RDMA socket: %v", ErrNoRdmaNetlink, err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(rdmaNLTimeout.Nanoseconds())
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("%w: binding a NETLINK_RDMA socket: %v", ErrNoRdmaNetlink, err)
	}
	devs, err := nldevDump(fd, 1, nldevCmdGet, nil, parseDevices)
	if err != nil {
		return nil, fmt.Errorf("%w: listing the RDMA devices: %v", ErrNoRdmaNetlink, err)
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: the kernel lists no RDMA device", ErrNoRdmaNetlink)
	}
	var qps []RdmaQP
	for i, d := range devs {
		attr := nlAttr(nldevAttrDevIndex, binary.NativeEndian.AppendUint32(nil, d.index))
		got, err := nldevDump(fd, uint32(2+i), nldevCmdResQPGet, attr, parseQPDump)
		if err != nil {
			return nil, fmt.Errorf("the QPs of RDMA device %s: %w", d.name, err)
		}
		qps = append(qps, got...)
	}
	return qps, nil
}

// nldevDump sends one dump request and parses every reply up to its end.
func nldevDump[T any](fd int, seq uint32, cmd uint16, attrs []byte, parse func(msg []byte) ([]T, error)) ([]T, error) {
	req := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(attrs))
	req = append(req, attrs...)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], nldevType(cmd))
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []T
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, os.NewSyscallError("recvfrom", err)
		}
		got, done, err := parseNLReplies(buf[:n], seq, parse)
		out = append(out, got...)
		if err != nil || done {
			return out, err
		}
	}
}

// parseNLReplies parses the netlink messages of one read: the replies of
// request seq, until NLMSG_DONE (done) or an NLMSG_ERROR.
func parseNLReplies[T any](b []byte, seq uint32, parse func(msg []byte) ([]T, error)) (out []T, done bool, err error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := binary.NativeEndian.Uint32(b[0:])
		typ := binary.NativeEndian.Uint16(b[4:])
		s := binary.NativeEndian.Uint32(b[8:])
		if l < unix.NLMSG_HDRLEN || int(l) > len(b) {
			return out, false, fmt.Errorf("netlink message of %d bytes in a read of %d", l, len(b))
		}
		body := b[unix.NLMSG_HDRLEN:l]
		b = b[min(int(nlAlign(l)), len(b)):]
		if s != seq {
			continue // a late reply to an earlier request
		}
		switch typ {
		case unix.NLMSG_DONE:
			return out, true, nil
		case unix.NLMSG_ERROR:
			if len(body) < 4 {
				return out, false, errors.New("short netlink error message")
			}
			if e := int32(binary.NativeEndian.Uint32(body)); e != 0 {
				return out, false, unix.Errno(-e)
			}
			return out, true, nil // an acknowledgement
		}
		got, err := parse(body)
		if err != nil {
			return out, false, err
		}
		out = append(out, got...)
	}
	return out, false, nil
}

func nlAlign(n uint32) uint32 { return (n + 3) &^ 3 }

// nlAttr encodes one netlink attribute.
func nlAttr(typ uint16, val []byte) []byte {
	b := make([]byte, 4, nlAlign(uint32(4+len(val))))
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(val)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, val...)
	return append(b, make([]byte, cap(b)-len(b))...)
}

// nlAttrs walks the attributes of b, calling fn with each one's type
// (flags masked off) and value.
func nlAttrs(b []byte, fn func(typ uint16, val []byte) error) error {
	for len(b) >= 4 {
		l := binary.NativeEndian.Uint16(b[0:])
		typ := binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask
		if l < 4 || int(l) > len(b) {
			return fmt.Errorf("netlink attribute %d of %d bytes in %d", typ, l, len(b))
		}
		if err := fn(typ, b[4:l]); err != nil {
			return err
		}
		b = b[min(int(nlAlign(uint32(l))), len(b)):]
	}
	return nil
}

func nlU32(val []byte) (uint32, error) {
	if len(val) < 4 {
		return 0, fmt.Errorf("a u32 attribute of %d bytes", len(val))
	}
	return binary.NativeEndian.Uint32(val), nil
}

func nlU8(val []byte) (uint8, error) {
	if len(val) < 1 {
		return 0, errors.New("an empty u8 attribute")
	}
	return val[0], nil
}

func nlStr(val []byte) string {
	for i, c := range val {
		if c == 0 {
			return string(val[:i])
		}
	}
	return string(val)
}

type rdmaDev struct {
	index uint32
	name  string
}

// parseDevices reads an RDMA_NLDEV_CMD_GET reply: one device.
func parseDevices(msg []byte) ([]rdmaDev, error) {
	var d rdmaDev
	seen := false
	err := nlAttrs(msg, func(typ uint16, val []byte) (err error) {
		switch typ {
		case nldevAttrDevIndex:
			d.index, err = nlU32(val)
			seen = true
		case nldevAttrDevName:
			d.name = nlStr(val)
		}
		return err
	})
	if err != nil || !seen {
		return nil, cmpErr(err, "an RDMA device without its index")
	}
	return []rdmaDev{d}, nil
}

// parseQPDump reads an RDMA_NLDEV_CMD_RES_QP_GET reply: the device, then
// a table of QP entries.
func parseQPDump(msg []byte) ([]RdmaQP, error) {
	var dev string
	var qps []RdmaQP
	err := nlAttrs(msg, func(typ uint16, val []byte) error {
		switch typ {
		case nldevAttrDevName:
			dev = nlStr(val)
		case nldevAttrResQP:
			return nlAttrs(val, func(typ uint16, val []byte) error {
				if typ != nldevAttrQPEntry {
					return nil
				}
				q, err := parseQPEntry(val)
				qps = append(qps, q)
				return err
			})
		}
		return nil
	})
	for i := range qps {
		qps[i].Device = dev
	}
	return qps, err
}

func parseQPEntry(b []byte) (q RdmaQP, err error) {
	q.Kernel = true
	var num bool
	err = nlAttrs(b, func(typ uint16, val []byte) (err error) {
		switch typ {
		case nldevAttrPort:
			q.Port, err = nlU32(val)
		case nldevAttrLQPN:
			q.QPNum, err = nlU32(val)
			num = true
		case nldevAttrResType:
			q.Type, err = nlU8(val)
		case nldevAttrResState:
			q.State, err = nlU8(val)
		case nldevAttrResPID:
			q.PID, err = nlU32(val)
			q.Kernel = false
		}
		return err
	})
	if err == nil && !num {
		err = errors.New("a QP entry without its number")
	}
	return q, err
}

func cmpErr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}
