package verbs

/*
#include <stdlib.h>
#include "device.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// DeviceOptions choose the port and address of a real device.
type DeviceOptions struct {
	Port int // 1-based; 0 means 1
	// GIDIndex is the GID table index endpoints address each other with on
	// a RoCE port; -1 picks a RoCE v2 GID, IPv4-mapped if there is one.
	// InfiniBand ports use the LID and ignore it.
	GIDIndex int
}

const (
	defaultRQDepth = 512     // receives kept posted on each peer QP
	minBufSize     = 4 << 10 // smallest registered buffer
	maxBufSize     = 1 << 30
	maxRecvRing    = 1 << 30 // bytes of receive slots per peer
	defaultSendOps = C.IBV_QP_EX_WITH_SEND | C.IBV_QP_EX_WITH_RDMA_WRITE
	udSendOps      = C.IBV_QP_EX_WITH_SEND | C.IBV_QP_EX_WITH_SEND_WITH_IMM
)

var (
	_ SharedDevice  = (*device)(nil)
	_ LimitedDevice = (*device)(nil)
)

// device is a libibverbs device opened on one port.
type device struct {
	mu   sync.Mutex
	c    *C.struct_sqd_device // nil once closed
	name string
	desc string
	eps  []*C.struct_sqd_endpoint
	cqs  []*CQ  // shared send CQs, destroyed after the endpoints
	srqs []*SRQ // SRQs, likewise
}

// OpenDevice opens the libibverbs device name (as ibv_devices lists it) on
// opts.Port and settles how its endpoints address each other.
func OpenDevice(name string, opts DeviceOptions) (Device, error) {
	port := opts.Port
	if port == 0 {
		port = 1
	}
	if port < 1 || port > 255 {
		return nil, fmt.Errorf("invalid port %d for %s (ports are numbered from 1)", opts.Port, name)
	}
	if opts.GIDIndex < -1 {
		return nil, fmt.Errorf("invalid GID index %d for %s (want -1 to choose, or a table index)", opts.GIDIndex, name)
	}
	if name == "" {
		names, err := deviceNames()
		return nil, missingDeviceError(name, names, err)
	}

	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var cerr C.struct_sqd_err
	var found C.int
	c := C.sqd_open(cname, &found, &cerr)
	if c == nil {
		if found == 0 && cerr.errnum == 0 {
			names, err := deviceNames()
			return nil, missingDeviceError(name, names, err)
		}
		return nil, cError(name, &cerr)
	}
	d := &device{c: c, name: name}
	if err := d.setup(port, opts.GIDIndex); err != nil {
		C.sqd_close(c, nil)
		return nil, err
	}
	return d, nil
}

// setup picks the port and the address endpoints use on it.
func (d *device) setup(port, gidIndex int) error {
	if n := int(d.c.dattr.phys_port_cnt); port > n {
		return fmt.Errorf("%s has %d port(s); there is no port %d", d.name, n, port)
	}
	var cerr C.struct_sqd_err
	if C.sqd_use_port(d.c, C.int(port), &cerr) != 0 {
		return cError(d.name, &cerr)
	}
	pa := &d.c.pattr
	if pa.state != C.IBV_PORT_ACTIVE {
		return fmt.Errorf("%s port %d is %s, not ACTIVE (is its link or netdev up?)",
			d.name, port, C.GoString(C.ibv_port_state_str(pa.state)))
	}
	mtu := 128 << uint(pa.active_mtu)
	if d.c.roce == 0 {
		if pa.lid == 0 {
			return fmt.Errorf("%s port %d has no LID (is a subnet manager running?)", d.name, port)
		}
		d.desc = fmt.Sprintf("%s port %d (InfiniBand, LID %d, MTU %d)", d.name, port, pa.lid, mtu)
		return nil
	}

	tblLen := int(pa.gid_tbl_len)
	entries := d.gidTable()
	if gidIndex >= 0 {
		if gidIndex >= tblLen {
			return fmt.Errorf("GID index %d is out of range: %s port %d has %d entries", gidIndex, d.name, port, tblLen)
		}
	} else {
		e, err := chooseGID(entries)
		if err != nil {
			return fmt.Errorf("%s port %d: %w", d.name, port, err)
		}
		gidIndex = e.Index
	}
	if C.sqd_use_gid(d.c, C.int(gidIndex), &cerr) != 0 {
		return cError(d.name, &cerr)
	}
	typ := "RoCE"
	for _, e := range entries {
		if e.Index == gidIndex {
			typ = e.Type.String()
		}
	}
	gid := C.GoBytes(unsafe.Pointer(&d.c.gid), 16)
	d.desc = fmt.Sprintf("%s port %d (RoCE, GID index %d %s %s, MTU %d)",
		d.name, port, gidIndex, typ, net.IP(gid), mtu)
	return nil
}

func (d *device) gidTable() []gidEntry {
	n := int(d.c.pattr.gid_tbl_len)
	if n <= 0 {
		return nil
	}
	raw := make([]C.struct_ibv_gid_entry, n)
	got := int(C.sqd_gid_table(d.c, &raw[0], C.int(n)))
	out := make([]gidEntry, 0, got)
	for _, r := range raw[:got] {
		e := gidEntry{Index: int(r.gid_index), Type: gidType(r.gid_type)}
		copy(e.GID[:], C.GoBytes(unsafe.Pointer(&r.gid), 16))
		out = append(out, e)
	}
	return out
}

// deviceNames lists the RDMA devices present.
func deviceNames() ([]string, error) {
	buf := make([]byte, 4096)
	n := C.sqd_device_names((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	if n < 0 {
		return nil, fmt.Errorf("listing RDMA devices: %w", syscall.Errno(-n))
	}
	if n == 0 {
		return nil, nil
	}
	return strings.Split(C.GoString((*C.char)(unsafe.Pointer(&buf[0]))), ","), nil
}

// ErrNoDevice is wrapped by the error OpenDevice returns for a device name
// that does not exist: a usage mistake, not a failure of the device.
var ErrNoDevice = errors.New("no such RDMA device")

// missingDeviceError says that name does not exist and what does.
func missingDeviceError(name string, names []string, listErr error) error {
	return &noDeviceError{msg: missingDeviceText(name, names, listErr)}
}

type noDeviceError struct{ msg string }

func (e *noDeviceError) Error() string        { return e.msg }
func (e *noDeviceError) Is(target error) bool { return target == ErrNoDevice }

func missingDeviceText(name string, names []string, listErr error) string {
	what := fmt.Sprintf("no RDMA device %q", name)
	if name == "" {
		what = "no RDMA device name given"
	}
	switch {
	case listErr != nil:
		return fmt.Sprintf("%s (%v)", what, listErr)
	case len(names) == 0:
		return what + " (no RDMA devices found; is a provider loaded?)"
	}
	return fmt.Sprintf("%s (devices: %s)", what, strings.Join(names, ", "))
}

// cError turns a failure reported by device.c into one line.
func cError(dev string, e *C.struct_sqd_err) error {
	var cause error = syscall.Errno(e.errnum)
	if e.errnum == 0 {
		cause = errors.New("failed without an error code")
	}
	detail := C.GoString(&e.detail[0])
	if e.no_wr_api != 0 {
		return fmt.Errorf("%s does not support the ibv_wr_* API (%s): %w", dev, detail, cause)
	}
	op := C.GoString(&e.op[0])
	if detail != "" {
		return fmt.Errorf("%s on %s (%s): %w", op, dev, detail, cause)
	}
	return fmt.Errorf("%s on %s: %w", op, dev, cause)
}

// gidType is enum ibv_gid_type.
type gidType uint32

const (
	gidIB     gidType = C.IBV_GID_TYPE_IB
	gidRoCEv1 gidType = C.IBV_GID_TYPE_ROCE_V1
	gidRoCEv2 gidType = C.IBV_GID_TYPE_ROCE_V2
)

func (t gidType) String() string {
	switch t {
	case gidIB:
		return "IB"
	case gidRoCEv1:
		return "RoCE v1"
	case gidRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("gid-type(%d)", uint32(t))
}

// gidEntry is one valid entry of a port's GID table.
type gidEntry struct {
	Index int
	Type  gidType
	GID   [16]byte
}

// gidRank orders GIDs for a RoCE connection: v2 (routable UDP/IP) before
// v1, an IPv4-mapped address before an IPv6 one; 0 means unusable.
func gidRank(e gidEntry) int {
	if e.GID == ([16]byte{}) {
		return 0
	}
	v4 := net.IP(e.GID[:]).To4() != nil
	switch {
	case e.Type == gidRoCEv2 && v4:
		return 4
	case e.Type == gidRoCEv2:
		return 3
	case e.Type == gidRoCEv1 && v4:
		return 2
	case e.Type == gidRoCEv1:
		return 1
	}
	return 0
}

// chooseGID picks the best-ranked entry, the lowest index among equals.
func chooseGID(entries []gidEntry) (gidEntry, error) {
	best, bestRank := gidEntry{}, 0
	for _, e := range entries {
		r := gidRank(e)
		if r > bestRank || (r == bestRank && r > 0 && e.Index < best.Index) {
			best, bestRank = e, r
		}
	}
	if bestRank == 0 {
		return gidEntry{}, errors.New("no RoCE GID in the GID table (does the netdev have an IP address?)")
	}
	return best, nil
}

// deviceLimits are the device attributes NewEndpoint checks a QPConfig
// against before asking the provider.
type deviceLimits struct {
	MaxQPWR uint32
	MaxSGE  uint32
	UDMTU   uint32 // bytes one UD message can carry
}

// epConfig is a QPConfig with defaults applied, as device_endpoint.c takes it.
type epConfig struct {
	Type       QPType
	MaxSendWR  uint32
	MaxSendSGE uint32
	MaxInline  uint32
	RQDepth    uint32
	SigAll     bool
	WRAPI      bool
	SendOps    uint64
	BufSize    int
	CQEx       bool
	// RemoteAtomic: the peer QP and its memory allow remote atomics
	RemoteAtomic bool
	CQDepth      uint32
	StopAtRTR    bool
}

// endpointConfig validates cfg and fills in the defaults.
func endpointConfig(dev string, cfg QPConfig, lim deviceLimits) (epConfig, error) {
	ec := epConfig{
		Type:       cfg.Type,
		MaxSendWR:  cfg.MaxSendWR,
		MaxSendSGE: cfg.MaxSendSGE,
		MaxInline:  cfg.MaxInline,
		RQDepth:    cfg.MaxRecvWR,
		SigAll:     cfg.SigAll,
		WRAPI:      cfg.WRAPI,
		SendOps:    cfg.SendOps,
		BufSize:    cfg.BufSize,
		CQEx:       cfg.CQEx,

		RemoteAtomic: cfg.RemoteAtomic,
		CQDepth:      cfg.CQDepth,
		StopAtRTR:    cfg.StopAtRTR,
	}
	if ec.Type != RC && ec.Type != UD {
		return ec, fmt.Errorf("unsupported QP type %v on %s (want RC or UD)", ec.Type, dev)
	}
	if ec.MaxSendWR == 0 {
		return ec, fmt.Errorf("max_send_wr must be at least 1")
	}
	if lim.MaxQPWR > 0 && ec.MaxSendWR > lim.MaxQPWR {
		return ec, fmt.Errorf("max_send_wr %d exceeds %s's max_qp_wr %d", ec.MaxSendWR, dev, lim.MaxQPWR)
	}
	if ec.MaxSendSGE == 0 {
		ec.MaxSendSGE = 1
	}
	if lim.MaxSGE > 0 && ec.MaxSendSGE > lim.MaxSGE {
		return ec, fmt.Errorf("max_send_sge %d exceeds %s's max_sge %d", ec.MaxSendSGE, dev, lim.MaxSGE)
	}
	if ec.RQDepth == 0 {
		ec.RQDepth = defaultRQDepth
		if lim.MaxQPWR > 0 && ec.RQDepth > lim.MaxQPWR {
			ec.RQDepth = lim.MaxQPWR
		}
	} else if lim.MaxQPWR > 0 && ec.RQDepth > lim.MaxQPWR {
		return ec, fmt.Errorf("max_recv_wr %d exceeds %s's max_qp_wr %d", ec.RQDepth, dev, lim.MaxQPWR)
	}
	if ec.BufSize < 0 || ec.BufSize > maxBufSize {
		return ec, fmt.Errorf("buffer size %d out of range (0 to %d bytes)", ec.BufSize, maxBufSize)
	}
	if ec.BufSize < minBufSize {
		ec.BufSize = minBufSize
	}
	slot := uint64(ec.BufSize)
	if ec.Type == UD {
		slot = uint64(C.SQD_GRH_LEN) + uint64(lim.UDMTU)
	}
	if ring := slot * uint64(ec.RQDepth); ring > maxRecvRing {
		return ec, fmt.Errorf("the peer's receive ring (%d x %d bytes) exceeds %d MiB; lower the buffer size or max_recv_wr",
			ec.RQDepth, slot, maxRecvRing>>20)
	}
	if ec.WRAPI {
		if ec.SendOps == 0 {
			ec.SendOps = defaultSendOps
			if ec.Type == UD {
				ec.SendOps = C.IBV_QP_EX_WITH_SEND
			}
		}
		if ec.Type == UD && ec.SendOps&^udSendOps != 0 {
			return ec, fmt.Errorf("send_ops_flags 0x%x ask a UD QP for more than SEND (UD allows 0x%x)", ec.SendOps, udSendOps)
		}
	}
	return ec, nil
}

func (d *device) Name() string    { return d.name }
func (d *device) Simulated() bool { return false }

// String names the device, port and how endpoints address each other.
func (d *device) String() string {
	if d.desc == "" {
		return d.name
	}
	return d.desc
}

// NewEndpoint creates a sending QP and a peer QP on the same port, connects
// them and keeps receives posted on the peer.
func (d *device) NewEndpoint(cfg QPConfig) (*Endpoint, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		return nil, fmt.Errorf("device %s is closed", d.name)
	}
	lim := deviceLimits{
		MaxQPWR: uint32(d.c.dattr.max_qp_wr),
		MaxSGE:  uint32(d.c.dattr.max_sge),
		UDMTU:   128 << uint(d.c.pattr.active_mtu),
	}
	ec, err := endpointConfig(d.name, cfg, lim)
	if err != nil {
		return nil, err
	}
	if err := d.sharedOK(cfg); err != nil {
		return nil, err
	}
	cc := C.struct_sqd_qp_config{
		qp_type:      C.int(ec.Type),
		max_send_wr:  C.uint32_t(ec.MaxSendWR),
		max_send_sge: C.uint32_t(ec.MaxSendSGE),
		max_inline:   C.uint32_t(ec.MaxInline),
		rq_depth:     C.uint32_t(ec.RQDepth),
		sig_all:      cbool(ec.SigAll),
		wr_api:       cbool(ec.WRAPI),
		send_ops:     C.uint64_t(ec.SendOps),
		buf_size:     C.size_t(ec.BufSize),
		cq_ex:        cbool(ec.CQEx),
		atomics:      cbool(ec.RemoteAtomic),
		cq_depth:     C.uint32_t(ec.CQDepth),
		stop_at_rtr:  cbool(ec.StopAtRTR),
	}
	if cfg.SendCQ != nil {
		cc.send_cq = cfg.SendCQ.dev
	}
	if cfg.SRQ != nil {
		cc.srq = cfg.SRQ.dev
	}
	var cerr C.struct_sqd_err
	e := C.sqd_endpoint_create(d.c, &cc, &cerr)
	if e == nil {
		return nil, cError(d.name, &cerr)
	}
	d.eps = append(d.eps, e)
	return &Endpoint{
		c:     &e.ep,
		QPNum: uint32(e.ep.qp.qp_num),
		Type:  ec.Type,
		Caps: Caps{
			MaxSendWR:     uint32(e.caps.max_send_wr),
			MaxRecvWR:     uint32(e.caps.max_recv_wr),
			MaxSendSGE:    uint32(e.caps.max_send_sge),
			MaxRecvSGE:    uint32(e.caps.max_recv_sge),
			MaxInlineData: uint32(e.caps.max_inline_data),
		},
		SigAll: ec.SigAll,
	}, nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Counters has nothing to offer: a real HCA keeps no ground truth for
// sqscope, so the workload counts its own side.
func (d *device) Counters(e *Endpoint) (Counters, bool) { return Counters{}, false }

// owner returns the device_endpoint.c endpoint behind e, if this device made it.
func (d *device) owner(e *Endpoint) *C.struct_sqd_endpoint {
	if e == nil {
		return nil
	}
	for _, c := range d.eps {
		if &c.ep == e.c {
			return c
		}
	}
	return nil
}

// SetError moves the endpoint's sending QP to IBV_QPS_ERR, which flushes
// its outstanding WRs.
func (d *device) SetError(e *Endpoint) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		return fmt.Errorf("device %s is closed", d.name)
	}
	c := d.owner(e)
	if c == nil {
		return fmt.Errorf("endpoint is not one of %s's", d.name)
	}
	if errno := C.sqd_endpoint_set_error(c); errno != 0 {
		return fmt.Errorf("moving QP %d on %s to the error state: %w", e.QPNum, d.name, syscall.Errno(errno))
	}
	return nil
}

// Close destroys every endpoint, newest first, then the SRQs and shared
// CQs they used, and closes the device. It goes on past a failure and
// returns the first: a QP, CQ or SRQ the provider would not destroy.
func (d *device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		return nil
	}
	var cerr C.struct_sqd_err
	for i := len(d.eps) - 1; i >= 0; i-- {
		C.sqd_endpoint_destroy(d.eps[i], &cerr)
	}
	d.eps = nil
	for i := len(d.srqs) - 1; i >= 0; i-- {
		C.sqd_srq_destroy(d.srqs[i].dev, &cerr)
	}
	for i := len(d.cqs) - 1; i >= 0; i-- {
		C.sqd_cq_destroy(d.cqs[i].dev, &cerr)
	}
	d.srqs, d.cqs = nil, nil
	C.sqd_close(d.c, &cerr)
	d.c = nil
	if cerr.op[0] != 0 {
		return cError(d.name, &cerr)
	}
	return nil
}

// Limits are the device's limits on the objects a run creates.
func (d *device) Limits() Limits {
	a := &d.c.dattr
	return Limits{MaxQP: int(a.max_qp), MaxCQ: int(a.max_cq), MaxCQE: int(a.max_cqe),
		MaxSRQ: int(a.max_srq), MaxSRQWR: int(a.max_srq_wr)}
}

// NewCQ creates a send CQ of depth entries for endpoints to share
// (QPConfig.SendCQ), extended (polled with ibv_start_poll..ibv_end_poll)
// when ex.
func (d *device) NewCQ(depth uint32, ex bool) (*CQ, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		return nil, fmt.Errorf("device %s is closed", d.name)
	}
	if lim := d.c.dattr.max_cqe; depth == 0 || (lim > 0 && int64(depth) > int64(lim)) {
		return nil, fmt.Errorf("a shared CQ of %d entries: %s takes 1 to max_cqe %d", depth, d.name, lim)
	}
	var cerr C.struct_sqd_err
	c := C.sqd_cq_create(d.c, C.uint32_t(depth), cbool(ex), &cerr)
	if c == nil {
		return nil, cError(d.name, &cerr)
	}
	cq := &CQ{c: c.cq, cqx: c.cqx, dev: c, Addr: uint64(uintptr(unsafe.Pointer(c.cq)))}
	d.cqs = append(d.cqs, cq)
	return cq, nil
}

// NewSRQ creates a shared receive queue of depth receives, each of
// bufSize bytes, its CQ, and fills it. The peers that take their
// receives from it share one protection domain with it.
func (d *device) NewSRQ(depth uint32, bufSize int) (*SRQ, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		return nil, fmt.Errorf("device %s is closed", d.name)
	}
	if lim := d.c.dattr.max_srq_wr; depth == 0 || (lim > 0 && int64(depth) > int64(lim)) {
		return nil, fmt.Errorf("an SRQ of %d receives: %s takes 1 to max_srq_wr %d", depth, d.name, lim)
	}
	if bufSize < 64 || bufSize > maxBufSize || uint64(depth)*uint64(bufSize) > maxRecvRing {
		return nil, fmt.Errorf("an SRQ of %d receives of %d bytes: want 64 to %d bytes each, %d MiB in all",
			depth, bufSize, maxBufSize, maxRecvRing>>20)
	}
	var cerr C.struct_sqd_err
	c := C.sqd_srq_create(d.c, C.uint32_t(depth), C.uint32_t(bufSize), &cerr)
	if c == nil {
		return nil, cError(d.name, &cerr)
	}
	q := &SRQ{srq: c.srq, rcq: c.rcq, mr: c.mr, rbuf: c.rbuf, depth: uint32(c.depth),
		recvSize: uint32(c.recv_size), dev: c, Addr: uint64(uintptr(unsafe.Pointer(c.srq)))}
	d.srqs = append(d.srqs, q)
	return q, nil
}

// sharedOK checks that the shared CQ and SRQ cfg names are this device's,
// and that an SRQ serves an RC QP.
func (d *device) sharedOK(cfg QPConfig) error {
	if cq := cfg.SendCQ; cq != nil && !slices.Contains(d.cqs, cq) {
		return fmt.Errorf("the shared send CQ is not one of %s's", d.name)
	}
	if q := cfg.SRQ; q != nil {
		if !slices.Contains(d.srqs, q) {
			return fmt.Errorf("the SRQ is not one of %s's", d.name)
		}
		if cfg.Type != RC {
			return fmt.Errorf("an SRQ on %s serves RC QPs only, not %v", d.name, cfg.Type)
		}
	}
	return nil
}
