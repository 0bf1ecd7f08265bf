package verbs

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestOpenDeviceMissing(t *testing.T) {
	const name = "sqscope_missing0"
	names, err := deviceNames()
	if err != nil {
		t.Fatalf("deviceNames: %v", err)
	}
	want := `no RDMA device "sqscope_missing0" (no RDMA devices found; is a provider loaded?)`
	if len(names) > 0 {
		want = `no RDMA device "sqscope_missing0" (devices: ` + strings.Join(names, ", ") + ")"
	}
	d, err := OpenDevice(name, DeviceOptions{Port: 1, GIDIndex: -1})
	if err == nil {
		d.Close()
		t.Fatalf("OpenDevice(%q) succeeded", name)
	}
	if err.Error() != want {
		t.Errorf("OpenDevice(%q) error\n got: %s\nwant: %s", name, err, want)
	}
}

func TestOpenDeviceBadOptions(t *testing.T) {
	tests := []struct {
		name string
		dev  string
		opts DeviceOptions
		want string
	}{
		{"negative port", "rxe0", DeviceOptions{Port: -1, GIDIndex: -1}, "invalid port -1 for rxe0 (ports are numbered from 1)"},
		{"port past u8", "rxe0", DeviceOptions{Port: 256, GIDIndex: -1}, "invalid port 256 for rxe0 (ports are numbered from 1)"},
		{"GID index below -1", "rxe0", DeviceOptions{GIDIndex: -2}, "invalid GID index -2 for rxe0 (want -1 to choose, or a table index)"},
		{"empty name", "", DeviceOptions{GIDIndex: -1}, "no RDMA device name given ("},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := OpenDevice(tt.dev, tt.opts)
			if err == nil {
				d.Close()
				t.Fatal("OpenDevice succeeded")
			}
			if !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line starting %q", err, tt.want)
			}
		})
	}
}

func TestMissingDeviceError(t *testing.T) {
	tests := []struct {
		name    string
		dev     string
		names   []string
		listErr error
		want    string
	}{
		{"no devices", "mlx5_0", nil, nil, `no RDMA device "mlx5_0" (no RDMA devices found; is a provider loaded?)`},
		{"one device", "mlx5_0", []string{"rxe0"}, nil, `no RDMA device "mlx5_0" (devices: rxe0)`},
		{"two devices", "rxe1", []string{"rxe0", "mlx5_0"}, nil, `no RDMA device "rxe1" (devices: rxe0, mlx5_0)`},
		{"empty name", "", []string{"rxe0"}, nil, `no RDMA device name given (devices: rxe0)`},
		{"list fails", "rxe0", nil, errors.New("listing RDMA devices: permission denied"),
			`no RDMA device "rxe0" (listing RDMA devices: permission denied)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := missingDeviceError(tt.dev, tt.names, tt.listErr)
			if got := err.Error(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !errors.Is(err, ErrNoDevice) {
				t.Errorf("%v is not ErrNoDevice", err)
			}
		})
	}
}

func gid(s string) [16]byte {
	var g [16]byte
	copy(g[:], net.ParseIP(s).To16())
	return g
}

func TestChooseGID(t *testing.T) {
	v4 := gid("10.0.0.1")
	v4b := gid("192.168.1.7")
	ll := gid("fe80::1")
	v6 := gid("2001:db8::5")
	tests := []struct {
		name    string
		entries []gidEntry
		want    int // index, or -1 for an error
	}{
		{"rxe on dummy0 with IPv4", []gidEntry{
			{0, gidRoCEv1, ll}, {1, gidRoCEv2, ll}, {2, gidRoCEv1, v4}, {3, gidRoCEv2, v4},
		}, 3},
		{"rxe with IPv4 only", []gidEntry{{0, gidRoCEv1, v4}, {1, gidRoCEv2, v4}}, 1},
		{"v2 IPv4 preferred over v2 IPv6", []gidEntry{{1, gidRoCEv2, v6}, {5, gidRoCEv2, v4b}}, 5},
		{"v2 IPv6 over v1 IPv4", []gidEntry{{2, gidRoCEv1, v4}, {3, gidRoCEv2, v6}}, 3},
		{"lowest index among equals", []gidEntry{{7, gidRoCEv2, v4b}, {3, gidRoCEv2, v4}, {9, gidRoCEv2, v4}}, 3},
		{"order of the table does not matter", []gidEntry{{3, gidRoCEv2, v4}, {1, gidRoCEv1, v4}, {2, gidRoCEv2, v4}}, 2},
		{"v1 only falls back to v1", []gidEntry{{0, gidRoCEv1, ll}, {1, gidRoCEv1, v4}}, 1},
		{"zero GIDs are skipped", []gidEntry{{0, gidRoCEv2, [16]byte{}}, {4, gidRoCEv1, ll}}, 4},
		{"IB-type entries are not RoCE", []gidEntry{{0, gidIB, ll}}, -1},
		{"empty table", nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chooseGID(tt.entries)
			if tt.want < 0 {
				if err == nil {
					t.Fatalf("chose index %d, want an error", got.Index)
				}
				if want := "no RoCE GID in the GID table (does the netdev have an IP address?)"; err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("chooseGID: %v", err)
			}
			if got.Index != tt.want {
				t.Errorf("chose index %d (%v %v), want %d", got.Index, got.Type, net.IP(got.GID[:]), tt.want)
			}
		})
	}
}

func TestEndpointConfig(t *testing.T) {
	lim := deviceLimits{MaxQPWR: 16384, MaxSGE: 32, UDMTU: 1024}
	tests := []struct {
		name    string
		cfg     QPConfig
		want    epConfig
		wantErr string
	}{
		{"defaults", QPConfig{Type: RC, MaxSendWR: 128},
			epConfig{Type: RC, MaxSendWR: 128, MaxSendSGE: 1, RQDepth: 512, BufSize: 4096}, ""},
		{"wr API default ops", QPConfig{Type: RC, MaxSendWR: 64, WRAPI: true, MaxInline: 64, BufSize: 65536},
			epConfig{Type: RC, MaxSendWR: 64, MaxSendSGE: 1, MaxInline: 64, RQDepth: 512, WRAPI: true,
				SendOps: defaultSendOps, BufSize: 65536}, ""},
		{"explicit ops and depth kept", QPConfig{Type: UD, MaxSendWR: 16, MaxSendSGE: 2, MaxRecvWR: 64, WRAPI: true, SendOps: 4, SigAll: true},
			epConfig{Type: UD, MaxSendWR: 16, MaxSendSGE: 2, RQDepth: 64, WRAPI: true, SendOps: 4, SigAll: true, BufSize: 4096}, ""},
		{"UD wr API defaults to SEND", QPConfig{Type: UD, MaxSendWR: 8, WRAPI: true},
			epConfig{Type: UD, MaxSendWR: 8, MaxSendSGE: 1, RQDepth: 512, WRAPI: true, SendOps: 1 << 2, BufSize: 4096}, ""},
		{"UD wr API with RDMA WRITE", QPConfig{Type: UD, MaxSendWR: 8, WRAPI: true, SendOps: 5}, epConfig{},
			"send_ops_flags 0x5 ask a UD QP for more than SEND (UD allows 0xc)"},
		{"bad type", QPConfig{Type: 9, MaxSendWR: 1}, epConfig{}, "unsupported QP type qptype(9) on rxe0 (want RC or UD)"},
		{"zero depth", QPConfig{Type: RC}, epConfig{}, "max_send_wr must be at least 1"},
		{"depth over device", QPConfig{Type: RC, MaxSendWR: 20000}, epConfig{}, "max_send_wr 20000 exceeds rxe0's max_qp_wr 16384"},
		{"sge over device", QPConfig{Type: RC, MaxSendWR: 1, MaxSendSGE: 33}, epConfig{}, "max_send_sge 33 exceeds rxe0's max_sge 32"},
		{"recv depth over device", QPConfig{Type: RC, MaxSendWR: 1, MaxRecvWR: 16385}, epConfig{}, "max_recv_wr 16385 exceeds rxe0's max_qp_wr 16384"},
		{"negative buffer", QPConfig{Type: RC, MaxSendWR: 1, BufSize: -1}, epConfig{}, "buffer size -1 out of range (0 to 1073741824 bytes)"},
		{"receive ring too big", QPConfig{Type: RC, MaxSendWR: 1, BufSize: 8 << 20, MaxRecvWR: 512}, epConfig{},
			"the peer's receive ring (512 x 8388608 bytes) exceeds 1024 MiB; lower the buffer size or max_recv_wr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := endpointConfig("rxe0", tt.cfg, lim)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("endpointConfig: %v", err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestClosedDevice(t *testing.T) {
	d := &device{name: "rxe0"}
	if _, err := d.NewEndpoint(QPConfig{Type: RC, MaxSendWR: 1}); err == nil || err.Error() != "device rxe0 is closed" {
		t.Errorf("NewEndpoint on a closed device: %v", err)
	}
	if _, err := d.NewCQ(64, false); err == nil || err.Error() != "device rxe0 is closed" {
		t.Errorf("NewCQ on a closed device: %v", err)
	}
	if _, err := d.NewSRQ(64, 4096); err == nil || err.Error() != "device rxe0 is closed" {
		t.Errorf("NewSRQ on a closed device: %v", err)
	}
	if err := d.SetError(nil); err == nil || err.Error() != "device rxe0 is closed" {
		t.Errorf("SetError on a closed device: %v", err)
	}
	if _, ok := d.Counters(&Endpoint{}); ok {
		t.Error("a real device reported counters")
	}
	if d.Simulated() || d.Name() != "rxe0" {
		t.Errorf("Simulated %v Name %q", d.Simulated(), d.Name())
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestDeviceEndpoints runs on a real device named by SQSCOPE_RDMA_DEVICE
// (e.g. rxe0 on Soft-RoCE).
func TestDeviceEndpoints(t *testing.T) {
	name := os.Getenv("SQSCOPE_RDMA_DEVICE")
	if name == "" {
		t.Skip("SQSCOPE_RDMA_DEVICE is not set; no RDMA device to test on")
	}
	d, err := OpenDevice(name, DeviceOptions{Port: 1, GIDIndex: -1})
	if err != nil {
		t.Fatalf("OpenDevice: %v", err)
	}
	defer d.Close()
	t.Logf("opened %v", d)
	tests := []struct {
		name string
		cfg  QPConfig
	}{
		{"RC", QPConfig{Type: RC, MaxSendWR: 128, MaxInline: 64, BufSize: 4096}},
		{"RC sig_all", QPConfig{Type: RC, MaxSendWR: 16, SigAll: true}},
		{"UD", QPConfig{Type: UD, MaxSendWR: 64, MaxInline: 32, MaxRecvWR: 64}},
		{"RC wr API", QPConfig{Type: RC, MaxSendWR: 32, WRAPI: true}},
		{"UD wr API", QPConfig{Type: UD, MaxSendWR: 32, MaxInline: 64, WRAPI: true}},
	}
	var eps []*Endpoint
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := d.NewEndpoint(tt.cfg)
			if err != nil {
				if tt.cfg.WRAPI && strings.Contains(err.Error(), "does not support the ibv_wr_* API") {
					t.Skip(err)
				}
				t.Fatalf("NewEndpoint: %v", err)
			}
			eps = append(eps, e)
			if e.QPNum == 0 || e.Ptr() == nil || e.Type != tt.cfg.Type || e.SigAll != tt.cfg.SigAll {
				t.Errorf("endpoint %+v", e)
			}
			if e.Caps.MaxSendWR < tt.cfg.MaxSendWR || e.Caps.MaxInlineData < tt.cfg.MaxInline || e.Caps.MaxSendSGE < 1 {
				t.Errorf("caps %+v below the asked %+v", e.Caps, tt.cfg)
			}
			t.Logf("QP %d caps %+v", e.QPNum, e.Caps)
		})
	}
	if len(eps) == 0 {
		t.Fatal("no endpoint was created")
	}
	if err := d.SetError(eps[0]); err != nil {
		t.Errorf("SetError: %v", err)
	}
	if err := d.SetError(&Endpoint{}); err == nil {
		t.Error("SetError accepted an endpoint of no device")
	}
	_, err = d.NewEndpoint(QPConfig{Type: RC, MaxSendWR: 1, MaxInline: 1 << 20})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), name) {
		t.Errorf("an impossible max_inline_data: %v", err)
	}
	var errno syscall.Errno
	if err != nil && !errors.As(err, &errno) {
		t.Errorf("error %v carries no errno", err)
	}
	t.Logf("impossible inline: %v", err)
}
